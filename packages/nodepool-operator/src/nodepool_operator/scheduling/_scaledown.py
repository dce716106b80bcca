"""Which nodes a pool can do without: empty ones first, then the least utilised whose pods the
simulation can place on the nodes that stay.

One function decides it for the Autoscaler (when a node counts as unneeded) and for the NodePool
controller (which node goes when the target drops), so they pick the same nodes. Like
cluster-autoscaler's scale-down, candidates are taken greedily: each one's pods are placed on
the nodes left after the earlier picks, with the room those pods took, so the chosen nodes can go
*together*. DaemonSet and mirror pods do not make a node busy (:func:`~._views.is_workload`),
and a pod annotated ``kubeloop.dev/do-not-disrupt`` keeps its node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ._binpack import NodeState, _order_key, _Packer, _Pending
from ._quantity import Resources
from ._template import NodeTemplate, Taint
from ._views import PodView

__all__ = ["Disposal", "RemovalReason", "ScaleDownNode", "removal_order"]


class RemovalReason(StrEnum):
    EMPTY = "Empty"
    """No workload pods."""
    UNDERUTILIZED = "Underutilized"
    """Below the utilisation threshold, and its pods fit on the nodes that stay."""
    BUSY = "Busy"
    """Its pods would not fit elsewhere, or it is above the threshold."""
    DO_NOT_DISRUPT = "DoNotDisrupt"
    """A pod on it is annotated ``kubeloop.dev/do-not-disrupt: "true"``."""


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

    @property
    def removable(self) -> bool:
        """Whether it can go without leaving a pod without a place."""
        return self.reason in (RemovalReason.EMPTY, RemovalReason.UNDERUTILIZED)


def removal_order(
    nodes: Sequence[ScaleDownNode], *, threshold: float = 0.5
) -> tuple[Disposal, ...]:
    """Every node of ``nodes``, best to remove first.

    Empty nodes (by name), then those below ``threshold`` whose workload pods all fit on the
    nodes not picked before them (least utilised first), then the busy ones (least utilised
    first), then those holding a do-not-disrupt pod. Ties are broken by name.
    """
    usage = {n.name: n.utilization() for n in nodes}
    rest: dict[str, NodeState] = {n.name: _state(n) for n in nodes}
    order: list[Disposal] = []
    blocked = [n for n in nodes if any(p.do_not_disrupt for p in n.workload)]
    open_nodes = [n for n in nodes if n not in blocked]
    for node in sorted(open_nodes, key=lambda n: n.name):
        if not node.workload:
            order.append(Disposal(node.name, RemovalReason.EMPTY, 0.0))
            del rest[node.name]
    busy: list[ScaleDownNode] = []
    for node in sorted(
        (n for n in open_nodes if n.workload), key=lambda n: (usage[n.name], n.name)
    ):
        if usage[node.name] >= threshold:
            busy.append(node)
            continue
        # Its pods as they are now: pods moved onto it by an earlier pick move again.
        here = rest[node.name]
        others = [state for name, state in rest.items() if name != node.name]
        moved = _place(tuple(p for p in here.pods if p.workload), node.allocatable, others)
        if moved is None:
            busy.append(node)
            continue
        order.append(Disposal(node.name, RemovalReason.UNDERUTILIZED, usage[node.name]))
        del rest[node.name]
        rest.update(moved)
    order += [Disposal(n.name, RemovalReason.BUSY, usage[n.name]) for n in busy]
    order += [
        Disposal(n.name, RemovalReason.DO_NOT_DISRUPT, usage[n.name])
        for n in sorted(blocked, key=lambda n: (usage[n.name], n.name))
    ]
    return tuple(order)


def _state(node: ScaleDownNode) -> NodeState:
    free = node.allocatable
    for pod in node.pods:
        free -= pod.requests
    return NodeState(node.name, free, node.labels, node.taints, node.pods)


def _place(
    pods: Sequence[PodView], allocatable: Resources, others: Sequence[NodeState]
) -> dict[str, NodeState] | None:
    """The other nodes after ``pods`` moved onto them; ``None`` if one has no place. Pods are
    placed largest first, as the scale-up plan does."""
    nothing = NodeTemplate("none", Resources())
    packer = _Packer(nothing, others, in_flight=0, allowed_new=0)
    entries = sorted((_Pending(p) for p in pods), key=lambda e: _order_key(e, allocatable))
    for entry in entries:
        if packer.place(entry) is None:
            return None
    return {state.name: state for state in packer.existing_states()}
