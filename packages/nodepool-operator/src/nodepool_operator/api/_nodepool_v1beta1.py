"""NodePool ``v1beta1``: the same pool as ``v1alpha1``, its spec restructured.

What ``v1alpha1`` got wrong, and how ``v1beta1`` says it instead (docs/versions.md has the
whole rationale and the field map):

* The three sizing fields sat flat beside the node's shape (``targetNodes``, ``minNodes``,
  ``maxNodes``, their ``Nodes`` suffix repeated): ``v1beta1`` groups them as
  ``spec.size.{target,min,max}``, the scale subresource's replicas at ``.spec.size.target``.
* What each node is like (instance type, capacity, labels, taints, node class) was mixed
  with how many there are: ``v1beta1`` puts it in ``spec.template`` as Karpenter's NodePool
  does, labels under ``template.metadata`` as on the Node, the rest under
  ``template.spec``, the capacity overrides grouped as ``template.spec.capacity``.
* ``status`` was right; it is the same type in both versions.

The controllers read ``v1alpha1``, the storage version (:mod:`nodepool_operator.api._conversion`
converts at the apiserver's boundary); this module is the served shape only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from kubeloop.crd import (
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinLength,
    ObjectMeta,
    Pattern,
    Quantity,
    less_or_equal,
    not_negative,
    rules,
)
from nodepool_operator.api._nodeclass import NodeClassRef
from nodepool_operator.api._nodepool import (
    _LABEL_VALUE,
    _NO_RESERVED_LABELS,
    _VALID_LABEL_KEYS,
    MAX_POOL_NODES,
    CapacityType,
    Disruption,
    InstanceTypes,
    NodePoolStatus,
    Taint,
)

_NOT_NEGATIVE = not_negative()


@rules(less_or_equal("min", "max"), less_or_equal("target", "max"))
@dataclass(frozen=True, kw_only=True)
class NodePoolSize:
    """How many nodes the pool has, and within which bounds the Autoscaler moves it."""

    target: Annotated[int, Minimum(0), Maximum(MAX_POOL_NODES)] = 0
    """How many nodes the pool should have. The Autoscaler raises it when pods are pending;
    `kubectl scale nodepool/NAME --replicas=N` sets it. At most max."""
    zone_targets: dict[str, Annotated[int, Minimum(0)]] = field(default_factory=dict)
    """The fewest of the pool's nodes wanted in each zone (zone name -> count), for the
    zones the Autoscaler's plan needs specifically; written with target, in one write."""
    min: Annotated[int, Minimum(0), Maximum(MAX_POOL_NODES)] = 0
    """The fewest nodes the Autoscaler may scale the pool down to."""
    max: Annotated[int, Minimum(1), Maximum(MAX_POOL_NODES)] = 10
    """The most nodes the pool may have; target and the Autoscaler stay within it."""


@dataclass(frozen=True, kw_only=True)
class NodeCapacity:
    """Each node's capacity where it differs from the instance type's."""

    cpu: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """CPU capacity of each node as a quantity (4, 3500m); defaults to the instance type's."""
    memory: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """Memory capacity of each node as a quantity (96Gi); defaults to the instance type's."""
    disk: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """Root disk size of each VM as a quantity (100Gi); defaults to the instance type's."""


@dataclass(frozen=True, kw_only=True)
class NodeTemplateMetadata:
    """The metadata every node of the pool registers with."""

    labels: Annotated[
        dict[str, Annotated[str, MaxLength(63), Pattern(_LABEL_VALUE)]],
        MaxProperties(64),
        _VALID_LABEL_KEYS,
        _NO_RESERVED_LABELS,
    ] = field(default_factory=dict)
    """Labels every node of the pool is registered with. Keys under kubeloop.dev/ are
    reserved for the operator."""


@dataclass(frozen=True, kw_only=True)
class NodeTemplateSpec:
    """What every node of the pool is: its VM's type and class, its capacity and taints."""

    instance_type: Annotated[str, MinLength(1), MaxLength(63)]
    """The cloud instance type of the pool's VMs, e.g. m5.large: the node the Autoscaler
    plans with."""
    instance_types: InstanceTypes = field(default_factory=list)
    """More instance types a VM may be launched as, in order of preference: each VM is the
    cheapest of instanceType and these that the cloud has capacity for and that holds at
    least what instanceType does (CPU, memory, pods, GPUs, same architecture); one the
    cloud just refused for capacity is skipped for 3 minutes. Empty: instanceType only."""
    capacity_type: CapacityType = "on-demand"
    """How the VMs are bought: on-demand, or spot (cheaper, and EC2 may take them back with
    two minutes' notice). A spot create the cloud has no spot capacity for is launched
    on-demand instead, with an Event; each Node says which it got in its
    node.kubeloop.dev/capacity-type label."""
    capacity: NodeCapacity | None = None
    """Overrides of the instance type's capacity; the instance type's when omitted."""
    taints: Annotated[list[Taint], MaxItems(32)] = field(default_factory=list)
    """Taints every node of the pool is registered with."""
    node_class_ref: NodeClassRef | None = None
    """The AwsNodeClass the pool's VMs boot with (AMI, subnets, security groups, instance
    profile, user data, tags). Omitted: the cloud's defaults and the operator's node image."""


@dataclass(frozen=True, kw_only=True)
class NodeTemplate:
    """The node every VM of the pool registers as (Karpenter's NodePool template)."""

    metadata: NodeTemplateMetadata = field(default_factory=NodeTemplateMetadata)
    """Labels of every node."""
    spec: NodeTemplateSpec
    """Instance type, capacity, taints and node class of every node."""


@dataclass(frozen=True, kw_only=True)
class NodePoolSpecV1beta1:
    """The desired state of a NodePool: how many nodes (size), and what each is (template)."""

    size: NodePoolSize = field(default_factory=NodePoolSize)
    """How many nodes, and the Autoscaler's bounds."""
    template: NodeTemplate
    """What every node of the pool is."""
    reserve_new_nodes: bool = False
    """Deprecated: the Autoscaler holds its plan without it, by nominating each planned pod
    to its new node (status.nominatedNodeName). New nodes register reserved for the pods an
    Autoscaler planned onto each (taint autoscaling.kubeloop.dev/reserved=NODE:NoSchedule,
    lifted once they are bound; a toleration patched onto those pods, which needs patch on
    pods). Needs an Autoscaler for the pool."""
    disruption: Disruption = field(default_factory=Disruption)
    """How the pool's nodes may be disrupted: which pods block a scale-down."""


@dataclass(frozen=True, kw_only=True)
class NodePoolV1beta1:
    """NodePool is a set of identical VMs, each registered as a worker node. Scale it with
    spec.size.target, by hand or with an Autoscaler."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: NodePoolSpecV1beta1
    """The desired state of the pool."""
    status: NodePoolStatus = field(default_factory=NodePoolStatus)
    """The observed state of the pool, written by the NodePool controller."""
