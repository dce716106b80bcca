"""How many new nodes do the pending pods need? First-fit-decreasing over a pool's nodes.

The plan follows cluster-autoscaler (``FilterOutSchedulable`` + ``BinpackingNodeEstimator``) and
Karpenter (existing → in-flight → new):

1. pods that cannot fit an empty template node are set aside with the reason; no node count helps;
2. the rest are sorted largest first and each goes on the first node with room, trying in order
   the ready nodes' free capacity, the requested-but-not-ready ("in-flight") nodes, the new nodes
   opened so far, and only then a fresh template node;
3. the fresh nodes opened are the scale-up; pods that would need a node beyond ``max_nodes`` are
   reported as :attr:`PlanReason.MAX_NODES_REACHED`.

Counting in-flight nodes as capacity is what keeps a second wave of pods, arriving while the first
wave's nodes boot, from asking for the same nodes twice (``kubernetes/kubernetes#43709``).

FFD uses at most 11/9·OPT + 6/9 bins, which is the bound cluster-autoscaler relies on too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ._exact import DEFAULT_BUDGET, SearchBudget, pack_fewest
from ._fit import (
    FitReason,
    FitResult,
    check_constraints,
    check_node_affinity,
    check_room,
    check_template,
)
from ._interpod import check_interpod
from ._pods import Pod, PodRef, pod_view
from ._quantity import Resources
from ._slots import Booting, Existing, New, NodeSlot
from ._template import NodeTemplate, Taint
from ._views import HOSTNAME_KEY, ZONE_KEY, HostPort, PodView
from ._zones import ZoneCounts, zone_templates

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
class NodeState:
    """A ready node of the pool and the room its running pods leave on it.

    Attributes:
        name: the Node's name.
        free: allocatable minus the requests of the pods bound to it. Include ``pods``: a free
            vector with ``pods=0`` holds nothing.
        labels: the Node's labels, checked against nodeSelector and affinity.
        taints: the Node's taints.
        pods: the pods bound to it, for pod (anti-)affinity, spread and host ports.
    """

    name: str
    free: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    pods: tuple[PodView, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the simulation put one pod: a node of the pool (:class:`~._slots.Existing`), a
    booting one (:class:`~._slots.Booting`) or a new one (:class:`~._slots.New`)."""

    pod: PodRef
    node: NodeSlot


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


@dataclass(frozen=True, slots=True)
class _Pending:
    view: PodView

    @property
    def ref(self) -> PodRef:
        return self.view.ref

    @property
    def pod(self) -> PodView:
        return self.view

    @property
    def requests(self) -> Resources:
        return self.view.requests

    @property
    def constraints(self) -> str:
        return self.view.constraints


@dataclass(slots=True)
class _Bin:
    """A node of the simulation: its room, and what the inter-pod filters need of it."""

    label: NodeSlot
    free: Resources
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    pods: list[PodView] = field(default_factory=list)
    ports: list[HostPort] = field(default_factory=list)

    def take(self, view: PodView) -> None:
        self.free = self.free - view.requests
        self.pods.append(view)
        self.ports.extend(view.host_ports)


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
    rejected: _Rejected = {}
    counts = ZoneCounts(zones, (n.labels for n in existing_nodes), zone_targets)
    candidates = _admit(pending_pods, template, rejected, counts.zones)
    packer = _Packer(
        template, existing_nodes, max(in_flight, 0), max(max_nodes - current_target, 0), counts
    )
    # The exact search knows resources, selectors and taints, not other pods nor zones: it
    # may only improve a plan none of whose pods (pending or already placed) constrains
    # another or needs a zone.
    plain = not packer.constraining and not any(packer.scans(e.view) for e in candidates)
    placements: list[Placement] = []
    overflow: list[PodRef] = []
    for entry in candidates:
        node = packer.place(entry)
        if node is None:
            refusal = packer.refusal
            if refusal is None or refusal.reason is None:
                overflow.append(entry.ref)  # room ran out at max_nodes
            else:
                rejected.setdefault((refusal.reason, refusal.detail), []).append(entry.ref)
        else:
            placements.append(Placement(entry.ref, node))
    new_nodes = packer.opened
    if search is not None and plain and (new_nodes or overflow):
        # FFD may open a node too many; when it hit max_nodes, all pods may still fit within it.
        allowed_new = max(max_nodes - current_target, 0)
        exact = pack_fewest(
            candidates,
            template,
            existing_nodes,
            max(in_flight, 0),
            fewer_than=allowed_new + 1 if overflow else new_nodes,
            budget=search,
        )
        if exact is not None:
            placements = [
                Placement(e.ref, label) for e, label in zip(candidates, exact.labels, strict=True)
            ]
            new_nodes, overflow = exact.new_nodes, []
    if overflow:
        rejected[(PlanReason.MAX_NODES_REACHED, f"max {max_nodes} nodes")] = overflow
    groups = [
        UnschedulableGroup(reason, detail, tuple(sorted(refs)))
        for (reason, detail), refs in rejected.items()
    ]
    return ScaleUpPlan(
        new_zones=tuple(packer.new_zones[:new_nodes]),
        zone_targets=packer.zone_targets(placements, candidates),
        template=template.name,
        current_target=current_target,
        desired_target=max(current_target, min(current_target + new_nodes, max_nodes)),
        new_nodes=new_nodes,
        max_nodes=max_nodes,
        placements=tuple(placements),
        unschedulable=tuple(sorted(groups, key=lambda g: (_REASON_ORDER[g.reason], g.detail))),
    )


_Rejected = dict[tuple[FitReason | PlanReason, str], list[PodRef]]


def _admit(
    pods: Sequence[PodView], template: NodeTemplate, rejected: _Rejected, zones: Sequence[str]
) -> list[_Pending]:
    """The pods an empty template node (in one of ``zones``, if any) can hold, largest
    first; the rest go to ``rejected`` with the first zone's reason."""
    templates = zone_templates(template, zones) if zones else (template,)
    admitted: list[_Pending] = []
    for pod in pods:
        entry = _Pending(pod)
        fits = [check_template(entry.view, t) for t in templates]
        fit = next((f for f in fits if f), fits[0])
        if fit.reason is None:
            admitted.append(entry)
        else:
            rejected.setdefault((fit.reason, fit.detail), []).append(entry.ref)
    admitted.sort(key=lambda entry: _order_key(entry, template.allocatable))
    return admitted


def _order_key(entry: _Pending, allocatable: Resources) -> tuple[float, float, PodRef]:
    shares = [amount / allocatable.get(name) for name, amount in entry.requests.items() if amount]
    # Negated so that an ascending sort puts the biggest pods first and names break ties.
    return (-max(shares, default=0.0), -sum(shares), entry.ref)


class _Packer:
    """First-fit over existing, then in-flight, then new bins.

    Free room only shrinks, so once a pod fails a bin, an identical pod (same requests and
    constraints) fails it too: each such class keeps a cursor and resumes where the last one
    stopped. That turns N identical pods on M full nodes from N·M checks into about N + M.
    The cursor is skipped while inter-pod rules are in play (a pod that needs another pod's
    company may fit a bin later that it failed before); those pods scan every bin.
    """

    def __init__(
        self,
        template: NodeTemplate,
        existing_nodes: Sequence[NodeState],
        in_flight: int,
        allowed_new: int,
        zones: ZoneCounts | None = None,
    ) -> None:
        self._template = template
        self._zones = zones or ZoneCounts((), ())
        self.new_zones: list[str] = []
        """The zone of each new node opened, in order (none for a pool without zones)."""
        self._existing = sorted(existing_nodes, key=lambda n: n.name)
        self._existing_bins = [
            _Bin(Existing(n.name), n.free, n.name, n.labels, n.taints, list(n.pods))
            for n in self._existing
        ]
        for b in self._existing_bins:
            b.ports = [port for pod in b.pods for port in pod.host_ports]
        self._template_bins = [
            self._template_bin(Booting(i), self._zones.next() if self._zones.zones else None)
            for i in range(in_flight)
        ]
        # One empty node per zone the pool can launch into, never opened: every such zone is
        # a topology domain of a zone spread (Karpenter counts the pool's zones so too), not
        # only the zones where a node exists already.
        self._phantoms = [
            _Bin(New(-1), template.allocatable, None, _zone_labels(template, z))
            for z in self._zones.zones
        ]
        self._allowed_new = allowed_new
        self.opened = 0
        self.refusal: FitResult | None = None
        """Why the last pod :meth:`place` refused would not fit a new node either."""
        self._compatible: dict[str, list[_Bin]] = {}
        self._cursors: dict[tuple[str, Resources], tuple[int, int]] = {}
        # Whether any pod in the simulation refuses others (anti-affinity). Host ports matter
        # only to a pod that binds some itself, which takes the inter-pod path anyway.
        self._constraining = any(pod.anti_affinity for b in self._existing_bins for pod in b.pods)
        #: whether a pod already on a node refuses others (before anything is placed)
        self.constraining = self._constraining

    def _template_bin(self, label: NodeSlot, zone: str | None) -> _Bin:
        # Every template node is a hostname of its own; other labels are the template's.
        labels = {**_zone_labels(self._template, zone), HOSTNAME_KEY: f"({label})"}
        return _Bin(label, self._template.allocatable, None, labels, self._template.taints)

    def scans(self, view: PodView) -> bool:
        """Whether ``view`` is placed by checking each node in turn (:meth:`_place_scan`):
        it depends on other pods, or on the zone of a pool that has zones."""
        return view.interpod or (bool(self._zones.zones) and view.zonal)

    def place(self, entry: _Pending) -> NodeSlot | None:
        """Put ``entry`` on the first bin with room and return its node; ``None`` at max."""
        view = entry.view
        self.refusal = None
        if self._constraining or self.scans(view):
            chosen = self._place_scan(view)
        else:
            chosen = self._place_plain(entry)
        if chosen is None:
            return None
        chosen.take(view)
        self._constraining = self._constraining or bool(view.anti_affinity)
        return chosen.label

    def _place_plain(self, entry: _Pending) -> _Bin | None:
        key = (entry.constraints, entry.requests)
        at_existing, at_template = self._cursors.get(key, (0, 0))
        chosen, at_existing = _first_fit(self._existing_for(entry), entry.requests, at_existing)
        if chosen is None:
            chosen, at_template = _first_fit(self._template_bins, entry.requests, at_template)
        if chosen is None:
            chosen = self._open()
        self._cursors[key] = (at_existing, at_template)
        return chosen

    def _place_scan(self, view: PodView) -> _Bin | None:
        everything = [*self._existing_bins, *self._template_bins, *self._phantoms]
        zoned = bool(self._zones.zones)
        for b in self._existing_for(_Pending(view)):
            if view.requests.fits_in(b.free) and check_interpod(view, b, everything):
                return b
        for b in self._template_bins:
            if not view.requests.fits_in(b.free) or (
                zoned and not check_node_affinity(view, b.labels)
            ):
                continue
            if check_interpod(view, b, everything):
                return b
        # A new node: in the first zone, in the order new nodes go to zones, that takes it.
        refusal: FitResult | None = None
        for zone in self._zones.order() if zoned else [None]:
            fresh = self._template_bin(New(self.opened), zone)
            result = check_node_affinity(view, fresh.labels) if zoned else FitResult()
            if result:
                result = check_interpod(view, fresh, [*everything, fresh])
            if result:
                return self._open(zone)
            refusal = refusal or result
        self.refusal = refusal  # a new node would not take it either: no count helps
        return None

    def _open(self, zone: str | None = None) -> _Bin | None:
        if self.opened >= self._allowed_new:
            return None
        if self._zones.zones:
            zone = zone if zone is not None else self._zones.order()[0]
            self._zones.take(zone)
            self.new_zones.append(zone)
        chosen = self._template_bin(New(self.opened), zone)
        self._template_bins.append(chosen)
        self.opened += 1
        return chosen

    def zone_targets(
        self, placements: Sequence[Placement], entries: Sequence[_Pending]
    ) -> dict[str, int]:
        """The zones whose booting or new nodes hold a pod that needs its zone, each with
        the pool's node count there (:meth:`ZoneCounts.targets`)."""
        if not self._zones.zones:
            return {}
        zonal = {e.ref for e in entries if e.view.zonal}
        zone_of = {b.label: b.labels.get(ZONE_KEY) for b in self._template_bins}
        needed = [
            zone for p in placements if p.pod in zonal and (zone := zone_of.get(p.node)) is not None
        ]
        return self._zones.targets(needed)

    def existing_states(self) -> list[NodeState]:
        """The existing nodes with the room and pods the placements so far left them."""
        return [
            replace(node, free=b.free, pods=tuple(b.pods))
            for node, b in zip(self._existing, self._existing_bins, strict=True)
        ]

    def _existing_for(self, entry: _Pending) -> list[_Bin]:
        # Label and taint checks depend only on the pod's constraints, so do them once per class.
        bins = self._compatible.get(entry.constraints)
        if bins is None:
            bins = [
                b
                for b, node in zip(self._existing_bins, self._existing, strict=True)
                if check_constraints(entry.view, node.labels, node.taints, node.name)
            ]
            self._compatible[entry.constraints] = bins
        return bins


def _zone_labels(template: NodeTemplate, zone: str | None) -> dict[str, str]:
    """A template node's labels in ``zone`` (``None``: the template's alone)."""
    if zone is None:
        return dict(template.labels)
    return {**template.labels, ZONE_KEY: zone}


def _first_fit(bins: list[_Bin], requests: Resources, start: int) -> tuple[_Bin | None, int]:
    """The first bin from ``start`` with room for ``requests`` and its index (or the end)."""
    index = start
    while index < len(bins):
        if requests.fits_in(bins[index].free):
            return bins[index], index
        index += 1
    return None, index


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
