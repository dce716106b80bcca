"""Reading a Pod: what it requests, what it asks of a node, and whether it should drive scale-up.

Pods are plain ``Mapping``s as the API returns them (camelCase keys). Missing or mistyped fields
read as empty: a pod the API server accepted is well formed, and a classifier must not crash on
fields older servers omit.

The candidate test follows cluster-autoscaler's ``ArrangePodsBySchedulability`` and Karpenter's
``IsProvisionable``: only the structured ``PodScheduled=False/Unschedulable`` condition counts. The
scheduler's message is kept for display but never parsed: its format changes between Kubernetes
versions and it reports only the first failing filter per node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from ._quantity import Resources

__all__ = [
    "Pod",
    "PodReason",
    "PodRef",
    "PodVerdict",
    "classify",
    "constraint_key",
    "get_list",
    "get_mapping",
    "get_text",
    "pod_ref",
    "pod_requests",
]

Pod = Mapping[str, object]
"""A Pod as the API returns it, e.g. ``json.loads`` of a GET."""

_EMPTY: Mapping[str, object] = {}


def get_mapping(obj: object, key: str) -> Mapping[str, object]:
    """``obj[key]`` when ``obj`` is a mapping and the value is one; otherwise an empty mapping."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else _EMPTY


def get_list(obj: object, key: str) -> list[object]:
    """``obj[key]`` when it is a list; otherwise an empty list."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def get_text(obj: object, key: str) -> str:
    """``obj[key]`` when it is a string; otherwise ``""``."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True, order=True)
class PodRef:
    """Names a pod. Orders by namespace, then name: the tie-break that keeps plans deterministic."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_ref(pod: Pod) -> PodRef:
    """The namespace and name of ``pod``."""
    metadata = get_mapping(pod, "metadata")
    return PodRef(get_text(metadata, "namespace"), get_text(metadata, "name"))


# --- requests -------------------------------------------------------------------------------

# Kubernetes 1.32+ lets a pod set cpu/memory once for all its containers (spec.resources).
_POD_LEVEL_RESOURCES = ("cpu", "memory")


def pod_requests(pod: Pod) -> Resources:
    """The pod's effective request, as kube-scheduler's NodeResourcesFit computes it.

    ``max(app containers + sidecars, peak init phase) + spec.overhead``, with ``pods=1``:

    * app containers and restartable init containers ("sidecars", ``restartPolicy: Always``) run
      together, so they add up;
    * a regular init container runs alone, next to the sidecars started before it, so the init
      phase peaks at ``max(init_i + sidecars started before i)``;
    * pod-level ``spec.resources.requests`` (cpu, memory) replace the container sum when set.

    A container limit without a request counts as the request, as API defaulting does, so pods
    built by hand (tests, fakes) agree with pods read from a server.

    Raises:
        ValueError: if a quantity is malformed, naming the pod.
    """
    try:
        return _effective_requests(pod)
    except ValueError as exc:
        raise ValueError(f"pod {pod_ref(pod)}: {exc}") from exc


def _effective_requests(pod: Pod) -> Resources:
    spec = get_mapping(pod, "spec")
    running = Resources()
    for container in get_list(spec, "containers"):
        running += _container_requests(container)
    sidecars = Resources()
    init_peak = Resources()
    for container in get_list(spec, "initContainers"):
        requests = _container_requests(container)
        if get_text(container, "restartPolicy") == "Always":
            running += requests
            sidecars += requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(requests + sidecars)
    total = running.max(init_peak)
    pod_level = get_mapping(get_mapping(spec, "resources"), "requests")
    if any(name in pod_level for name in _POD_LEVEL_RESOURCES):
        override = Resources.from_resource_list(
            {k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES}
        )
        total = Resources(
            cpu=override.cpu if "cpu" in pod_level else total.cpu,
            memory=override.memory if "memory" in pod_level else total.memory,
            ephemeral_storage=total.ephemeral_storage,
            extended=total.extended,
        )
    total += Resources.from_resource_list(get_mapping(spec, "overhead"))
    return total + Resources(pods=1)


def _container_requests(container: object) -> Resources:
    resources = get_mapping(container, "resources")
    requests = dict(get_mapping(resources, "requests"))
    for name, limit in get_mapping(resources, "limits").items():
        requests.setdefault(name, limit)
    return Resources.from_resource_list(requests)


# --- scheduling constraints -----------------------------------------------------------------


def constraint_key(pod: Pod) -> str:
    """A canonical string of everything that decides *which* nodes suit the pod.

    Two pods with equal keys pass or fail the same label and taint checks on every node, so
    the bin-packer checks each distinct key against each node once.
    """
    spec = get_mapping(pod, "spec")
    required = get_mapping(get_mapping(get_mapping(spec, "affinity"), "nodeAffinity"), _REQUIRED)
    return json.dumps(
        [spec.get("nodeSelector"), required, spec.get("tolerations")],
        sort_keys=True,
        default=str,
    )


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


# --- classification -------------------------------------------------------------------------


class PodReason(StrEnum):
    """Why a pod does or does not count as a scale-up candidate."""

    UNSCHEDULABLE = "Unschedulable"
    """Candidate: the scheduler tried every node and none fit (``PodScheduled=False``)."""
    NOT_UNSCHEDULABLE = "NotUnschedulable"
    """Not yet tried, being scheduled, or a condition reason other than ``Unschedulable``."""
    BOUND = "Bound"
    """``spec.nodeName`` is set. Missing secrets, volumes or images are the kubelet's business."""
    NOMINATED = "Nominated"
    """Preemption freed a node for it (``status.nominatedNodeName``); it will land there."""
    GATED = "Gated"
    """``spec.schedulingGates`` is not empty: the scheduler will not even try yet."""
    TERMINATING = "Terminating"
    """``metadata.deletionTimestamp`` is set."""
    FINISHED = "Finished"
    """Phase ``Succeeded`` or ``Failed``: the pod will never run again."""


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """The outcome of :func:`classify`.

    Attributes:
        reason: the rule that decided.
        message: the scheduler's ``PodScheduled`` message, for display only.
    """

    reason: PodReason
    message: str = ""

    @property
    def candidate(self) -> bool:
        """Whether the pod should be considered for scale-up."""
        return self.reason is PodReason.UNSCHEDULABLE


_TERMINAL_PHASES = ("Succeeded", "Failed")


def classify(pod: Pod) -> PodVerdict:
    """Decide whether ``pod`` counts as a scale-up candidate, and if not, why.

    A candidate has ``PodScheduled=False`` with reason ``Unschedulable``, no ``spec.nodeName``, no
    ``status.nominatedNodeName``, no scheduling gates, no deletion timestamp and a non-terminal
    phase. ``status.phase == "Pending"`` alone means nothing: bound pods stay Pending until their
    containers start.
    """
    metadata = get_mapping(pod, "metadata")
    spec = get_mapping(pod, "spec")
    status = get_mapping(pod, "status")
    condition = _pod_scheduled(status)
    message = get_text(condition, "message")
    if metadata.get("deletionTimestamp"):
        reason = PodReason.TERMINATING
    elif get_text(status, "phase") in _TERMINAL_PHASES:
        reason = PodReason.FINISHED
    elif get_text(spec, "nodeName"):
        reason = PodReason.BOUND
    elif get_text(status, "nominatedNodeName"):
        reason = PodReason.NOMINATED
    elif get_list(spec, "schedulingGates"):
        reason = PodReason.GATED
    elif (
        get_text(condition, "status") == "False"
        and get_text(condition, "reason") == "Unschedulable"
    ):
        reason = PodReason.UNSCHEDULABLE
    else:
        reason = PodReason.NOT_UNSCHEDULABLE
    return PodVerdict(reason, message)


def _pod_scheduled(status: Mapping[str, object]) -> Mapping[str, object]:
    for condition in get_list(status, "conditions"):
        if get_text(condition, "type") == "PodScheduled" and isinstance(condition, Mapping):
            return condition
    return _EMPTY
