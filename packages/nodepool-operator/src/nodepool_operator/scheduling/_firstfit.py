"""First-fit-decreasing: the pods an empty template node can hold, largest first, each on the
first node with room.

The nodes are tried in order: the ready nodes' free room, the requested-but-not-ready
("in-flight") nodes, the new nodes opened so far, and only then a fresh template node (Karpenter's
existing → in-flight → new). Admission comes first, as its own step (:func:`~._fit.admit`): a
pod no empty template node can hold is set aside with the reason, since no node count helps.

This is the exact search's incumbent (:func:`~._exact.pack`) and scale-down's check that a
node's pods fit the nodes that stay (:mod:`._scaledown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ._fit import FitResult, admit, check_constraints, check_node_affinity
from ._interpod import check_interpod
from ._pods import PodRef
from ._quantity import Resources
from ._slots import Booting, Existing, New, NodeSlot
from ._template import NodeTemplate, Taint
from ._views import HOSTNAME_KEY, ZONE_KEY, HostPort, PodView
from ._zones import ZoneCounts, zone_templates

__all__ = ["NodeState", "Packing", "Placement", "first_fit"]


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
class _Pending:
    """An admitted pod, as the packer and the exact search read it (``_exact.PackEntry``)."""

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


@dataclass(frozen=True, slots=True)
class Packing:
    """Where the pods went, and what could not be placed.

    Attributes:
        entries: the admitted pods, largest first (the order :attr:`placements` follow).
        placements: every placed pod, in placement order.
        new_nodes: fresh template nodes opened.
        overflow: admitted pods left over once ``allowed_new`` nodes were opened.
        refused: pods no node would take (no empty template node, or a new node's inter-pod
            or zone rules), with why, in the order they were refused.
        new_zones: the zone of each new node, in order (``()`` for a pool without zones).
        zone_targets: see :attr:`~._binpack.ScaleUpPlan.zone_targets`.
        plain: whether no pod (pending or already placed) constrains another or needs a zone:
            only then may the exact search, which knows resources, selectors and taints,
            improve the plan.
    """

    entries: tuple[_Pending, ...]
    placements: tuple[Placement, ...]
    new_nodes: int
    overflow: tuple[PodRef, ...]
    refused: tuple[tuple[PodRef, FitResult], ...]
    new_zones: tuple[str, ...]
    zone_targets: Mapping[str, int]
    plain: bool


def first_fit(
    pods: Sequence[PodView],
    template: NodeTemplate,
    existing_nodes: Sequence[NodeState],
    in_flight: int,
    allowed_new: int,
    zones: ZoneCounts,
) -> Packing:
    """First-fit-decreasing of ``pods`` over ``existing_nodes``, ``in_flight`` booting nodes
    and at most ``allowed_new`` new ones (see :func:`~._binpack.plan_scale_up`): admission,
    the order, then each pod on the first node with room."""
    templates = zone_templates(template, zones.zones) if zones.zones else (template,)
    admitted, refused = admit(pods, templates)
    entries = sorted(
        (_Pending(v) for v in admitted), key=lambda e: _order_key(e, template.allocatable)
    )
    packer = _Packer(template, existing_nodes, in_flight, allowed_new, zones)
    plain = not packer.constraining and not any(packer.scans(e.view) for e in entries)
    placements: list[Placement] = []
    overflow: list[PodRef] = []
    refusals = [(view.ref, fit) for view, fit in refused]
    for entry in entries:
        node = packer.place(entry)
        if node is None:
            refusal = packer.refusal
            if refusal is None or refusal.reason is None:
                overflow.append(entry.ref)  # room ran out at allowed_new
            else:
                refusals.append((entry.ref, refusal))
        else:
            placements.append(Placement(entry.ref, node))
    return Packing(
        entries=tuple(entries),
        placements=tuple(placements),
        new_nodes=packer.opened,
        overflow=tuple(overflow),
        refused=tuple(refusals),
        new_zones=tuple(packer.new_zones),
        zone_targets=packer.zone_targets(placements, entries),
        plain=plain,
    )


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
