"""Would a pod fit a node? The scheduler's filters that a pool's shape can decide.

Checks run in kube-scheduler's filter order (TaintToleration, NodeAffinity, NodeResourcesFit), so
the reported reason is the one the scheduler would give first. What depends on other pods (pod
(anti-)affinity, topology spread, host ports) is in :mod:`._interpod`, used by the bin-packer
where the other pods are known. Of volume topology, the zones a bound PersistentVolume allows
are checked with node affinity (:attr:`~._views.PodView.volume_terms`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ._pods import Pod, pod_view, toleration
from ._quantity import Resources, format_resource
from ._template import NodeTemplate, Taint
from ._views import NodeSelectorTerm, PodView

__all__ = [
    "FitReason",
    "FitResult",
    "admit",
    "check_constraints",
    "check_node_affinity",
    "check_room",
    "check_template_room",
    "pod_fits_node",
    "pod_fits_template",
    "tolerates",
]


class FitReason(StrEnum):
    """Why a pod does not fit a node."""

    TOO_BIG = "TooBig"
    """It requests more than an *empty* node offers: adding nodes cannot help."""
    INSUFFICIENT_RESOURCES = "InsufficientResources"
    """It requests more than an existing node has *free*."""
    NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
    """A ``spec.nodeSelector`` entry is not among the node's labels."""
    AFFINITY_MISMATCH = "AffinityMismatch"
    """No required node-affinity term matches the node."""
    UNTOLERATED_TAINT = "UntoleratedTaint"
    """The node has a ``NoSchedule``/``NoExecute`` taint the pod does not tolerate."""
    VOLUME_ZONE_CONFLICT = "VolumeZoneConflict"
    """A PersistentVolume it mounts is pinned to zones the node is not in (VolumeBinding's
    "volume node affinity conflict")."""
    HOST_PORT_CONFLICT = "HostPortConflict"
    """A host port it binds is taken on the node (NodePorts)."""
    POD_AFFINITY_MISMATCH = "PodAffinityMismatch"
    """No pod it requires is in the node's topology domain (InterPodAffinity)."""
    POD_ANTI_AFFINITY_CONFLICT = "PodAntiAffinityConflict"
    """A pod it must not share a topology domain with is there, or the other way round."""
    TOPOLOGY_SPREAD_VIOLATION = "TopologySpreadViolation"
    """Placing it there would break a ``DoNotSchedule`` spread constraint's maxSkew."""
    NOT_TAKEN = "NotTakenByNewNode"
    """The simulation put it on a new node, the node became Ready and the scheduler still did
    not bind it: the simulation and the scheduler disagree, so no more nodes are added for it."""


@dataclass(frozen=True, slots=True)
class FitResult:
    """The outcome of a fit check; truthy when the pod fits.

    Attributes:
        reason: ``None`` when the pod fits.
        detail: what failed, for humans, e.g. ``"memory 120Gi > 96Gi"``.
    """

    reason: FitReason | None = None
    detail: str = ""

    @property
    def fits(self) -> bool:
        return self.reason is None

    def __bool__(self) -> bool:
        return self.reason is None


_FITS = FitResult()


def pod_fits_template(pod: Pod | PodView, template: NodeTemplate) -> FitResult:
    """Whether ``pod`` fits an empty, new node of ``template``'s pool.

    ``matchFields`` terms (``metadata.name``) never match: a new node's name is not known yet.
    DaemonSet pods pin themselves to one node that way, so they never drive scale-up.
    """
    return check_template(pod_view(pod), template)


def check_template(view: PodView, template: NodeTemplate) -> FitResult:
    """:func:`pod_fits_template` of a view: its constraints, then its room."""
    result = check_constraints(view, template.labels, template.taints)
    if not result:
        return result
    return check_template_room(view.requests, template)


def admit(
    views: Sequence[PodView], templates: Sequence[NodeTemplate]
) -> tuple[list[PodView], list[tuple[PodView, FitResult]]]:
    """The pods an empty node of one of ``templates`` (a pool's template in each of its
    zones) can hold, in their order, and the others with the first template's reason: the
    plan's first step, which sets aside the pods no node count helps."""
    admitted: list[PodView] = []
    refused: list[tuple[PodView, FitResult]] = []
    for view in views:
        fits = [check_template(view, t) for t in templates]
        fit = next((f for f in fits if f), fits[0])
        if fit.reason is None:
            admitted.append(view)
        else:
            refused.append((view, fit))
    return admitted, refused


def pod_fits_node(
    pod: Pod | PodView,
    node_free: Resources,
    node_labels: Mapping[str, str],
    node_taints: Sequence[Taint],
    *,
    node_name: str | None = None,
) -> FitResult:
    """Whether ``pod`` fits an existing node with ``node_free`` room left.

    Pass ``node_name`` to evaluate ``matchFields`` affinity on ``metadata.name``.
    """
    view = pod_view(pod)
    result = check_constraints(view, node_labels, node_taints, node_name)
    if not result:
        return result
    return check_room(view.requests, node_free, FitReason.INSUFFICIENT_RESOURCES)


def check_template_room(requests: Resources, template: NodeTemplate) -> FitResult:
    """Whether ``requests`` fit an empty node of ``template``; ``TooBig`` otherwise, saying
    when it is the DaemonSets' share that makes the difference."""
    result = check_room(requests, template.allocatable, FitReason.TOO_BIG)
    overhead = template.daemonset_overhead
    if result or overhead == Resources():
        return result
    if requests.fits_in(template.allocatable + overhead):
        return FitResult(result.reason, f"{result.detail} after DaemonSets")
    return result


def check_room(requests: Resources, room: Resources, reason: FitReason) -> FitResult:
    """Compare a pod's requests with a node's room; on failure name every short resource."""
    if requests.fits_in(room):
        return _FITS
    detail = ", ".join(
        f"{name} {format_resource(name, requests.get(name))} > "
        f"{format_resource(name, room.get(name))}"
        for name in requests.exceeding(room)
    )
    return FitResult(reason, detail)


def check_constraints(
    view: PodView,
    labels: Mapping[str, str],
    taints: Iterable[Taint],
    node_name: str | None = None,
) -> FitResult:
    """Taints, ``nodeSelector`` and required node affinity; resources are not looked at."""
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not view.tolerates(taint):
            return FitResult(FitReason.UNTOLERATED_TAINT, str(taint))
    return check_node_affinity(view, labels, node_name)


def check_node_affinity(
    view: PodView, labels: Mapping[str, str], node_name: str | None = None
) -> FitResult:
    """``nodeSelector`` and required node affinity alone (NodeAffinity's filter)."""
    for key, wanted in view.node_selector:
        if labels.get(key) != wanted:
            have = f"{key}={labels[key]}" if key in labels else f"no {key}"
            return FitResult(FitReason.NODE_SELECTOR_MISMATCH, f"{key}={wanted} (node has {have})")
    if view.required_terms is not None:
        result = _check_terms(view.required_terms, labels, node_name)
        if not result:
            return result
    for terms in view.volume_terms:
        result = _check_terms(terms, labels, node_name)
        if not result:
            return FitResult(FitReason.VOLUME_ZONE_CONFLICT, f"volume: {result.detail}")
    return _FITS


def tolerates(tolerations: Iterable[Mapping[str, object]], taint: Taint) -> bool:
    """Whether any toleration tolerates ``taint`` (``v1.Toleration.ToleratesTaint``).

    A toleration matches when its effect is empty or equal, its key is empty or equal, and either
    its operator is ``Exists`` or its operator is ``Equal`` (the default) with an equal value. An
    empty key with ``Exists`` therefore tolerates every taint.
    """
    return any(toleration(t).tolerates(taint) for t in tolerations)


def _check_terms(
    terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str | None
) -> FitResult:
    # Terms are ORed; inside a term every expression must hold.
    first_failure = ""
    for term in terms:
        failure = term.failure(labels, node_name)
        if not failure:
            return _FITS
        first_failure = first_failure or failure
    if len(terms) == 1:
        return FitResult(FitReason.AFFINITY_MISMATCH, first_failure)
    if not terms:
        return FitResult(FitReason.AFFINITY_MISMATCH, "no nodeSelectorTerms")
    return FitResult(FitReason.AFFINITY_MISMATCH, f"none of {len(terms)} nodeSelectorTerms match")
