"""Would a pod fit a node? The scheduler's filters that a pool's shape can decide.

Checks run in kube-scheduler's filter order (TaintToleration, NodeAffinity, NodeResourcesFit), so
the reported reason is the one the scheduler would give first. Pod (anti-)affinity, topology spread,
host ports and volume topology are not simulated: they depend on other pods and volumes, not on
the pool, and cluster-autoscaler's FAQ warns the affinity predicate alone costs more than all
others combined.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ._pods import Pod, get_list, get_mapping, get_text, pod_requests
from ._quantity import Resources, format_resource
from ._template import NodeTemplate, Taint

__all__ = [
    "FitReason",
    "FitResult",
    "check_constraints",
    "check_room",
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


def pod_fits_template(pod: Pod, template: NodeTemplate) -> FitResult:
    """Whether ``pod`` fits an empty, new node of ``template``'s pool.

    ``matchFields`` terms (``metadata.name``) never match: a new node's name is not known yet.
    DaemonSet pods pin themselves to one node that way, so they never drive scale-up.
    """
    result = check_constraints(pod, template.labels, template.taints)
    if not result:
        return result
    return check_room(pod_requests(pod), template.allocatable, FitReason.TOO_BIG)


def pod_fits_node(
    pod: Pod,
    node_free: Resources,
    node_labels: Mapping[str, str],
    node_taints: Sequence[Taint],
    *,
    node_name: str | None = None,
) -> FitResult:
    """Whether ``pod`` fits an existing node with ``node_free`` room left.

    Pass ``node_name`` to evaluate ``matchFields`` affinity on ``metadata.name``.
    """
    result = check_constraints(pod, node_labels, node_taints, node_name)
    if not result:
        return result
    return check_room(pod_requests(pod), node_free, FitReason.INSUFFICIENT_RESOURCES)


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
    pod: Pod,
    labels: Mapping[str, str],
    taints: Iterable[Taint],
    node_name: str | None = None,
) -> FitResult:
    """Taints, ``nodeSelector`` and required node affinity; resources are not looked at."""
    spec = get_mapping(pod, "spec")
    tolerations = [t for t in get_list(spec, "tolerations") if isinstance(t, Mapping)]
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not tolerates(tolerations, taint):
            return FitResult(FitReason.UNTOLERATED_TAINT, str(taint))
    for key, wanted in get_mapping(spec, "nodeSelector").items():
        if labels.get(key) != wanted:
            have = f"{key}={labels[key]}" if key in labels else f"no {key}"
            return FitResult(FitReason.NODE_SELECTOR_MISMATCH, f"{key}={wanted} (node has {have})")
    affinity = get_mapping(get_mapping(spec, "affinity"), "nodeAffinity")
    required = get_mapping(affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    if "nodeSelectorTerms" in required:
        return _check_terms(get_list(required, "nodeSelectorTerms"), labels, node_name)
    return _FITS


def tolerates(tolerations: Iterable[Mapping[str, object]], taint: Taint) -> bool:
    """Whether any toleration tolerates ``taint`` (``v1.Toleration.ToleratesTaint``).

    A toleration matches when its effect is empty or equal, its key is empty or equal, and either
    its operator is ``Exists`` or its operator is ``Equal`` (the default) with an equal value. An
    empty key with ``Exists`` therefore tolerates every taint.
    """
    for toleration in tolerations:
        effect = get_text(toleration, "effect")
        if effect and effect != taint.effect:
            continue
        key = get_text(toleration, "key")
        if key and key != taint.key:
            continue
        operator = get_text(toleration, "operator") or "Equal"
        if operator == "Exists":
            return True
        if operator == "Equal" and get_text(toleration, "value") == taint.value:
            return True
    return False


def _check_terms(
    terms: list[object], labels: Mapping[str, str], node_name: str | None
) -> FitResult:
    # Terms are ORed; inside a term every expression must hold.
    first_failure = ""
    for term in terms:
        failure = _term_failure(term, labels, node_name)
        if not failure:
            return _FITS
        first_failure = first_failure or failure
    if len(terms) == 1:
        return FitResult(FitReason.AFFINITY_MISMATCH, first_failure)
    return FitResult(FitReason.AFFINITY_MISMATCH, f"none of {len(terms)} nodeSelectorTerms match")


def _term_failure(term: object, labels: Mapping[str, str], node_name: str | None) -> str:
    """The first expression of ``term`` that fails, rendered; ``""`` when the term matches."""
    expressions = get_list(term, "matchExpressions")
    fields = get_list(term, "matchFields")
    if not expressions and not fields:
        return "empty nodeSelectorTerm"  # the API defines an empty term as matching nothing
    for expression in expressions:
        if not _label_matches(expression, labels):
            return _render(expression)
    for expression in fields:
        if not _field_matches(expression, node_name):
            return _render(expression)
    return ""


_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


def _label_matches(expression: object, labels: Mapping[str, str]) -> bool:
    key = get_text(expression, "key")
    operator = get_text(expression, "operator")
    values = [v for v in get_list(expression, "values") if isinstance(v, str)]
    present = key in labels
    value = labels.get(key, "")
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        if not (_INTEGER.fullmatch(value) and _INTEGER.fullmatch(values[0])):
            return False
        if operator == "Gt":
            return int(value) > int(values[0])
        return int(value) < int(values[0])
    return False  # unknown operators never match, as in the scheduler


def _field_matches(expression: object, node_name: str | None) -> bool:
    if node_name is None or get_text(expression, "key") != "metadata.name":
        return False
    values = get_list(expression, "values")
    operator = get_text(expression, "operator")
    if operator == "In":
        return node_name in values
    if operator == "NotIn":
        return node_name not in values
    return False


def _render(expression: object) -> str:
    key = get_text(expression, "key")
    operator = get_text(expression, "operator")
    values = [v for v in get_list(expression, "values") if isinstance(v, str)]
    if operator in ("Exists", "DoesNotExist"):
        return f"{key} {operator}"
    return f"{key} {operator} [{', '.join(values)}]"
