"""How many new nodes do the pending pods need? The plan, over a pool's nodes.

The plan follows cluster-autoscaler (``FilterOutSchedulable`` + ``BinpackingNodeEstimator``) and
Karpenter (existing → in-flight → new), one call per step, each a level down (Karpenter's
provisioner → scheduler → node claim): :func:`plan_scale_up` asks the packing
(:func:`~._exact.pack`) once and makes the plan of it; the packing takes first fit's
(:func:`~._firstfit.first_fit`) as its incumbent and searches for fewer new nodes; first fit
admits the pods first (:func:`~._fit.admit`):

1. pods that cannot fit an empty template node are set aside with the reason; no node count helps;
2. the rest are sorted largest first and each goes on the first node with room, trying in order
   the ready nodes' free capacity, the requested-but-not-ready ("in-flight") nodes, the new nodes
   opened so far, and only then a fresh template node;
3. the fresh nodes opened are the scale-up, fewer when the exact search finds a packing with
   fewer; pods that would need a node beyond ``max_nodes`` are reported as
   :attr:`PlanReason.MAX_NODES_REACHED`.

Counting in-flight nodes as capacity is what keeps a second wave of pods, arriving while the first
wave's nodes boot, from asking for the same nodes twice (``kubernetes/kubernetes#43709``).

FFD uses at most 11/9·OPT + 6/9 bins, which is the bound cluster-autoscaler relies on too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ._exact import DEFAULT_BUDGET, SearchBudget, pack
from ._firstfit import NodeState, Placement
from ._fit import FitReason, check_constraints, check_room
from ._pods import Pod, PodRef, pod_view
from ._quantity import Resources
from ._slots import New, NodeSlot
from ._template import NodeTemplate
from ._views import PodView
from ._zones import ZoneCounts

__all__ = [
    "NodeState",
    "Placement",
    "PlanReason",
    "ScaleUpPlan",
    "UnschedulableGroup",
    "crowded_out",
    "lower_bound",
    "plan_scale_up",
]


class PlanReason(StrEnum):
    """Why the plan leaves a pod unplaced although it fits a template node."""

    MAX_NODES_REACHED = "MaxNodesReached"
    """Placing it would need more nodes than the pool's ``max_nodes``."""


@dataclass(frozen=True, slots=True)
class UnschedulableGroup:
    """Pods left unplaced for the same reason and detail, sorted by namespace and name."""

    reason: FitReason | PlanReason
    detail: str
    pods: tuple[PodRef, ...]


@dataclass(frozen=True, slots=True)
class ScaleUpPlan:
    """The outcome of :func:`plan_scale_up`.

    Attributes:
        template: the template's name, e.g. ``"mem96.large"``.
        current_target: the pool's target before the plan.
        desired_target: the target to write; never below ``current_target``.
        new_nodes: template nodes opened beyond the current target.
        max_nodes: the pool's limit the plan respected.
        placements: every placed pod, in placement order (largest first).
        unschedulable: unplaced pods, grouped by reason and detail.
        new_zones: the zone of each new node, by index (``()`` for a pool without zones).
        zone_targets: the fewest of the pool's nodes each zone needs for the plan to hold,
            only for zones a placed pod needs specifically (its node affinity, its volume's
            zone, a spread or (anti-)affinity over zones), for ``spec.zoneTargets``.
    """

    template: str
    current_target: int
    desired_target: int
    new_nodes: int
    max_nodes: int
    placements: tuple[Placement, ...]
    unschedulable: tuple[UnschedulableGroup, ...]
    new_zones: tuple[str, ...] = ()
    zone_targets: Mapping[str, int] = field(default_factory=dict)

    @property
    def scale_up(self) -> bool:
        """Whether the plan raises the target."""
        return self.desired_target > self.current_target

    def node_for(self, pod: PodRef) -> NodeSlot | None:
        """The node ``pod`` was placed on, or ``None``."""
        for placement in self.placements:
            if placement.pod == pod:
                return placement.node
        return None

    @property
    def summary(self) -> str:
        """One line for ``status.lastDecision``.

        E.g. ``scale up 2 -> 4: 9 pods need 2 new mem96.large nodes; 1 pod too big (memory
        120Gi > 96Gi)``.
        """
        on_new = sum(1 for p in self.placements if isinstance(p.node, New))
        elsewhere = len(self.placements) - on_new
        if self.new_nodes:
            verb = "needs" if on_new == 1 else "need"
            head = (
                f"scale up {self.current_target} -> {self.desired_target}: "
                f"{_pods(on_new)} {verb} {self.new_nodes} new {self.template} "
                f"node{'' if self.new_nodes == 1 else 's'}"
            )
            if self.new_zones:
                head += f" ({_per_zone(self.new_zones)})"
            if elsewhere:
                head += f", {elsewhere} fit existing or booting nodes"
        else:
            head = f"no scale up (target {self.current_target})"
            if elsewhere:
                head += f": {_pods(elsewhere)} fit existing or booting nodes"
            elif not self.unschedulable:
                head += ": no pending pods"
        parts = [head, *(self._describe(g) for g in self.unschedulable[:_SUMMARY_GROUPS])]
        hidden = len(self.unschedulable) - _SUMMARY_GROUPS
        if hidden > 0:
            parts.append(f"+{hidden} more reason{'' if hidden == 1 else 's'}")
        return "; ".join(parts)

    def _describe(self, group: UnschedulableGroup) -> str:
        count = _pods(len(group.pods))
        if group.reason is PlanReason.MAX_NODES_REACHED:
            return f"{count} waiting: pool at max {self.max_nodes} nodes"
        return f"{count} {_PHRASES[group.reason]} ({group.detail})"


_SUMMARY_GROUPS = 3
_PHRASES = {
    FitReason.TOO_BIG: "too big",
    FitReason.INSUFFICIENT_RESOURCES: "short of resources",
    FitReason.NODE_SELECTOR_MISMATCH: "not matching node selector",
    FitReason.AFFINITY_MISMATCH: "not matching node affinity",
    FitReason.UNTOLERATED_TAINT: "not tolerating taint",
    FitReason.HOST_PORT_CONFLICT: "needing a free host port",
    FitReason.POD_AFFINITY_MISMATCH: "not matching pod affinity",
    FitReason.POD_ANTI_AFFINITY_CONFLICT: "blocked by pod anti-affinity",
    FitReason.TOPOLOGY_SPREAD_VIOLATION: "not satisfying topology spread",
    FitReason.NOT_TAKEN: "not taken by the new node",
}
_REASON_ORDER = {reason: rank for rank, reason in enumerate([*FitReason, *PlanReason])}


def _pods(count: int) -> str:
    return f"{count} pod{'' if count == 1 else 's'}"


def _per_zone(zones: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for zone in zones:
        counts[zone] = counts.get(zone, 0) + 1
    return ", ".join(f"{zone}: {n}" for zone, n in sorted(counts.items()))


def plan_scale_up(
    pending_pods: Sequence[PodView],
    *,
    template: NodeTemplate,
    existing_nodes: Sequence[NodeState] = (),
    in_flight: int = 0,
    current_target: int,
    max_nodes: int,
    search: SearchBudget | None = DEFAULT_BUDGET,
    zones: Sequence[str] = (),
    zone_targets: Mapping[str, int] | None = None,
) -> ScaleUpPlan:
    """Plan how far to raise a pool's target so that ``pending_pods`` can run.

    Args:
        pending_pods: the views (:func:`~._views.pod_view`) of the pods :func:`classify` calls
            candidates. Nothing here re-checks that.
        template: what a new node of the pool looks like.
        existing_nodes: the pool's ready nodes with their free room; tried in name order.
        in_flight: nodes requested but not ready (target minus ready), each an empty template
            node. A negative value (a scale-down in progress) counts as 0. Pass 0 for a pool in
            backoff, so its phantom nodes stop hiding the need for capacity.
        current_target: the pool's ``targetNodes`` now.
        max_nodes: the most nodes the pool may have.
        search: the budget of the exact search that follows FFD (:mod:`._exact`), or ``None``
            for FFD alone.
        zones: the zones the pool can launch into (its ``status.zones``); each booting and
            new node is simulated in one of them (:mod:`._zones`). Empty: one unnamed zone,
            no zone label.
        zone_targets: the pool's ``spec.zoneTargets`` now, which decided the booting nodes'
            zones.

    Pods are placed first-fit-decreasing by their *dominant share*: the largest fraction of the
    template's allocatable they request in any one resource, ties broken by the sum of shares
    (cluster-autoscaler's key), then by namespace and name, so equal inputs give equal plans.

    ``desired_target`` is ``min(current_target + new_nodes, max_nodes)``, but never below
    ``current_target``: lowering a target that is over the limit is scale-down's job.

    Raises:
        ValueError: if ``current_target`` or ``max_nodes`` is negative.
    """
    if current_target < 0 or max_nodes < 0:
        raise ValueError(f"need non-negative targets, got {current_target=} {max_nodes=}")
    counts = ZoneCounts(zones, (n.labels for n in existing_nodes), zone_targets)
    # One call per step: the packing (admission, first-fit-decreasing, then the exact search
    # for fewer new nodes: :func:`~._exact.pack`), then the plan it makes.
    packing = pack(
        pending_pods,
        template,
        existing_nodes,
        max(in_flight, 0),
        max(max_nodes - current_target, 0),
        counts,
        search,
    )
    rejected: dict[tuple[FitReason | PlanReason, str], list[PodRef]] = {}
    for ref, fit in packing.refused:
        if fit.reason is not None:
            rejected.setdefault((fit.reason, fit.detail), []).append(ref)
    if packing.overflow:
        rejected[(PlanReason.MAX_NODES_REACHED, f"max {max_nodes} nodes")] = list(packing.overflow)
    groups = [
        UnschedulableGroup(reason, detail, tuple(sorted(refs)))
        for (reason, detail), refs in rejected.items()
    ]
    new_nodes = packing.new_nodes
    return ScaleUpPlan(
        new_zones=packing.new_zones,
        zone_targets=packing.zone_targets,
        template=template.name,
        current_target=current_target,
        desired_target=max(current_target, min(current_target + new_nodes, max_nodes)),
        new_nodes=new_nodes,
        max_nodes=max_nodes,
        placements=packing.placements,
        unschedulable=tuple(sorted(groups, key=lambda g: (_REASON_ORDER[g.reason], g.detail))),
    )


def crowded_out(pod: Pod | PodView, nodes: Sequence[NodeState]) -> bool:
    """Whether ``pod`` would be allowed on some of ``nodes`` and fits none of them only for want
    of free room: other pods took the room, so more capacity is the answer.

    The autoscaler asks this of a pod it planned on a new node that the scheduler left unbound
    once the node was Ready: a crowded-out pod is planned again, any other is a disagreement
    between the simulation and the scheduler (see ``controllers.autoscaler._landing``).
    """
    view = pod_view(pod)
    allowed = [n for n in nodes if check_constraints(view, n.labels, n.taints, n.name)]
    if not allowed or any(view.requests.fits_in(n.free) for n in allowed):
        return False
    # Room its pods hold, not a node smaller than the template: a node that could not hold it
    # even empty is a disagreement (planning again would add such nodes up to maxNodes).
    return any(view.requests.fits_in(_held(n)) for n in allowed)


def _held(node: NodeState) -> Resources:
    total = node.free
    for pod in node.pods:
        total += pod.requests
    return total


def lower_bound(pods: Iterable[Pod | PodView], template: NodeTemplate) -> int:
    """The fewest empty template nodes that could hold ``pods``, ignoring how they pack.

    ``max`` over resources of ``ceil(total request / allocatable)``. Pods that cannot fit a
    template node at all are left out: no number of nodes holds them.
    """
    total = Resources()
    for pod in pods:
        view = pod_view(pod)
        requests = view.requests
        fits = check_constraints(view, template.labels, template.taints) and check_room(
            requests, template.allocatable, FitReason.TOO_BIG
        )
        if fits:
            total += requests
    return max(
        (
            math.ceil(amount / template.allocatable.get(name))
            for name, amount in total.items()
            if amount
        ),
        default=0,
    )
