"""Every field of a raw API object the Autoscaler reads itself, in one place.

The NodePool, the Autoscaler's spec and status are parsed by :mod:`nodepool_operator.api`, a
pod's scheduling needs by :func:`~nodepool_operator.scheduling.pod_view`; what is left (what a
pod references, a claim's state, the keys the informer indexes file objects under, the fields a
watch predicate compares) is read here, from whatever the API holds: these functions never
assume a shape, so a malformed object reads as empty rather than raising.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from nodepool_operator.controllers.autoscaler._pending import Claim, Needs, References
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
    "pod_needs",
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


def deleting(obj: object) -> bool:
    return bool(_mapping(obj, "metadata").get("deletionTimestamp"))


def pod_key(pod: object) -> str:
    """The pod's uid, which tells a re-created pod from the one it replaces; hand-made pods
    may lack one, then namespace/name."""
    uid = _text(_mapping(pod, "metadata"), "uid")
    return uid or str(pod_ref(pod if isinstance(pod, Mapping) else {}))


def autoscaler_namespaces(obj: object) -> list[str]:
    return [ns for ns in _items(_mapping(obj, "spec"), "namespaces") if isinstance(ns, str)]


def autoscaler_pool(obj: object) -> list[str]:
    name = _text(_mapping(_mapping(obj, "spec"), "nodePoolRef"), "name")
    return [name] if name else []


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


# --- what a pending pod waits on ----------------------------------------------------------


def pod_needs(pod: object) -> Needs:
    """The pod's priority and the non-optional Secrets, ConfigMaps and claims it needs, each
    once, in spec order.

    Covers ``secret``, ``configMap``, ``projected``, ``persistentVolumeClaim`` and generic
    ``ephemeral`` volumes (whose claim is named ``<pod>-<volume>``), and ``env``/``envFrom`` of
    containers and init containers. ``imagePullSecrets`` are left out: a missing one only makes
    the pull anonymous. Keys missing from an existing Secret are not checked (that would mean
    caching Secret data).
    """
    secrets: dict[str, None] = {}
    config_maps: dict[str, None] = {}
    claims: dict[str, None] = {}
    spec = _mapping(pod, "spec")
    meta = _mapping(pod, "metadata")
    pod_name = _text(meta, "name")
    for volume in _items(spec, "volumes"):
        _add(secrets, _mapping(volume, "secret"), "secretName")
        _add(config_maps, _mapping(volume, "configMap"), "name")
        for source in _items(_mapping(volume, "projected"), "sources"):
            _add(secrets, _mapping(source, "secret"), "name")
            _add(config_maps, _mapping(source, "configMap"), "name")
        name = _text(_mapping(volume, "persistentVolumeClaim"), "claimName")
        if name:
            claims[name] = None
        if isinstance(volume, Mapping) and "ephemeral" in volume:
            claims[f"{pod_name}-{_text(volume, 'name')}"] = None
    for container in _containers(spec):
        for env in _items(container, "env"):
            value_from = _mapping(env, "valueFrom")
            _add(secrets, _mapping(value_from, "secretKeyRef"), "name")
            _add(config_maps, _mapping(value_from, "configMapKeyRef"), "name")
        for env_from in _items(container, "envFrom"):
            _add(secrets, _mapping(env_from, "secretRef"), "name")
            _add(config_maps, _mapping(env_from, "configMapRef"), "name")
    priority = spec.get("priority")
    return Needs(
        namespace=_text(meta, "namespace"),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        references=References(tuple(secrets), tuple(config_maps), tuple(claims)),
    )


def claim(obj: object) -> Claim:
    """A PersistentVolumeClaim as :func:`~._pending.blocked` judges it."""
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


def _add(names: dict[str, None], ref: Mapping[str, object], key: str) -> None:
    name = _text(ref, key)
    if name and ref.get("optional") is not True:
        names[name] = None


def _containers(spec: Mapping[str, object]) -> Iterator[object]:
    yield from _items(spec, "initContainers")
    yield from _items(spec, "containers")
