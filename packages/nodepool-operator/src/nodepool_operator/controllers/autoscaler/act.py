"""Act: make a :class:`~.decide.Decision`'s writes, in the order the decision assumes.

1. the names of the unneeded Nodes (:mod:`.._unneeded`), then the target, through the scale
   subresource, only if it is still the value the decision was made from (:mod:`._scale`);
   otherwise the caller decides again from the server's value;
2. the Events;
3. the status, if it changed (one typed change, :mod:`._status`);
4. the reservation patches: a toleration on each planned pod (the JSON patch made here, from
   the pod's typed view: :func:`.._reserve.toleration_patch`), the lift on each reserved Node
   whose pods have landed. Those are best effort: a pod gone, or whose tolerations changed
   meanwhile, is looked at again next pass; which ones took is returned for the memory;
5. the nominations (:mod:`._nominations`): a merge patch of each planned pod's status, with
   its resourceVersion as a precondition, then the lift of each gated node whose nominations
   all took. Best effort too: a pod bound, renominated or gone since the cache read it is
   decided again on the next pass (its change is an event).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Final, Protocol

from kubeloop import (
    NODES,
    PODS,
    Client,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Object,
    PatchType,
    update_status,
)
from nodepool_operator.api import AUTOSCALERS
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._reserve import reserved_for, toleration_patch
from nodepool_operator.controllers._unneeded import is_marked
from nodepool_operator.controllers.autoscaler._report import Note, Subject
from nodepool_operator.controllers.autoscaler._scale import write_target
from nodepool_operator.controllers.autoscaler._status import READY, ConditionChange, StatusChange
from nodepool_operator.controllers.autoscaler.decide import (
    Decision,
    Grant,
    Lift,
    Mark,
    Nominated,
    Nomination,
    TargetWrite,
    Why,
)
from nodepool_operator.controllers.autoscaler.observe import Raw, Unready

__all__ = ["Actor", "Recorder"]

log = logging.getLogger("nodepool_operator.autoscaler")

#: Tries of a Node's name patch, each from a fresher read, before the pass is retried.
_MARK_ATTEMPTS: Final = 3

#: How many nomination and gate writes one Autoscaler has in flight.
_PARALLEL_WRITES = 16
#: The Warning Event when a pool's ``reserveNewNodes`` meets a role without ``pods`` patch.
RESERVE_FORBIDDEN = "ReserveNewNodesForbidden"
_FORBIDDEN_NOTE = (
    "NodePool spec.reserveNewNodes (deprecated) needs patch on pods, which the operator's role "
    "does not grant (chart: rbac.reserveNewNodes=true); the plan is held by nominations, and "
    "reserved nodes open after the landing grace"
)


class Recorder(Protocol):
    """What the Actor needs of :class:`kubeloop.EventRecorder`."""

    def normal(
        self, obj: Object, reason: str, note: str, *, action: str = "", aggregate_by: str = ""
    ) -> None: ...

    def warning(self, obj: Object, reason: str, message: str, *, action: str = "") -> None: ...


class Actor:
    """The Autoscaler controller's writes."""

    def __init__(
        self,
        client: Client,
        recorder: Recorder,
        read_node: Callable[[str], Awaitable[Object | None]] | None = None,
    ) -> None:
        """``read_node``: a Node by name as the manager's cache has it, never older than our
        own last write (``Cache.get``); a lift the Node no longer needs is then not sent.
        None: every lift is sent (the guarded patch refuses the ones that are not needed)."""
        self._client = client
        self._recorder = recorder
        self._read_node = read_node
        # the pod and node writes of one pass in flight at once: enough for a burst's
        # nominations to land in a few round trips, few enough to stay a polite client
        self._writes = asyncio.Semaphore(_PARALLEL_WRITES)

    async def write_target(self, pool: str, write: TargetWrite) -> int | None:
        """Write ``write``; ``None`` once written, else the target the server has instead of
        the expected one (nothing written).

        Raises:
            NotFound: the pool is gone.
            Conflict: it kept conflicting; the workqueue's backoff takes over.
        """
        moved = await write_target(
            self._client,
            pool,
            expected=write.expected,
            desired=write.desired,
            zone_targets=write.zone_targets,
        )
        if moved is None:
            what = write.why if write.why is Why.PROVISION_TIMEOUT else write.summary
            zones = "" if write.zone_targets is None else f" zoneTargets {write.zone_targets}"
            log.info(
                "NodePool %s targetNodes %d -> %d%s: %s",
                pool,
                write.expected,
                write.desired,
                zones,
                what,
            )
        return moved

    async def mark(self, marks: Sequence[Mark]) -> None:
        """Name the unneeded Nodes, or take the name off (a Node gone meanwhile needs
        neither). A guarded patch the server refuses (the Node's taints or annotations
        changed since the cache read them) is built again from a fresh read."""
        for mark in marks:
            fields = None
            for attempt in range(_MARK_ATTEMPTS):
                ops = mark.patch(fields)
                if not ops:
                    break
                try:
                    await self._client.patch(NODES, mark.node, ops, patch_type=PatchType.JSON)
                except NotFound:
                    break
                except Invalid as err:
                    if attempt + 1 == _MARK_ATTEMPTS:  # the workqueue's backoff takes over
                        note = f"Node {mark.node} changed under {_MARK_ATTEMPTS} patches"
                        raise Conflict(409, "Conflict", note) from err
                    try:
                        fields = node_fields(await self._client.get(NODES, mark.node))
                    except NotFound:
                        break
                    continue
                log.info("node %s %s", mark.node, "unneeded" if mark.on else "needed again")
                break

    async def unname(self, nodes: Iterable[str]) -> None:
        """Take the names this Autoscaler put on ``nodes`` off again, once it is gone: nothing
        else would (a restart of the operator before that forgets which nodes they were: the
        ones left are then taken off by hand, ``docs/ownership.md``)."""
        if self._read_node is None:
            return
        marks = []
        for name in sorted(nodes):
            node = await self._read_node(name)
            if node is not None and is_marked(node):
                marks.append(Mark(name, False, 0.0, node_fields(node)))
        await self.mark(marks)

    def tell(self, raw: Raw, events: Sequence[Note]) -> None:
        """Record ``events`` on the objects they are about."""
        for event in events:
            obj = _subject(raw, event)
            if obj is None:
                continue
            if event.warning:
                if event.subject is Subject.NODE:
                    log.info("scale-down blocked: %s", event.note)
                elif event.subject is Subject.AUTOSCALER:
                    log.warning(event.note)
                self._recorder.warning(obj, event.reason, event.note, action=event.action)
            else:
                self._recorder.normal(
                    obj,
                    event.reason,
                    event.note,
                    action=event.action,
                    aggregate_by=event.aggregate_by,
                )

    async def write_status(self, obj: Object, change: StatusChange, now: datetime) -> None:
        """Write the status ``change`` makes, if it changes anything. An Autoscaler deleted
        meanwhile needs no status (and its deletion event ends its reconciles)."""
        with contextlib.suppress(NotFound):
            await update_status(self._client, AUTOSCALERS, obj, change.mutate(now))

    async def not_ready(self, unready: Unready, now: datetime) -> None:
        generation = unready.obj["metadata"].get("generation", 0)
        ready = ConditionChange(READY, "False", unready.reason, unready.message)
        await self.write_status(unready.obj, StatusChange(generation, (ready,)), now)

    async def tell_and_reserve(
        self, raw: Raw, decision: Decision, now: datetime
    ) -> tuple[list[tuple[str, str]], list[str]]:
        """The writes after the target's: the Events, the status, the reservation patches;
        returns the (pod key, node) pairs granted and the reserved names opened."""
        self.tell(raw, decision.events)
        await self.write_status(raw.scaler, decision.status, now)
        return await self.reserve(raw, decision.grants, decision.lifts)

    async def reserve(
        self, raw: Raw, grants: Sequence[Grant], lifts: Sequence[Lift]
    ) -> tuple[list[tuple[str, str]], list[str]]:
        """Patch the planned pods' tolerations (the JSON patch made here, from the pod's
        view) and lift the reserved Nodes due; returns the (pod key, node) pairs granted and
        the reserved names opened."""
        granted: list[tuple[str, str]] = []
        for grant in grants:
            ref = grant.view.ref
            patch = toleration_patch(grant.view, grant.node)
            # gone, or its tolerations changed meanwhile: the next pass looks again
            try:
                await self._client.patch(
                    PODS, ref.name, patch, ref.namespace, patch_type=PatchType.JSON
                )
            except (NotFound, Invalid):
                continue
            except Forbidden:
                # the default role has no pods patch: the reserved nodes open after the grace
                self._recorder.warning(raw.scaler, RESERVE_FORBIDDEN, _FORBIDDEN_NOTE)
                log.warning(_FORBIDDEN_NOTE)
                break
            granted.append((grant.pod, grant.node))
        opened = [lift.name for lift in lifts if await self.open(lift)]
        return granted, opened

    async def nominate(self, raw: Raw, nominated: Nominated) -> int:
        """Write the nominations (``pods/status``; the pod's spec is never written), all at
        once, then open the gated nodes whose every nomination took, all at once too, sent in
        the order given: the first lift sends every waiting pod to a scheduling attempt, in
        kube-scheduler's queue order, which the order of the gates follows
        (:func:`._nominations.in_queue_order`), so that a pod seldom meets its own node still
        gated (that attempt would clear its nomination); one by one, each waiting for the
        last, they would fall slower than the scheduler tries pods. Returns how many
        nominations took."""
        writes = nominated.writes
        took = await asyncio.gather(*(self._nominate(raw, n) for n in writes))
        missed = {n.node for n, ok in zip(writes, took, strict=True) if not ok}
        opens = [lift for lift in nominated.opens if lift.name not in missed]
        await asyncio.gather(*(self.open(lift) for lift in opens))
        if writes:
            log.info(
                "nominated %d of %d pod(s) to their planned nodes; opened %d gated node(s)",
                sum(took),
                len(writes),
                len(opens),
            )
        return sum(took)

    async def _nominate(self, raw: Raw, nomination: Nomination) -> bool:
        meta = raw.pods[nomination.pod]["metadata"]
        async with self._writes:
            # gone, bound (422 once bound) or changed since read (409): the next pass looks again
            try:
                await self._client.patch(
                    PODS,
                    meta["name"],
                    nomination.patch,
                    meta["namespace"],
                    patch_type=PatchType.MERGE,
                    subresource="status",
                )
            except (NotFound, Invalid, Conflict):
                return False
        return True

    async def open(self, lift: Lift) -> bool:
        """Lift one gate (the guarded patch of :func:`.._reserve.lift_patch`); whether it
        was lifted by this patch.

        Not sent when the Node, read through the cache, no longer carries it: a pass plans on
        a snapshot while the gates controller lifts the gates of nodes as they open, and in
        the Karpenter benchmark's S1 the pass's lifts of gates already gone were answered 422
        about nine times a run (the apiserver's audit log, ``docs/benchmarks.md``)."""
        if self._read_node is not None:
            node = await self._read_node(lift.node)
            if node is None or reserved_for(node_fields(node)) != lift.name:
                return False
        # gone, or its taints changed meanwhile (409/422): the next pass or event looks again
        try:
            await self._client.patch(NODES, lift.node, lift.patch, patch_type=PatchType.JSON)
        except (NotFound, Invalid, Conflict):
            return False
        return True


def _subject(raw: Raw, event: Note) -> Object | None:
    match event.subject:
        case Subject.AUTOSCALER:
            return raw.scaler
        case Subject.NODEPOOL:
            return raw.pool
        case Subject.NODE:
            return raw.nodes.get(event.key)
        case Subject.POD:
            return raw.pods.get(event.key)
