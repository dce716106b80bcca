"""Autoscaler ``v1beta1``: the same Autoscaler as ``v1alpha1``, its scale-down settings grouped.

What ``v1alpha1`` got wrong: the two scale-down fields sat flat beside the scale-up ones,
each repeating the ``scaleDown`` prefix (``scaleDownEnabled``, ``scaleDownUnneededTime``).
``v1beta1`` groups them as ``spec.scaleDown.{enabled,unneededTime}``, where later scale-down
settings have their place. ``status`` was right and is the same type.

The controllers read ``v1alpha1``, the storage version; this module is the served shape only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated

from kubeloop.crd import (
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
)
from nodepool_operator.api._autoscaler import (
    _DNS_LABEL,
    MAX_WEIGHT,
    MIN_FREQUENCY,
    AutoscalerStatus,
    NodePoolRef,
)
from nodepool_operator.api._nodepool import MAX_POOL_NODES

_AT_LEAST_MIN_FREQUENCY = min_duration(MIN_FREQUENCY)


@dataclass(frozen=True, kw_only=True)
class ScaleDown:
    """Whether and when the Autoscaler lowers the pool's target."""

    enabled: bool = False
    """Whether to lower the pool's target when nodes are unneeded; off by default."""
    unneeded_time: timedelta = timedelta(minutes=10)
    """How long a node must be unneeded before it is scaled down, as a duration."""
    consolidation: bool = True
    """Whether nodes are also unneeded when the pool holds its pods on more nodes than they
    need and draining them moves every pod onto the nodes that stay (consolidation), not
    only when they are nearly empty; on by default."""


# The fields shared with v1alpha1 are written again: a served version's schema is its own
# (kubectl explain reads each field's text from the class that declares it).
@dataclass(frozen=True, kw_only=True)
class AutoscalerSpecV1beta1:
    """Which pods to watch, which NodePool to grow for them, and when to shrink it."""

    node_pool_ref: NodePoolRef
    """The NodePool whose target this Autoscaler adjusts."""
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
    """The most nodes this Autoscaler will ask for; the pool's own maximum applies too."""
    weight: Annotated[int, Minimum(0), Maximum(MAX_WEIGHT)] = 0
    """When several Autoscalers watch a pending pod's namespace and each pool's node would fit
    it, the one with the highest weight scales for it; at equal weight, the one whose new
    node leaves the least CPU and memory unused; then the first by name."""
    scale_down: ScaleDown = field(default_factory=ScaleDown)
    """Scale-down: off unless enabled."""


@dataclass(frozen=True, kw_only=True)
class AutoscalerV1beta1:
    """Autoscaler grows a NodePool when pods in the given namespaces are unschedulable for
    want of CPU or memory, and optionally shrinks it when nodes are unneeded."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: AutoscalerSpecV1beta1
    """What to watch and which pool to scale."""
    status: AutoscalerStatus = field(default_factory=AutoscalerStatus)
    """What the Autoscaler last observed and decided."""
