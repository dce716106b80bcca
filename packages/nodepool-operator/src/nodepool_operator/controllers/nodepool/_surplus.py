"""Which of the pool's Nodes a scale-down removes: the pods to read (:func:`judged_nodes`),
the order (one rule with the Autoscaler: :func:`~nodepool_operator.scheduling.removal_order`,
the Nodes the Autoscaler named unneeded first, those a PodDisruptionBudget would hold after
the others, blocked Nodes last), a blocked choice kept when another Node can go instead, and
the Nodes tainted for removal that are no longer chosen (:func:`untaint`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nodepool_operator.api import InstanceRecord
from nodepool_operator.controllers._blocked import (
    SCALE_DOWN_BLOCKED,
    blocked_nodes,
    keep_blocked,
    switches,
)
from nodepool_operator.controllers._node_manifest import DISRUPTING_TAINT
from nodepool_operator.controllers.nodepool._events import Event, warning
from nodepool_operator.controllers.nodepool._instances import (
    desired,
    live,
    node_of,
    scaled_down,
    update,
)
from nodepool_operator.controllers.nodepool._intent import DELETING
from nodepool_operator.controllers.nodepool.records import NodePods, PoolNode
from nodepool_operator.scheduling import (
    ScaleDownNode,
    Unremovable,
    held_by_budgets,
    removal_order,
)

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["Removal", "choosing", "judged_nodes", "keep_held", "removal", "untaint"]


def judged_nodes(obs: Observation) -> set[str]:
    """The Nodes whose pods the pass must read: all of the pool's when a scale-down may be
    looked at (more VMs than desired, or a scale-down under way whose choice a blocker may
    now hold); none otherwise."""
    records = obs.pool.status.instances
    by_instance = obs.by_instance()
    retiring = any(scaled_down(r, by_instance, obs.vms) for r in records)
    if len(live(records)) > desired(obs.pool) or retiring:
        return set(obs.nodes)
    return set()


def choosing(obs: Observation) -> bool:
    """Whether the pass has Nodes to choose for a scale-down (more live VMs than desired):
    then whose pods a PodDisruptionBudget lets go now is read too."""
    return len(live(obs.pool.status.instances)) > desired(obs.pool)


@dataclass(frozen=True, slots=True)
class Removal:
    """A scale-down's view of the pool, by record."""

    order: tuple[str, ...] = ()
    """The live records that have a Node, best to remove first, blocked ones last."""
    blocked: Mapping[str, Unremovable] = field(default_factory=dict)
    """What keeps each blocked Node from a scale-down, by record."""
    removable: tuple[str, ...] = ()
    """Records whose Node can go now without leaving a pod without a place, best first."""
    empty: frozenset[str] = frozenset()
    """Records whose Node runs no workload pod (a scale-down of it is reason ``Empty``)."""


def _untainted(node: ScaleDownNode) -> ScaleDownNode:
    """``node`` without the disrupting taint: as it would be if kept."""
    return replace(node, taints=tuple(t for t in node.taints if t.key != DISRUPTING_TAINT.key))


def removal(
    obs: Observation, records: Sequence[InstanceRecord], *, keeping: bool = False
) -> Removal:
    """The live records that have a Node, best to remove first (one rule with the
    Autoscaler's scale-down: :func:`~nodepool_operator.scheduling.removal_order`, the Nodes
    the Autoscaler named unneeded first among those that can go, and of those the ones whose
    pods a PodDisruptionBudget lets go now before the ones it would hold, blocked Nodes
    last), what blocks each Node (the scale-down's own choices included: a blocker may
    turn up after the choice), and which live ones can go now.

    ``keeping``: as if the blocked Nodes being scaled down were kept (untainted, their room
    there for the pods of the others), to find what can go instead of them."""
    by_instance = obs.by_instance()
    live_names = {r.name for r in live(records)}
    record_of: dict[str, str] = {}
    for r in records:
        node = node_of(r, by_instance)
        if node is not None and (r.name in live_names or scaled_down(r, by_instance, obs.vms)):
            record_of[node.name] = r.name
    judged: list[NodePods] = [
        obs.pods[name] for name in obs.nodes if name in record_of and name in obs.pods
    ]
    nodes = [p.view for p in judged]
    empty = frozenset(record_of[p.view.name] for p in judged if p.empty)
    holds = {name: n.hold for name, n in obs.nodes.items()}
    blocked = blocked_nodes(nodes, holds, switches=switches(obs.pool), budgets=obs.budgets)
    candidates = [n for n in nodes if record_of[n.name] in live_names]
    if keeping:
        candidates += [
            _untainted(n)
            for n in nodes
            if record_of[n.name] not in live_names and n.name in blocked
        ]
    named = {name for name, n in obs.nodes.items() if n.unneeded}
    held = {n.name for n in candidates if held_by_budgets(n.pods, obs.budgets)}
    order = removal_order(candidates, threshold=1.0, blockers=blocked, prefer=named, held=held)
    return Removal(
        order=tuple(record_of[d.node] for d in order if record_of[d.node] in live_names),
        blocked={record_of[name]: why for name, why in blocked.items()},
        removable=tuple(record_of[d.node] for d in order if d.removable),
        empty=empty,
    )


def keep_held(
    obs: Observation, records: Sequence[InstanceRecord], resting: Collection[str]
) -> tuple[tuple[InstanceRecord, ...], list[Event], frozenset[str]]:
    """Nodes chosen for a scale-down that a blocker now holds go back to the pool when
    another Node can go instead (:func:`._blocked.keep_blocked`); the plan that follows then
    picks that one. The records, the Events, and the records whose Node is empty."""
    by_instance = obs.by_instance()
    retiring = [r.name for r in records if scaled_down(r, by_instance, obs.vms)]
    if not retiring:
        return tuple(records), [], frozenset()
    seen = removal(obs, records, keeping=True)
    alternatives = [name for name in seen.removable if name not in resting]
    kept = keep_blocked(retiring, seen.blocked, alternatives)
    by_name = {r.name: r for r in records}
    out = tuple(records)
    events = []
    for name in kept:
        r = by_name[name]
        vm = obs.vms.get(r.instance_id or "")
        out = update(out, name, state=vm.state if vm is not None else "running")
        note = f"{seen.blocked[name].note}; kept, another node is removed instead"
        node = node_of(r, by_instance)
        events.append(
            warning(SCALE_DOWN_BLOCKED, note, node=node.name if node else "", action="ScaleDown")
        )
    return out, events, seen.empty


def untaint(
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> tuple[str, ...]:
    """Nodes tainted for removal whose record is not being retired, and not deleted."""
    retiring = set()
    for r in records:
        node = node_of(r, by_instance) if r.state == DELETING else None
        if node is not None:
            retiring.add(node.name)
    return tuple(
        name
        for name, node in nodes.items()
        if name not in retiring and not node.deleting and node.tainted
    )
