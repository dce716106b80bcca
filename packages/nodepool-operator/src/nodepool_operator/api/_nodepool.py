"""NodePool: identical VMs registered as worker nodes, as many as ``spec.targetNodes``.

Field ownership follows the seeds: users and the Autoscaler write ``spec`` (the Autoscaler
only ``targetNodes``, through the scale subresource or a patch); the NodePool controller
alone writes ``status``, through the status subresource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, Final, Literal

from kubeloop.crd import (
    Condition,
    ListMapKey,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinLength,
    Name,
    ObjectMeta,
    Pattern,
    Quantity,
    keys_match,
    less_or_equal,
    min_duration,
    none_of,
    not_negative,
    parse,
    reserved_keys,
    rules,
)
from nodepool_operator.api._nodeclass import NodeClassRef

#: The most nodes one pool may ask for; a bound, so that a typo such as 1000000 is refused.
MAX_POOL_NODES: Final = 1000
#: Node label keys under this prefix belong to the operator (pool membership).
RESERVED_LABEL_PREFIX: Final = "kubeloop.dev/"

# Condition types of a NodePool.
READY: Final = "Ready"
SCALING: Final = "Scaling"
DEGRADED: Final = "Degraded"
#: A pool being deleted: its nodes drain (True), or the grace period ran out (reason says).
DELETING_CONDITION: Final = "Deleting"

#: The shortest drain timeout: below it a drain can hardly start before it is given up.
MIN_DRAIN_TIMEOUT: Final = timedelta(seconds=1)

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
#: Why a node is disrupted voluntarily, as Karpenter's budget reasons: an empty node, one
#: whose pods fit elsewhere, one whose settings no longer match its pool.
DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]
#: A budget's nodes: a count (3) or a percentage of the pool's nodes (10%).
BUDGET_NODES_PATTERN: Final = r"^((100|[0-9]{1,2})%|[0-9]+)$"
ScaleOperation = Literal["inactive", "active"]
#: How a pool's VMs are bought (both API versions): EC2's on-demand or spot market.
CapacityType = Literal["on-demand", "spot"]

_QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_AT_LEAST_MIN_DRAIN_TIMEOUT = min_duration(MIN_DRAIN_TIMEOUT)
_NOT_NEGATIVE = not_negative()
_VALID_LABEL_KEYS = keys_match(
    _QUALIFIED_NAME,
    max_length=317,
    message="label keys must be qualified names such as example.com/team",
)
_NO_RESERVED_LABELS = reserved_keys(
    prefixes=[RESERVED_LABEL_PREFIX],
    message=f"label keys under {RESERVED_LABEL_PREFIX} are reserved for the operator",
)


@dataclass(frozen=True, kw_only=True)
class Taint:
    """A taint that every node of the pool is registered with."""

    key: Annotated[str, MinLength(1), MaxLength(317), Pattern(_QUALIFIED_NAME)]
    """The taint key, a qualified name such as dedicated or example.com/gpu."""
    value: Annotated[str, MaxLength(63), Pattern(_LABEL_VALUE)] | None = None
    """The taint value; empty when omitted."""
    effect: TaintEffect
    """What the taint does to pods that do not tolerate it: NoSchedule, PreferNoSchedule or
    NoExecute."""


@dataclass(frozen=True, kw_only=True)
class DisruptionBlockers:
    """Which of cluster-autoscaler's default blockers keep a node of the pool from a
    voluntary removal (scale-down). A pod annotated
    cluster-autoscaler.kubernetes.io/safe-to-evict: "true" is never a default blocker. The
    explicit holds (kubeloop.dev/do-not-disrupt or karpenter.sh/do-not-disrupt "true" on a pod
    or node, safe-to-evict "false" on a pod) always apply and cannot be switched off here."""

    pods_without_controller: bool = True
    """A pod with no controlling owner (no ownerReference with controller: true) keeps its
    node: evicted, nothing would recreate it. DaemonSet and static pods never block."""
    pods_with_local_storage: bool = True
    """A pod with an emptyDir volume not backed by memory, or a hostPath volume, keeps its
    node: its data would be lost (cluster-autoscaler's skip-nodes-with-local-storage)."""
    kube_system_pods_without_pdb: Annotated[bool, Name("kubeSystemPodsWithoutPDB")] = True
    """A kube-system pod that no PodDisruptionBudget covers keeps its node
    (cluster-autoscaler's skip-nodes-with-system-pods)."""


@rules(
    none_of(
        "schedule",
        "duration",
        message="schedule and duration (budget windows) are not supported yet: omit them, "
        "the budget then applies at all times",
    )
)
@dataclass(frozen=True, kw_only=True)
class Budget:
    """At most how many of the pool's nodes may be disrupted voluntarily at once
    (Karpenter's NodePool disruption budget). The tightest budget that applies wins."""

    nodes: Annotated[str, Pattern(BUDGET_NODES_PATTERN)] = "10%"
    """A count (3) or a percentage of the pool's nodes (10%, rounded up, as Karpenter
    does); 0 blocks voluntary disruptions. Nodes tainted for removal or being deleted
    count against it."""
    reasons: Annotated[list[DisruptionReason], MaxItems(3), ListSet()] = field(default_factory=list)
    """The reasons the budget applies to (Underutilized, Empty, Drifted); all when
    omitted."""
    schedule: Annotated[str, MaxLength(128)] | None = None
    """Not supported yet (Karpenter's cron window); refused at admission."""
    duration: timedelta | None = None
    """Not supported yet (how long the schedule's window lasts); refused at admission."""


def _default_budgets() -> list[Budget]:
    return [Budget()]


@dataclass(frozen=True, kw_only=True)
class DisruptionStatus:
    """How many of the pool's nodes are being disrupted and how many more may start."""

    disrupting: Annotated[int, Minimum(0)] = 0
    """Nodes tainted kubeloop.dev/disrupting or being deleted, as read from the cluster."""
    allowed: Annotated[int, Minimum(0)] = 0
    """How many more voluntary disruptions spec.disruption.budgets allows now, for any
    reason."""


@dataclass(frozen=True, kw_only=True)
class DisruptionRepair:
    """When an unhealthy node is replaced (Karpenter's node repair), and when it is not: a
    node whose Ready condition is False or Unknown (or that carries one of
    ``unhealthyConditions`` with status True) for longer than ``toleration`` is drained and
    replaced, one at a time, unless more than ``maxUnhealthyPercent`` of the pool's nodes
    are unhealthy: then none is (a zone's network impairment must not replace a zone)."""

    toleration: timedelta | None = None
    """How long a node may be unhealthy before it is replaced, as a duration such as 30m;
    when omitted, the operator's --node-repair-seconds (30m unless set)."""
    max_unhealthy_percent: Annotated[int, Minimum(0), Maximum(100)] = 20
    """No node is replaced while more than this percentage of the pool's nodes is
    unhealthy (Karpenter's 20 %); the pool's RepairBlocked condition names them."""
    unhealthy_conditions: Annotated[list[Annotated[str, MaxLength(316)]], MaxItems(16)] = field(
        default_factory=list
    )
    """Node condition types that mark a node unhealthy when True, besides Ready not True
    (the node problem detector's, e.g. KernelDeadlock, ReadonlyFilesystem)."""


@dataclass(frozen=True, kw_only=True)
class Disruption:
    """How the pool's nodes may be disrupted."""

    blockers: DisruptionBlockers = field(default_factory=DisruptionBlockers)
    """Which default blockers apply to scale-down; all on when omitted."""
    termination_grace_period: timedelta = timedelta(hours=1)
    """How long deleting the pool waits for its nodes to drain (evictions honouring
    PodDisruptionBudgets, pods annotated do-not-disrupt held), from the pool's deletion, as
    a duration such as 30m (Karpenter's terminationGracePeriod). Then the nodes and VMs go
    anyway with the pods left on them (the pod garbage collector deletes those), with a
    TerminationGracePeriodExpired Event and condition. 0s: no drain."""
    drain_timeout: Annotated[timedelta, _AT_LEAST_MIN_DRAIN_TIMEOUT] = timedelta(minutes=10)
    """How long a scale-down drains a node, from its taint, before giving up (as
    cluster-autoscaler's max-graceful-termination-sec, 10m): the node is untainted and kept,
    with a DrainTimedOut Event, and another candidate is tried. A
    repair's drain of an unhealthy node stops waiting after it too, and the node goes."""
    repair: DisruptionRepair = field(default_factory=DisruptionRepair)
    """When unhealthy nodes are replaced, and how many may be unhealthy before none is."""
    expire_after: Annotated[timedelta, _AT_LEAST_MIN_DRAIN_TIMEOUT] | None = None
    """How old a node may get, from its VM's launch, as a duration such as 720h
    (Karpenter's expireAfter); omitted: never. An older node is replaced replacement first:
    a new node is launched and only once it is Ready is the old one drained and removed,
    within the budgets that apply to the Drifted reason (unlike Karpenter, expiry does not
    bypass them). The pool's Expiring condition names the nodes."""
    budgets: Annotated[list[Budget], MaxItems(50)] = field(default_factory=_default_budgets)
    """At most how many nodes voluntary disruptions (scale-down) take at once; one budget
    of 10% when omitted, none (unbounded) when set to []. Pool deletion, a deleted Node and
    a vanished VM are not budgeted (as in Karpenter)."""


#: A pool's fallback instance types (both API versions).
InstanceTypes = Annotated[
    list[Annotated[str, MinLength(1), MaxLength(63)]], MaxItems(20), ListSet()
]


@rules(less_or_equal("minNodes", "maxNodes"), less_or_equal("targetNodes", "maxNodes"))
@dataclass(frozen=True, kw_only=True)
class NodePoolSpec:
    """NodePoolSpec is the desired state of a NodePool: how many nodes, and of what kind."""

    target_nodes: Annotated[int, Minimum(0), Maximum(MAX_POOL_NODES)] = 0
    """How many nodes the pool should have. The Autoscaler raises it when pods are pending;
    `kubectl scale nodepool/NAME --replicas=N` sets it. At most maxNodes."""
    zone_targets: dict[str, Annotated[int, Minimum(0)]] = field(default_factory=dict)
    """The fewest of the pool's nodes wanted in each zone (zone name -> count), for the
    zones the Autoscaler's plan needs specifically (a zone topology spread, a required zone
    affinity, a volume's zone). Written with targetNodes, in the same write; a new node
    goes first to a zone below its count, else to the zone with the fewest nodes."""
    min_nodes: Annotated[int, Minimum(0), Maximum(MAX_POOL_NODES)] = 0
    """The fewest nodes the Autoscaler may scale the pool down to."""
    max_nodes: Annotated[int, Minimum(1), Maximum(MAX_POOL_NODES)] = 10
    """The most nodes the pool may have; targetNodes and the Autoscaler stay within it."""
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
    cpu: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """CPU capacity of each node as a quantity (4, 3500m); defaults to the instance type's."""
    memory: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """Memory capacity of each node as a quantity (96Gi); defaults to the instance type's."""
    disk_size: Annotated[str, Quantity(), _NOT_NEGATIVE] | None = None
    """Root disk size of each VM as a quantity (100Gi); defaults to the instance type's."""
    labels: Annotated[
        dict[str, Annotated[str, MaxLength(63), Pattern(_LABEL_VALUE)]],
        MaxProperties(64),
        _VALID_LABEL_KEYS,
        _NO_RESERVED_LABELS,
    ] = field(default_factory=dict)
    """Labels every node of the pool is registered with. Keys under kubeloop.dev/ are
    reserved for the operator."""
    taints: Annotated[list[Taint], MaxItems(32)] = field(default_factory=list)
    """Taints every node of the pool is registered with."""
    reserve_new_nodes: bool = False
    """Deprecated: the Autoscaler holds its plan without it, by nominating each planned pod
    to its new node (status.nominatedNodeName). New nodes register reserved (taint
    autoscaling.kubeloop.dev/reserved=NODE:NoSchedule) for the pods an Autoscaler planned
    onto each: it adds a matching toleration to those pods (patch on pods, which the default
    role does not grant) and lifts the taint once they are bound. Needs an Autoscaler."""
    node_class_ref: NodeClassRef | None = None
    """The AwsNodeClass the pool's VMs boot with (AMI, subnets, security groups, instance
    profile, user data, tags). Omitted: the cloud's defaults and the operator's node image
    (enough for the simulated cloud, not for EC2)."""
    disruption: Disruption = field(default_factory=Disruption)
    """How the pool's nodes may be disrupted: which pods block a scale-down."""


@dataclass(frozen=True, kw_only=True)
class InstanceRecord:
    """One VM the pool intends to have, recorded before the cloud is asked for it, so that a
    crash between the cloud call and the status write never loses or duplicates a VM."""

    name: Annotated[str, MinLength(1), MaxLength(253)]
    """The VM's deterministic name, e.g. POOL-INDEX; also its idempotency key."""
    instance_id: Annotated[str, MaxLength(256)] | None = None
    """The cloud's id for the VM, once the cloud has returned one."""
    state: Annotated[str, MinLength(1), MaxLength(63)]
    """Where the VM is in its life: creating (intent recorded, no id yet), then the cloud's
    state (pending, running, stopped, terminated), or deleting."""
    node_name: Annotated[str, MaxLength(253)] | None = None
    """The Node the VM registered as, once it has."""
    zone: Annotated[str, MaxLength(63)] | None = None
    """The zone chosen for the VM before it is created (so a retry asks for the same one)."""
    subnet: Annotated[str, MaxLength(64)] | None = None
    """The subnet chosen for the VM in its zone, when the pool launches into subnets."""


@dataclass(frozen=True, kw_only=True)
class NodePoolStatus:
    """NodePoolStatus is what the NodePool controller last observed."""

    current_nodes: Annotated[int, Minimum(0)] = 0
    """How many VMs the pool has now (the scale subresource's status.replicas)."""
    ready_nodes: Annotated[int, Minimum(0)] = 0
    """How many of them are registered as Ready nodes."""
    scale_operation: ScaleOperation = "inactive"
    """active while the controller is creating or deleting VMs to reach targetNodes, else
    inactive."""
    observed_generation: Annotated[int, Minimum(0)] = 0
    """The metadata.generation this status describes; older than metadata.generation means
    the controller has not yet acted on the latest spec."""
    selector: Annotated[str, MaxLength(1024)] | None = None
    """The label selector of the pool's nodes, in string form, for the scale subresource."""
    conditions: Annotated[list[Condition], ListMapKey("type"), MaxItems(16)] = field(
        default_factory=list
    )
    """The pool's conditions. Ready: the pool has targetNodes ready nodes and its spec is
    valid (reason InvalidSpec names the field otherwise). Scaling: VMs are being created or
    deleted. Degraded: the cloud refuses or fails requests (quota, capacity, errors)."""
    instances: Annotated[list[InstanceRecord], ListMapKey("name"), MaxItems(2 * MAX_POOL_NODES)] = (
        field(default_factory=list)
    )
    """The VMs the pool intends to have, recorded before each cloud call."""
    zones: list[Annotated[str, MinLength(1), MaxLength(63)]] = field(default_factory=list)
    """The zones the pool can launch nodes into now (from its node class's subnets).
    Empty: one unnamed zone (the cloud picks)."""
    disruption: DisruptionStatus | None = None
    """Nodes being disrupted now, and how many more spec.disruption.budgets allows."""


@dataclass(frozen=True, kw_only=True)
class NodePool:
    """NodePool is a set of identical VMs, each registered as a worker node. Scale it with
    spec.targetNodes, by hand or with an Autoscaler."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: NodePoolSpec
    """The desired state of the pool."""
    status: NodePoolStatus = field(default_factory=NodePoolStatus)
    """The observed state of the pool, written by the NodePool controller."""


def parse_nodepool(obj: Mapping[str, Any]) -> NodePool:
    """A NodePool from its API object, defaults filled in.

    Raises:
        InvalidField: the object breaks the schema (it bypassed admission); its ``path``
            names the field, for a ``Ready=False, reason=InvalidSpec`` condition.
    """
    return parse(NodePool, obj)
