"""Where events come from: informers, timers and channels.

A source is started once with an ``enqueue`` callback; it decides which
requests to add, after its predicates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubeloop._event import Event
from kubeloop._handler import EventHandler
from kubeloop._informer import Cache, Informer
from kubeloop._predicate import Predicate
from kubeloop._reconcile import Request
from kubeloop._resource import Resource

Enqueue = Callable[[Request, Event | None], None]


class Source(Protocol):
    async def start(self, cache: Cache, enqueue: Enqueue) -> None:
        """Begin delivering requests; must return promptly."""

    async def stop(self) -> None: ...


@dataclass
class KindSource:
    """Events of one kind from the shared informer, through predicates and a handler.

    ``namespace=None`` means every namespace the cache may see: one cluster-wide
    informer, or one per namespace of a manager restricted to several
    (``ManagerOptions.namespaces``). ``field_selector`` is passed to the LIST and
    WATCH; ``metadata_only`` watches ``PartialObjectMetadata`` (names, labels,
    annotations, ownerReferences: no spec, status or data) in an informer of its own.
    """

    resource: Resource
    handler: EventHandler
    predicates: Sequence[Predicate] = ()
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    metadata_only: bool = False
    #: the first of :attr:`informers` (the only one unless the cache has several namespaces)
    informer: Informer | None = field(default=None, init=False)
    informers: list[Informer] = field(default_factory=list, init=False)

    async def start(self, cache: Cache, enqueue: Enqueue) -> None:
        self.informers = [
            cache.informer(
                self.resource,
                namespace=ns,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                metadata_only=self.metadata_only,
            )
            for ns in cache.scope(self.resource, self.namespace)
        ]
        self.informer = self.informers[0]
        preds, handler = tuple(self.predicates), self.handler

        def on_event(event: Event) -> None:
            if all(p(event) for p in preds):
                for req in handler(event):
                    enqueue(req, event)

        for inf in self.informers:
            inf.add_handler(on_event)

    async def stop(self) -> None:
        return None


@dataclass
class PeriodicSource:
    """Every ``interval`` seconds, enqueue what ``requests()`` returns (bypassing predicates)."""

    interval: float
    requests: Callable[[], Iterable[Request]]
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self, cache: Cache, enqueue: Enqueue) -> None:
        async def tick() -> None:
            while True:
                await asyncio.sleep(self.interval)
                for req in self.requests():
                    enqueue(req, None)

        self._task = asyncio.get_running_loop().create_task(tick(), name="periodic source")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class ChannelSource:
    """Requests pushed by other code (a cloud callback, a timer wheel) via an asyncio.Queue."""

    channel: asyncio.Queue[Request]
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self, cache: Cache, enqueue: Enqueue) -> None:
        async def pump() -> None:
            while True:
                enqueue(await self.channel.get(), None)

        self._task = asyncio.get_running_loop().create_task(pump(), name="channel source")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
