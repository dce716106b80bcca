"""Which nodes a pool can do without: empty ones first, then the least utilised whose pods the
simulation can place on the nodes that stay (and whether some pods fit on some nodes:
:func:`place_on`, which a consolidation asks too: :mod:`._consolidate`).

One function decides it for the Autoscaler (when a node counts as unneeded) and for the NodePool
controller (which node goes when the target drops), so they pick the same nodes. Like
cluster-autoscaler's scale-down, candidates are taken greedily: each one's pods are placed on
the nodes left after the earlier picks, with the room those pods took, so the chosen nodes can go
*together*. DaemonSet and mirror pods do not make a node busy (:func:`~._views.is_workload`),
and a blocked node (:mod:`._blockers`: a do-not-disrupt pod always, the default blockers when
the caller passes them) is never unneeded: it is ranked last, with what blocks it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ._blockers import Unremovable, node_blocker
from ._exact import SearchBudget, pack_fewest
from ._firstfit import NodeState, _order_key, _Packer, _Pending
from ._quantity import Resources
from ._slots import Existing
from ._template import NodeTemplate, Taint
from ._views import PodView

__all__ = [
    "CHECK_BUDGET",
    "Disposal",
    "RemovalReason",
    "ScaleDownNode",
    "place_on",
    "removal_order",
]

#: The exact search's budget for one question "do these pods fit on those nodes?", asked once
#: per candidate node here and a handful of times by a consolidation (a binary search over how
#: many nodes go): a quarter of the plan's steps, and a clock that keeps a decision short on a
#: slow or shared CPU (where it may bind first).
CHECK_BUDGET = SearchBudget(max_steps=10_000, max_seconds=0.05)


class RemovalReason(StrEnum):
    EMPTY = "Empty"
    """No workload pods."""
    UNDERUTILIZED = "Underutilized"
    """Below the utilisation threshold, and its pods fit on the nodes that stay."""
    BUSY = "Busy"
    """Its pods would not fit elsewhere, or it is above the threshold."""
    BLOCKED = "Blocked"
    """A pod on it, or the node itself, blocks its removal (:attr:`Disposal.blocked` says
    which and why)."""


@dataclass(frozen=True, slots=True)
class ScaleDownNode:
    """A registered node of the pool and the pods bound to it (terminal pods left out)."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    pods: tuple[PodView, ...] = ()

    @property
    def workload(self) -> tuple[PodView, ...]:
        return tuple(p for p in self.pods if p.workload)

    def utilization(self) -> float:
        """The larger of the cpu and memory shares its workload pods request (cluster-
        autoscaler's measure)."""
        used = Resources()
        for pod in self.workload:
            used += pod.requests
        shares = [
            used.get(name) / self.allocatable.get(name)
            for name in ("cpu", "memory")
            if self.allocatable.get(name)
        ]
        return max(shares, default=1.0)


@dataclass(frozen=True, slots=True)
class Disposal:
    """A node in removal order, and why it is where it is."""

    node: str
    reason: RemovalReason
    utilization: float
    blocked: Unremovable | None = None
    """What blocks it, for :attr:`RemovalReason.BLOCKED`."""

    @property
    def removable(self) -> bool:
        """Whether it can go without leaving a pod without a place."""
        return self.reason in (RemovalReason.EMPTY, RemovalReason.UNDERUTILIZED)


def removal_order(
    nodes: Sequence[ScaleDownNode],
    *,
    threshold: float = 0.5,
    blockers: Mapping[str, Unremovable] | None = None,
    prefer: Collection[str] = (),
    held: Collection[str] = (),
) -> tuple[Disposal, ...]:
    """Every node of ``nodes``, best to remove first.

    Empty nodes (by name), then those below ``threshold`` whose workload pods all fit on the
    nodes not picked before them (least utilised first), then the busy ones (least utilised
    first), then the blocked ones: those in ``blockers`` (by node name, from
    :func:`~._blockers.node_blocker`) and those holding a do-not-disrupt pod. Ties are broken
    by name. A blocked node stays, so the others' pods may be placed on it.

    Of the nodes that can go, those in ``prefer`` (named for removal, e.g. by the Autoscaler)
    come first, and those in ``held`` (a PodDisruptionBudget refuses to evict a pod of theirs
    now) after the others; both are picked in that order too, so the others' pods are placed
    around the preferred ones, and a preferred node's pods never on another preferred node
    (they go together, as a consolidation named them: :mod:`._consolidate`).

    Whether a node's pods fit on the others is :func:`place_on`'s answer: first-fit-
    decreasing, then the exact search where no pod constrains another.
    """
    usage = {n.name: n.utilization() for n in nodes}

    def rank(n: ScaleDownNode) -> tuple[bool, bool]:
        return (n.name not in prefer, n.name in held)

    why: dict[str, Unremovable] = {}
    for n in nodes:
        found = (blockers or {}).get(n.name) or node_blocker(n.name, n.pods, voluntary=False)
        if found is not None:
            why[n.name] = found
    blocked = [n for n in nodes if n.name in why]
    rest: dict[str, NodeState] = {n.name: _state(n) for n in nodes}
    order: list[Disposal] = []
    open_nodes = [n for n in nodes if n.name not in why]
    busy: list[ScaleDownNode] = []
    picking = sorted(open_nodes, key=lambda n: (rank(n), bool(n.workload), usage[n.name], n.name))
    for node in picking:
        if node.workload and usage[node.name] >= threshold:
            busy.append(node)
            continue
        # Its pods as they are now: pods moved onto it by an earlier pick move again (an
        # empty node picked after a preferred one may have taken some). A preferred node's
        # pods go on the nodes not named: the named ones are to go together.
        here = tuple(p for p in rest[node.name].pods if p.workload)
        going = prefer if node.name in prefer else ()
        others = [s for name, s in rest.items() if name != node.name and name not in going]
        placed = place_on(here, others, node.allocatable) if here else ({}, [])
        if placed is None:
            busy.append(node)
            continue
        moved = placed[0]
        reason = RemovalReason.UNDERUTILIZED if node.workload else RemovalReason.EMPTY
        order.append(Disposal(node.name, reason, usage[node.name]))
        del rest[node.name]
        rest.update(moved)
    busy.sort(key=lambda n: (usage[n.name], n.name))
    order += [Disposal(n.name, RemovalReason.BUSY, usage[n.name]) for n in busy]
    order += [
        Disposal(n.name, RemovalReason.BLOCKED, usage[n.name], why[n.name])
        for n in sorted(blocked, key=lambda n: (usage[n.name], n.name))
    ]
    return tuple(order)


def _state(node: ScaleDownNode) -> NodeState:
    free = node.allocatable
    for pod in node.pods:
        free -= pod.requests
    return NodeState(node.name, free, node.labels, node.taints, node.pods)


def place_on(
    pods: Sequence[PodView],
    nodes: Sequence[NodeState],
    room: Resources,
    search: SearchBudget | None = CHECK_BUDGET,
) -> tuple[dict[str, NodeState], list[tuple[PodView, str]]] | None:
    """``nodes`` after ``pods`` moved onto them and where each went (pod, node name), or
    ``None`` if one has no place. First-fit-decreasing with the plan's fit rules; when that
    fails and no pod constrains another (no pod affinity, anti-affinity, spread or host port
    in play), the exact search with ``search`` (``None``: FFD alone). ``room``: a node's
    size, which orders the pods (largest share first) and scales the search's bounds."""
    nothing = NodeTemplate("none", Resources())
    packer = _Packer(nothing, nodes, in_flight=0, allowed_new=0)
    entries = sorted((_Pending(p) for p in pods), key=lambda e: _order_key(e, room))
    plain = not packer.constraining and not any(packer.scans(e.view) for e in entries)
    where: list[tuple[PodView, str]] = []
    for entry in entries:
        label = packer.place(entry)
        if not isinstance(label, Existing):
            break
        where.append((entry.view, label.name))
    else:
        return {s.name: s for s in packer.existing_states()}, where
    if search is None or not plain:
        return None
    exact = pack_fewest(entries, room, nodes, 0, fewer_than=1, budget=search)
    if exact is None:
        return None
    added: dict[str, list[PodView]] = {}
    where = []
    for entry, slot in zip(entries, exact.labels, strict=True):
        if not isinstance(slot, Existing):
            return None
        added.setdefault(slot.name, []).append(entry.view)
        where.append((entry.view, slot.name))
    states: dict[str, NodeState] = {}
    for node in nodes:
        mine = added.get(node.name, [])
        free = node.free
        for pod in mine:
            free -= pod.requests
        states[node.name] = replace(node, free=free, pods=(*node.pods, *mine))
    return states, where
