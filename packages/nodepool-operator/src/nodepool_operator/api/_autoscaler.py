"""Autoscaler: watches namespaces for pods pending for want of capacity, and raises the
referenced NodePool's ``spec.targetNodes``. It never creates VMs itself (the seeds' design):
the NodePool controller does, so each controller owns one kind of write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, Final

from kubeloop.crd import (
    Condition,
    ListMapKey,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    Minimum,
    MinItems,
    MinLength,
    ObjectMeta,
    Pattern,
    min_duration,
    parse,
)
from nodepool_operator.api._nodepool import MAX_POOL_NODES

#: The most unremovable nodes ``status.unremovableNodes`` lists (the first by name).
MAX_UNREMOVABLE_NODES: Final = 64
#: The highest ``spec.weight``: Karpenter's NodePool weight range.
MAX_WEIGHT: Final = 100
#: The shortest allowed frequency: a tighter loop only adds apiserver and cloud load.
MIN_FREQUENCY: Final = timedelta(seconds=1)

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_AT_LEAST_MIN_FREQUENCY = min_duration(MIN_FREQUENCY)


@dataclass(frozen=True, kw_only=True)
class NodePoolRef:
    """A reference to a NodePool (cluster-scoped, so by name only)."""

    name: Annotated[str, MinLength(1), MaxLength(253)]
    """The NodePool's name."""


@dataclass(frozen=True, kw_only=True)
class AutoscalerSpec:
    """AutoscalerSpec says which pods to watch and which NodePool to grow for them."""

    node_pool_ref: NodePoolRef
    """The NodePool whose targetNodes this Autoscaler adjusts."""
    namespaces: Annotated[
        list[Annotated[str, MinLength(1), MaxLength(63), Pattern(_DNS_LABEL)]],
        MinItems(1),
        MaxItems(64),
        ListSet(),
    ]
    """The namespaces whose pending pods count, e.g. prod."""
    frequency: Annotated[timedelta, _AT_LEAST_MIN_FREQUENCY] = timedelta(minutes=5)
    """How often to look for unschedulable pods, as a duration such as 30s or 5m."""
    max_nodes: Annotated[int, Minimum(1), Maximum(MAX_POOL_NODES)] | None = None
    """The most nodes this Autoscaler will ask for; the pool's own maxNodes applies too."""
    weight: Annotated[int, Minimum(0), Maximum(MAX_WEIGHT)] = 0
    """When several Autoscalers watch a pending pod's namespace and each pool's node would fit
    it, the one with the highest weight scales for it; at equal weight, the one whose new
    node leaves the least CPU and memory unused; then the first by name."""
    scale_down_enabled: bool = False
    """Whether to lower targetNodes when nodes are unneeded; off by default."""
    scale_down_unneeded_time: timedelta = timedelta(minutes=10)
    """How long a node must be unneeded before it is scaled down, as a duration."""
    scale_down_consolidation: bool = True
    """With scale-down enabled, whether nodes are also unneeded when the pool holds its pods
    on more nodes than they need and draining them moves every pod onto the nodes that stay
    (consolidation), not only when they are nearly empty; on by default."""


@dataclass(frozen=True, kw_only=True)
class UnremovableNode:
    """A node of the pool that scale-down may not remove, and why (cluster-autoscaler's
    unremovable-node reasons)."""

    node: Annotated[str, MinLength(1), MaxLength(253)]
    """The Node's name."""
    reason: Annotated[str, MinLength(1), MaxLength(63)]
    """NodeDoNotDisrupt, DoNotDisruptAnnotation, NotSafeToEvictAnnotation, NotReplicated,
    LocalStorageRequested or UnmovableKubeSystemPod."""
    pod: Annotated[str, MaxLength(317)] | None = None
    """The blocking pod as namespace/name; omitted when the Node itself is annotated."""
    message: Annotated[str, MaxLength(1024)] | None = None
    """What blocks it, in words."""


@dataclass(frozen=True, kw_only=True)
class AutoscalerStatus:
    """AutoscalerStatus is what the Autoscaler saw and did last."""

    pending_pods: Annotated[int, Minimum(0)] = 0
    """Pods pending in the watched namespaces at the last look, for any reason."""
    unschedulable_pods: Annotated[int, Minimum(0)] = 0
    """Of those, the pods the scheduler could not place for lack of CPU or memory."""
    last_scale_time: datetime | None = None
    """When this Autoscaler last changed the pool's targetNodes."""
    last_decision: Annotated[str, MaxLength(1024)] | None = None
    """A short account of the last decision, e.g. scale up 2 -> 3: 1 pod needs 28Gi."""
    observed_generation: Annotated[int, Minimum(0)] = 0
    """The metadata.generation this status describes."""
    conditions: Annotated[list[Condition], ListMapKey("type"), MaxItems(16)] = field(
        default_factory=list
    )
    """The Autoscaler's conditions. Ready: the referenced pool exists and the last look
    succeeded (reason InvalidSpec or NodePoolNotFound otherwise)."""
    unremovable_nodes: Annotated[
        list[UnremovableNode], ListMapKey("node"), MaxItems(MAX_UNREMOVABLE_NODES)
    ] = field(default_factory=list)
    """With scale-down enabled: the pool's nodes that a pod (or the node's own annotation)
    keeps from scale-down, by name, with the pod and the reason. Each also gets a
    ScaleDownBlocked Event."""


@dataclass(frozen=True, kw_only=True)
class Autoscaler:
    """Autoscaler grows a NodePool when pods in the given namespaces are unschedulable for
    want of CPU or memory, and optionally shrinks it when nodes are unneeded."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: AutoscalerSpec
    """What to watch and which pool to scale."""
    status: AutoscalerStatus = field(default_factory=AutoscalerStatus)
    """What the Autoscaler last observed and decided."""


def parse_autoscaler_status(raw: Mapping[str, Any]) -> AutoscalerStatus:
    """An Autoscaler's ``status`` alone (readable even when its spec is not).

    Raises:
        InvalidField: the status breaks the schema; its ``path`` names the field.
    """
    return parse(AutoscalerStatus, raw, "status")


def parse_autoscaler(obj: Mapping[str, Any]) -> Autoscaler:
    """An Autoscaler from its API object, defaults filled in.

    Raises:
        InvalidField: the object breaks the schema; its ``path`` names the field.
    """
    return parse(Autoscaler, obj)
