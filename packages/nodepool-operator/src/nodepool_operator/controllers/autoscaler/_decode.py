"""Every field of a raw API object the Autoscaler reads itself, in one place.

The NodePool, the Autoscaler's spec and status are parsed by :mod:`nodepool_operator.api`, a
pod (its scheduling needs, what it references) by
:func:`~nodepool_operator.scheduling.read_pending`; what is left (a claim's state, the keys
the informer indexes file objects under, the fields a
watch predicate compares) is read here, from whatever the API holds: these functions never
assume a shape, so a malformed object reads as empty rather than raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from nodepool_operator.controllers._indexes import autoscaler_pool, deleting
from nodepool_operator.controllers.autoscaler._pending import Claim
from nodepool_operator.scheduling import NodeSelectorTerm, pod_ref, volume_zone_terms

__all__ = [
    "autoscaler_namespaces",
    "autoscaler_pool",
    "claim",
    "deleting",
    "late_binding",
    "node_offer",
    "object_name",
    "pod_finished",
    "pod_key",
    "pod_namespace",
    "volume_zones",
]

_TERMINAL_PHASES: Final = ("Succeeded", "Failed")


def _mapping(obj: object, key: str) -> Mapping[str, object]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _items(obj: object, key: str) -> list[object]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def _text(obj: object, key: str) -> str:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, str) else ""


# --- names and index keys -----------------------------------------------------------------


def object_name(obj: object) -> str:
    return _text(_mapping(obj, "metadata"), "name")


def pod_key(pod: object) -> str:
    """The pod's uid, which tells a re-created pod from the one it replaces; hand-made pods
    may lack one, then namespace/name."""
    uid = _text(_mapping(pod, "metadata"), "uid")
    return uid or str(pod_ref(pod if isinstance(pod, Mapping) else {}))


def autoscaler_namespaces(obj: object) -> list[str]:
    return [ns for ns in _items(_mapping(obj, "spec"), "namespaces") if isinstance(ns, str)]


def pod_namespace(obj: object) -> list[str]:
    return [_text(_mapping(obj, "metadata"), "namespace")]


def pod_finished(pod: object) -> bool:
    return _text(_mapping(pod, "status"), "phase") in _TERMINAL_PHASES


def node_offer(node: object) -> tuple[object, ...]:
    """What a Node offers the plan (labels, taints, room, readiness), not its heartbeats."""
    status = _mapping(node, "status")
    ready = [
        _text(c, "status") for c in _items(status, "conditions") if _text(c, "type") == "Ready"
    ]
    spec = _mapping(node, "spec")
    return (
        _mapping(node, "metadata").get("labels"),
        deleting(node),
        spec.get("unschedulable"),
        spec.get("taints"),
        status.get("allocatable"),
        ready,
    )


# --- what a pending pod waits on: the objects it references, as found ---------------------


def claim(obj: object) -> Claim:
    """A PersistentVolumeClaim as :meth:`~._pending.Lookup.blocker` judges it."""
    return Claim(
        deleting=deleting(obj),
        phase=_text(_mapping(obj, "status"), "phase"),
        storage_class=_text(_mapping(obj, "spec"), "storageClassName"),
        volume=_text(_mapping(obj, "spec"), "volumeName"),
    )


def volume_zones(volume: object) -> tuple[NodeSelectorTerm, ...]:
    """The zones a PersistentVolume's node affinity pins its pods to (``()``: any zone), as
    :func:`~nodepool_operator.scheduling.volume_zone_terms` reads them."""
    return volume_zone_terms(volume)


def late_binding(storage_class: object) -> bool:
    """Whether a StorageClass binds its claims only once a pod has a node."""
    return _text(storage_class, "volumeBindingMode") == "WaitForFirstConsumer"
