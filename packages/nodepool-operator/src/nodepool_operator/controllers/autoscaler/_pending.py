"""Unschedulable pods that a new node would not help: they wait on an object, not on room.

kube-scheduler reports ``PodScheduled=False, reason=Unschedulable`` for any failing filter, and
it checks Secrets and ConfigMaps not at all. A pod whose non-optional Secret or ConfigMap is
missing would not start on a new node either (the kubelet fails it with
``CreateContainerConfigError`` or ``FailedMount``), and a claim that is missing, lost or unbound
with immediate binding blocks the scheduler itself. cluster-autoscaler scales for such pods anyway
(kubernetes/autoscaler#923, #5801); we set them aside with a reason instead.

Pure: :func:`~._decode.pod_needs` reads what a pod needs, the controller looks those objects up
(see :mod:`._references`) and :func:`blocked` decides from what it found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from nodepool_operator.scheduling import NodeSelectorTerm

__all__ = [
    "PRIORITY_CUTOFF",
    "Blocked",
    "Blocker",
    "Claim",
    "Lookup",
    "NamespacedName",
    "Needs",
    "References",
    "blocked",
]

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
class Needs:
    """What a pending pod needs besides room: its priority, the objects it references."""

    namespace: str
    priority: int | None = None
    references: References = field(default_factory=References)


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim as far as a pod waiting on it is concerned."""

    deleting: bool = False
    phase: str = ""
    storage_class: str = ""
    volume: str = ""
    """``spec.volumeName``: the PersistentVolume it is bound to (``""``: none yet)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the controller found, by ``(namespace, name)``.

    Attributes:
        secrets: Secrets that exist.
        config_maps: ConfigMaps that exist.
        claims: PersistentVolumeClaims that exist.
        late_binding_classes: StorageClasses with ``volumeBindingMode: WaitForFirstConsumer``;
            their claims bind only once the pod has a node, so unbound is fine.
        volume_zones: the zonal node affinity of the bound claims' PersistentVolumes, by
            volume name (only those that pin a zone): a pod on such a volume needs a node in
            one of its zones.
    """

    secrets: frozenset[NamespacedName] = frozenset()
    config_maps: frozenset[NamespacedName] = frozenset()
    claims: Mapping[NamespacedName, Claim] = field(default_factory=dict)
    late_binding_classes: frozenset[str] = frozenset()
    volume_zones: Mapping[str, tuple[NodeSelectorTerm, ...]] = field(default_factory=dict)

    def zones_of(self, needs: Needs) -> list[tuple[NodeSelectorTerm, ...]]:
        """The zonal terms of the volumes bound to the claims ``needs`` names."""
        found = (self.claims.get((needs.namespace, name)) for name in needs.references.claims)
        volumes = (c.volume for c in found if c is not None and c.volume)
        return [terms for v in volumes if (terms := self.volume_zones.get(v))]


#: Pods below this priority never cause a scale-up (cluster-autoscaler's default
#: ``--expendable-pods-priority-cutoff``).
PRIORITY_CUTOFF = -10


def blocked(needs: Needs, lookup: Lookup) -> Blocked | None:
    """What keeps a pod that ``needs`` this from deserving a node, or ``None``: a priority
    below :data:`PRIORITY_CUTOFF`, else the first reference that keeps it from starting
    anywhere.

    Claims come first (the scheduler itself stops on them), then Secrets, then ConfigMaps.
    """
    priority = needs.priority
    if priority is not None and priority < PRIORITY_CUTOFF:
        return Blocked(
            Blocker.BELOW_PRIORITY_CUTOFF, f"priority {priority} < cutoff {PRIORITY_CUTOFF}"
        )
    namespace, refs = needs.namespace, needs.references
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


def _claim_problem(name: str, claim: Claim | None, lookup: Lookup) -> Blocked | None:
    what = f'persistentvolumeclaim "{name}"'
    if claim is None:
        return Blocked(Blocker.MISSING_PVC, f"{what} not found")
    if claim.deleting:
        return Blocked(Blocker.MISSING_PVC, f"{what} is being deleted")
    if claim.phase == "Bound":
        return None
    if claim.phase == "Lost":
        return Blocked(Blocker.UNBOUND_PVC, f"{what} lost its volume")
    storage_class = claim.storage_class
    if storage_class and storage_class in lookup.late_binding_classes:
        return None  # WaitForFirstConsumer: the claim binds once the pod has a node
    # As the scheduler does, a class that does not exist means immediate binding.
    how = f'storage class "{storage_class}"' if storage_class else "no storage class"
    return Blocked(Blocker.UNBOUND_PVC, f"{what} is not bound ({how}, immediate binding)")
