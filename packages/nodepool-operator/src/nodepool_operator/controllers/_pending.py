"""Unschedulable pods that a new node would not help: they wait on an object, not on room.

kube-scheduler reports ``PodScheduled=False, reason=Unschedulable`` for any failing filter, and
it checks Secrets and ConfigMaps not at all. A pod whose non-optional Secret or ConfigMap is
missing would not start on a new node either (the kubelet fails it with
``CreateContainerConfigError`` or ``FailedMount``), and a claim that is missing, lost or unbound
with immediate binding blocks the scheduler itself. cluster-autoscaler scales for such pods anyway
(kubernetes/autoscaler#923, #5801); we set them aside with a reason instead.

Pure: :func:`references` says what a pod needs, the controller looks those objects up (see
:mod:`._references`) and :func:`blocked` decides from what it found.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from nodepool_operator.scheduling import Pod, get_list, get_mapping, get_text

__all__ = ["Blocked", "Blocker", "Lookup", "NamespacedName", "References", "blocked", "references"]

NamespacedName = tuple[str, str]
"""``(namespace, name)`` of a namespaced object."""


class Blocker(StrEnum):
    """Why a pod waits on something other than capacity."""

    MISSING_SECRET = "MissingSecret"
    """A non-optional Secret it mounts or reads into its environment does not exist."""
    MISSING_CONFIG_MAP = "MissingConfigMap"
    """A non-optional ConfigMap it mounts or reads into its environment does not exist."""
    MISSING_PVC = "MissingPVC"
    """A PersistentVolumeClaim it mounts does not exist or is being deleted."""
    BELOW_PRIORITY_CUTOFF = "BelowPriorityCutoff"
    """Its priority is below the cutoff: an expendable pod, worth no new node (it would be
    preempted by anything that needs the room)."""
    UNBOUND_PVC = "UnboundPVC"
    """A claim it mounts is not bound and will not be bound for a node (immediate binding, or
    lost): the scheduler rejects every node, new ones included."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """The first thing a pod waits on, e.g. ``MissingSecret`` / ``secret "db-password"``."""

    reason: Blocker
    detail: str


@dataclass(frozen=True, slots=True)
class References:
    """The objects in the pod's namespace that must exist before it can start."""

    secrets: tuple[str, ...] = ()
    config_maps: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the controller found, by ``(namespace, name)``.

    Attributes:
        secrets: Secrets that exist.
        config_maps: ConfigMaps that exist.
        claims: PersistentVolumeClaims that exist, as the API returned them.
        late_binding_classes: StorageClasses with ``volumeBindingMode: WaitForFirstConsumer``;
            their claims bind only once the pod has a node, so unbound is fine.
    """

    secrets: frozenset[NamespacedName] = frozenset()
    config_maps: frozenset[NamespacedName] = frozenset()
    claims: Mapping[NamespacedName, Mapping[str, object]] = field(default_factory=dict)
    late_binding_classes: frozenset[str] = frozenset()


def references(pod: Pod) -> References:
    """The non-optional Secrets, ConfigMaps and claims ``pod`` needs, each once, in spec order.

    Covers ``secret``, ``configMap``, ``projected``, ``persistentVolumeClaim`` and generic
    ``ephemeral`` volumes (whose claim is named ``<pod>-<volume>``), and ``env``/``envFrom`` of
    containers and init containers. ``imagePullSecrets`` are left out: a missing one only makes
    the pull anonymous. Keys missing from an existing Secret are not checked (that would mean
    caching Secret data).
    """
    secrets: dict[str, None] = {}
    config_maps: dict[str, None] = {}
    claims: dict[str, None] = {}
    spec = get_mapping(pod, "spec")
    pod_name = get_text(get_mapping(pod, "metadata"), "name")
    for volume in get_list(spec, "volumes"):
        _add(secrets, get_mapping(volume, "secret"), "secretName")
        _add(config_maps, get_mapping(volume, "configMap"), "name")
        for source in get_list(get_mapping(volume, "projected"), "sources"):
            _add(secrets, get_mapping(source, "secret"), "name")
            _add(config_maps, get_mapping(source, "configMap"), "name")
        claim = get_text(get_mapping(volume, "persistentVolumeClaim"), "claimName")
        if claim:
            claims[claim] = None
        if isinstance(volume, Mapping) and "ephemeral" in volume:
            claims[f"{pod_name}-{get_text(volume, 'name')}"] = None
    for container in _containers(spec):
        for env in get_list(container, "env"):
            value_from = get_mapping(env, "valueFrom")
            _add(secrets, get_mapping(value_from, "secretKeyRef"), "name")
            _add(config_maps, get_mapping(value_from, "configMapKeyRef"), "name")
        for env_from in get_list(container, "envFrom"):
            _add(secrets, get_mapping(env_from, "secretRef"), "name")
            _add(config_maps, get_mapping(env_from, "configMapRef"), "name")
    return References(tuple(secrets), tuple(config_maps), tuple(claims))


#: Pods below this priority never cause a scale-up (cluster-autoscaler's default
#: ``--expendable-pods-priority-cutoff``).
PRIORITY_CUTOFF = -10


def blocked(pod: Pod, lookup: Lookup) -> Blocked | None:
    """What keeps ``pod`` from deserving a node, or ``None``: a priority below
    :data:`PRIORITY_CUTOFF`, else the first reference that keeps it from starting anywhere.

    Claims come first (the scheduler itself stops on them), then Secrets, then ConfigMaps.
    """
    priority = get_mapping(pod, "spec").get("priority")
    if isinstance(priority, int) and priority < PRIORITY_CUTOFF:
        return Blocked(
            Blocker.BELOW_PRIORITY_CUTOFF, f"priority {priority} < cutoff {PRIORITY_CUTOFF}"
        )
    namespace = get_text(get_mapping(pod, "metadata"), "namespace")
    refs = references(pod)
    for name in refs.claims:
        problem = _claim_problem(name, lookup.claims.get((namespace, name)), lookup)
        if problem is not None:
            return problem
    for name in refs.secrets:
        if (namespace, name) not in lookup.secrets:
            return Blocked(Blocker.MISSING_SECRET, f'secret "{name}" not found')
    for name in refs.config_maps:
        if (namespace, name) not in lookup.config_maps:
            return Blocked(Blocker.MISSING_CONFIG_MAP, f'configmap "{name}" not found')
    return None


def _claim_problem(name: str, claim: Mapping[str, object] | None, lookup: Lookup) -> Blocked | None:
    what = f'persistentvolumeclaim "{name}"'
    if claim is None:
        return Blocked(Blocker.MISSING_PVC, f"{what} not found")
    if get_mapping(claim, "metadata").get("deletionTimestamp"):
        return Blocked(Blocker.MISSING_PVC, f"{what} is being deleted")
    phase = get_text(get_mapping(claim, "status"), "phase")
    if phase == "Bound":
        return None
    if phase == "Lost":
        return Blocked(Blocker.UNBOUND_PVC, f"{what} lost its volume")
    storage_class = get_text(get_mapping(claim, "spec"), "storageClassName")
    if storage_class and storage_class in lookup.late_binding_classes:
        return None  # WaitForFirstConsumer: the claim binds once the pod has a node
    # As the scheduler does, a class that does not exist means immediate binding.
    how = f'storage class "{storage_class}"' if storage_class else "no storage class"
    return Blocked(Blocker.UNBOUND_PVC, f"{what} is not bound ({how}, immediate binding)")


def _add(names: dict[str, None], ref: Mapping[str, object], key: str) -> None:
    name = get_text(ref, key)
    if name and ref.get("optional") is not True:
        names[name] = None


def _containers(spec: Mapping[str, object]) -> Iterator[object]:
    yield from get_list(spec, "initContainers")
    yield from get_list(spec, "containers")
