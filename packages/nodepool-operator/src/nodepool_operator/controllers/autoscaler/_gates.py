"""Gates that fall alone: with no nomination to keep, a gated node opens as soon as it can
take pods, without waiting for an Autoscaler pass.

Why: a gate (:mod:`.._reserve`) keeps the plan's nominations from being cleared before the
pods come to their nodes (:mod:`._nominations`). A plan whose pods are all of one kind writes
no nomination (:func:`._nominations.lead_kind`), and then its gates have nothing to keep: each
may fall as soon as its node is open-able. The Autoscaler's pass would lift it, but a pass
reads and plans every pending pod of its namespaces, and the passes of one Autoscaler run one
at a time: when the nodes of a 240-pod burst turn Ready within a second of each other, each
gate waits for the passes before it (S1 of the Karpenter benchmark, ``docs/benchmarks.md``).
This controller answers each Node event alone: one guarded patch, no planning. It reads the
Node through the manager's cache, which waits for our own last write to it: the events of a
Node's first second (kwok's status, kube-controller-manager's patches) come in a burst, and a
reconcile of one of them that read the informer's store before the watch brought our lift back
sent the lift again, answered 422 (the Karpenter benchmark's S1: about three a run,
``docs/benchmarks.md``).

What it may lift: a Node carrying the gate, Ready and rid of the start-up taints
(``_node_manifest.open_for``), of a pool every one of whose Autoscalers has passed since the
operator started, is not being deleted, is not gathering a burst (the plan it is about to
make may put nominated pods on this node) and holds no pod to nominate
(:meth:`.._reserve.Reservation.holds_nominations`). Anything else is the pass's, as before.
A pass planning a second scale-up while this one lifts may still nominate pods to a node
just opened: those nominations are then on an open node, as any made after the landing of a
gate, and :mod:`._renominate` writes back the ones the scheduler drops.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from kubeloop import Deleted, Event, Informer, Object, Request, Result
from nodepool_operator.controllers import _indexes as indexes
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._node_manifest import open_for
from nodepool_operator.controllers._reserve import lift_patch, reserved_for
from nodepool_operator.controllers.autoscaler._decode import object_name
from nodepool_operator.controllers.autoscaler._watch import BY_POOL
from nodepool_operator.controllers.autoscaler.decide import Lift, Memory

__all__ = ["GateOpener", "gate_may_fall", "nothing_to_keep"]

log = logging.getLogger("nodepool_operator.autoscaler")


def gate_may_fall(event: Event) -> bool:
    """A gated Node of a pool that may be open-able now (the reconcile reads it again)."""
    if isinstance(event, Deleted):
        return False
    node = event.obj
    return bool(indexes.node_pool(node)) and reserved_for(node_fields(node)) is not None


def nothing_to_keep(memory: Memory | None, now: float) -> bool:
    """Whether one Autoscaler's ``memory`` lets a gate of its pool fall alone at ``now`` (its
    controller's clock): it has passed, gathers no burst and holds no pod to nominate."""
    if memory is None:
        return False
    if memory.gathering is not None and memory.gathering[0] > now:
        return False
    return not memory.reservation.holds_nominations()


class GateOpener:
    """The reconciler: one gated Node, lifted if it is open-able and nothing is kept behind it.

    ``open_gate``: the Autoscaler's own lift (``Actor.open``); ``read_node``: a Node by name
    as the manager's cache has it, never older than our own last write (``Cache.get``);
    ``memory``: the Autoscaler controller's, by Autoscaler name (read, never written);
    ``clock``: that controller's monotonic clock; ``wall``: the wall clock a Node's Ready age
    is read on."""

    def __init__(
        self,
        open_gate: Callable[[Lift], Awaitable[bool]],
        read_node: Callable[[str], Awaitable[Object | None]],
        autoscalers: Informer,
        memory: Mapping[str, Memory],
        *,
        clock: Callable[[], float],
        wall: Callable[[], datetime],
    ) -> None:
        self._open = open_gate
        self._read_node = read_node
        self._autoscalers = autoscalers
        self._memory = memory
        self._clock = clock
        self._wall = wall

    async def reconcile(self, req: Request) -> Result:
        node = await self._read_node(req.name)
        if node is None:
            return Result()
        fields = node_fields(node)
        gate = reserved_for(fields)
        if gate is None:
            return Result()
        if open_for(node, self._wall().timestamp()) is None:
            return Result()  # its next event (Ready, the start-up taints lifted) comes back
        store = self._autoscalers.store
        scalers = [a for pool in indexes.node_pool(node) for a in store.by_index(BY_POOL, pool)]
        now = self._clock()
        if not scalers or any(
            indexes.deleting(a) or not nothing_to_keep(self._memory.get(object_name(a)), now)
            for a in scalers
        ):
            return Result()  # no Autoscaler (the NodePool's backstop), or the pass's to lift
        if await self._open(Lift(req.name, gate, lift_patch(fields))):
            log.debug("opened a gated node alone: no nomination to keep", extra={"node": req.name})
        return Result()
