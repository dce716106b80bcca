"""The interruption queue as a source of the NodePool controller: a supervised task that
long-polls the queue, records each interruption on its Node, enqueues the Node's pool, and
only then deletes the message.

The record is the Node's annotations (:mod:`.._interrupted`), so the NodePool controller
acts on what the cluster says (a restart, or another replica reading the message, changes
nothing), through its one disruption path: replacement first while time allows, then taint,
drain through the Eviction API, VM, Node (:mod:`..nodepool._interruption`).

What each kind of message does:

- a spot interruption warning, a scheduled change (AWS Health), a state change to stopping,
  stopped, shutting-down or terminated: the Node is marked, with the time its VM goes;
- a rebalance recommendation: counted and deleted, nothing else. It says a spot VM is at an
  elevated risk, not that it goes; replacing on it would churn the pool whenever a spot
  market tightens (Karpenter ignores it by default for the same reason), and the warning,
  if it comes, still leaves two minutes;
- an event about an instance that is no Node of the operator's (another cluster's, one not
  registered yet): deleted; a VM that vanishes before registering is replaced anyway;
- a message that is not one of those events: logged once as unreadable and deleted, so it
  never comes back to fail again.

A failure (the queue unreachable, the API server refusing the patch) restarts the loop
after a backoff, with the message left on the queue to come back; the task never dies
silently and never crash-loops on one message. Every replica polls (a standby's mark is as
good as the leader's: the leader acts on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from kubeloop import NODES, Cache, Client, Event, NotFound, Registry, Request
from nodepool_operator.cloud import CloudError, QueueMessage, SqsQueue, instance_id_of
from nodepool_operator.controllers._interrupted import interrupted, mark_patch
from nodepool_operator.controllers._scope import POOL_LABEL, equality_labels, node_selector
from nodepool_operator.controllers.interruption._messages import (
    Ignored,
    Message,
    Rebalance,
    ScheduledChange,
    SpotInterruption,
    StateChange,
    UnreadableMessage,
    decode,
)

__all__ = ["InterruptionSource", "deadline_of", "instances_of"]

log = logging.getLogger("nodepool_operator.interruption")

#: First and longest pause before the loop starts again after a failure.
BACKOFF_INITIAL: Final = 1.0
BACKOFF_MAX: Final = 60.0
#: The metric's kind for a message that is none of the events.
UNREADABLE: Final = "Unreadable"

QueueOpener = Callable[[], contextlib.AbstractAsyncContextManager[SqsQueue]]
Enqueue = Callable[[Request, Event | None], None]


def instances_of(message: Message) -> tuple[str, ...]:
    """The instances a message says are going (none for a rebalance or an ignored event)."""
    if isinstance(message, SpotInterruption | StateChange):
        return (message.instance_id,)
    if isinstance(message, ScheduledChange):
        return message.instance_ids
    return ()


def deadline_of(message: Message) -> float:
    """When the instances of ``message`` go (seconds since the epoch)."""
    if isinstance(message, SpotInterruption):
        return message.deadline
    if isinstance(message, ScheduledChange):
        return message.start
    if isinstance(message, StateChange):
        return message.time
    return time.time()


@dataclass
class InterruptionSource:
    """A kubeloop source (``Builder.watches_source``) that runs the queue's loop while the
    controller's sources run."""

    client: Client
    open_queue: QueueOpener
    registry: Registry
    label_selector: str | None = None
    """The operator's scope (``--label-selector``): its Nodes carry those labels."""
    crashes: int = field(default=0, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._node_selector = node_selector(equality_labels(self.label_selector))
        self._messages = self.registry.counter(
            "nodepool_interruption_messages_total",
            "Interruption queue messages by kind (SpotInterruption, RebalanceRecommendation, "
            "ScheduledChange, StateChange, ignored events, Unreadable).",
            ("kind",),
        )

    async def start(self, cache: Cache, enqueue: Enqueue) -> None:
        self._enqueue = enqueue
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name="interruption queue"
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _supervise(self) -> None:
        backoff = BACKOFF_INITIAL
        while True:
            try:
                async with self.open_queue() as queue:
                    log.info("reading the interruption queue", extra={"queue": queue.name})
                    backoff = BACKOFF_INITIAL
                    while True:
                        for message in await queue.receive():
                            await self.handle(queue, message)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self.crashes += 1
                known = isinstance(err, CloudError)
                log.error(
                    "interruption queue: %s; again in %.0fs",
                    err,
                    backoff,
                    exc_info=not known,  # a bug gets its traceback, the world's errors not
                    extra={"crashes": self.crashes},
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def handle(self, queue: SqsQueue, message: QueueMessage) -> None:
        """Act on one message, then delete it (an unreadable one is deleted at once)."""
        try:
            decoded = decode(message.body)
        except UnreadableMessage as err:
            self._messages.labels(UNREADABLE).inc()
            log.warning(
                "unreadable interruption message deleted: %s",
                err,
                extra={"message_id": message.id, "body": message.body[:200]},
            )
            await queue.delete(message)
            return
        self._messages.labels(decoded.kind).inc()
        if isinstance(decoded, Ignored | Rebalance):
            why = decoded.why if isinstance(decoded, Ignored) else "rebalance: not acted on"
            log.info("interruption message ignored: %s", why, extra={"kind": decoded.kind})
        else:
            await self._mark(decoded)
        await queue.delete(message)

    async def _mark(self, message: Message) -> None:
        wanted = set(instances_of(message))
        deadline = deadline_of(message)
        nodes, _ = await self.client.list_all(NODES, label_selector=self._node_selector)
        found = set()
        for node in nodes:
            provider = (node.get("spec") or {}).get("providerID") or ""
            instance = instance_id_of(provider) if provider else ""
            if instance not in wanted:
                continue
            found.add(instance)
            name = node["metadata"]["name"]
            before = interrupted(node)
            if before is None or deadline < before.deadline:  # the earlier deadline holds
                with contextlib.suppress(NotFound):
                    await self.client.patch(NODES, name, mark_patch(message.kind, deadline))
            pool = ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
            if pool:
                self._enqueue(Request(pool), None)
            log.warning(
                "interruption: node marked",
                extra={"kind": message.kind, "node": name, "instance": instance, "pool": pool},
            )
        for instance in sorted(wanted - found):
            log.info(
                "interruption of an instance that is no node of ours",
                extra={"kind": message.kind, "instance": instance},
            )
