"""What a pool offers the scheduler: its node template, and the room on the nodes it has.

Pure functions of the NodePool, its Nodes and the pods bound to them, so the Autoscaler's view
of capacity can be unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from kubeloop import Resource
from nodepool_operator.api import AwsNodeClassSpec, NodePool
from nodepool_operator.cloud import CATALOGUE, InstanceType
from nodepool_operator.controllers._node_manifest import (
    DISRUPTING_TAINT,
    INSTANCE_TYPE_LABEL,
    STARTING_TAINTS,
    pool_shape,
)
from nodepool_operator.controllers._reserve import RESERVED_KEY
from nodepool_operator.scheduling import (
    DaemonSetView,
    NodeState,
    NodeTemplate,
    Pod,
    Resources,
    ScaleDownNode,
    Taint,
    daemonset_overhead,
    node_view,
    parse_bytes,
    pod_view,
)

__all__ = [
    "DAEMONSETS",
    "PoolNodes",
    "machine_memory",
    "pool_nodes",
    "pool_template",
    "scale_down_node",
]

#: Taints the node lifecycle puts on a node that is still booting or briefly unreachable, and
#: the Autoscaler's own reservation of a new node (lifted once its planned pods are bound).
#: They say nothing about the pool's shape, so such a node still counts as room for pods that
#: do not tolerate them (they will, once the taint is gone).
_LIFECYCLE_TAINTS: Final = STARTING_TAINTS | {RESERVED_KEY}
_TERMINAL: Final = ("Succeeded", "Failed")

ApiObject = Mapping[str, object]

DAEMONSETS: Final = Resource("apps", "v1", "daemonsets", "DaemonSet")


def pool_template(
    pool: NodePool,
    catalogue: Sequence[InstanceType] = CATALOGUE,
    *,
    scope_labels: Mapping[str, str] | None = None,
    daemonsets: Iterable[DaemonSetView] = (),
    node_class: AwsNodeClassSpec | None = None,
    memory: int | None = None,
) -> NodeTemplate:
    """An empty node of ``pool``, exactly as its Nodes register, minus its DaemonSets.

    Labels, taints and allocatable come from :func:`~._node_manifest.pool_shape`, the
    function the registered Node (or, with ``node_class``, the kubelet settings of its
    bootstrap) is built from, so the plan and the scheduler agree on what fits.
    ``catalogue``: the cloud's instance types (``CloudProvider.instance_types``).
    ``memory``: the memory a registered Node of the type reports (:func:`machine_memory`),
    which replaces the type's nominal memory in a node class's arithmetic: a real machine
    reports less than EC2's figure (the hypervisor's share), and once one has registered the
    template says what the next one will have (Karpenter learns it the same way).
    ``daemonsets`` are all the cluster's DaemonSets: those whose pods would land on the
    pool's nodes take their requests from every node's allocatable.

    Raises:
        ValueError: the instance type is unknown and the pool does not set cpu and memory, or
            a quantity is malformed.
    """
    spec = pool.spec
    known = next((t for t in catalogue if t.name == spec.instance_type), None)
    if known is not None and node_class is not None and memory is not None:
        known = replace(known, memory_bytes=memory)
    shape = pool_shape(pool, known, scope_labels=scope_labels, node_class=node_class)
    if "cpu" not in shape.resources or "memory" not in shape.resources:
        raise ValueError(
            f"instance type {spec.instance_type!r} is not in the catalogue; "
            "set the pool's cpu and memory"
        )
    overhead = daemonset_overhead(daemonsets, shape.labels, shape.taints)
    return NodeTemplate.from_shape(spec.instance_type, shape, daemonset_overhead=overhead)


def machine_memory(nodes: Iterable[ApiObject], instance_type: str) -> int | None:
    """The least ``status.capacity.memory`` among ``nodes`` of ``instance_type`` (by their
    ``node.kubernetes.io/instance-type`` label), or None when none reports one: what the
    kubelet of a machine of that type really has. The least, so the template never promises
    what one of them lacks."""
    found: list[int] = []
    for node in nodes:
        meta = node.get("metadata")
        status = node.get("status")
        if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
            continue
        labels = meta.get("labels")
        if not isinstance(labels, Mapping) or labels.get(INSTANCE_TYPE_LABEL) != instance_type:
            continue
        capacity = status.get("capacity")
        value = capacity.get("memory") if isinstance(capacity, Mapping) else None
        if not value:
            continue
        try:
            found.append(parse_bytes(str(value)))
        except ValueError:
            continue  # malformed: no figure rather than a failed plan
    return min(found) if found else None


@dataclass(frozen=True, slots=True)
class PoolNodes:
    """A pool's registered Nodes as the plan sees them.

    Attributes:
        registered: Nodes of the pool not being deleted nor drained, Ready or still booting.
        ready: of those, the Ready ones.
        room: the schedulable ones (not cordoned, not being disrupted) with their free room,
            booting ones included: the pods already bound to a booting node are known, so it
            is counted with what it really has left rather than as an empty template node.
            DaemonSet pods not there yet are charged for.
        empty: Ready, schedulable Nodes running no workload pods, by name.
        candidates: Ready, schedulable Nodes with their pods, for
            :func:`~nodepool_operator.scheduling.removal_order`, with their own taints: the
            NodePool controller judges a scale-down on the Nodes as they are
            (:func:`scale_down_node`), and a Node the lifecycle has not opened yet is no
            place for a moved pod now (the scheduler would not put it there either).
        leaving: Nodes being drained (the disrupting taint, no deletionTimestamp yet):
            capacity that is going, counted neither as registered nor as Ready, so the
            replacement of a node being repaired counts as in flight rather than hidden
            behind the node it replaces.
        opening: Ready Nodes still carrying one of the
            :data:`~._node_manifest.STARTING_TAINTS` or the Autoscaler's reservation:
            registered and Ready, but no pod it was not planned for lands there until the
            taint is lifted.
    """

    registered: int
    ready: int
    room: tuple[NodeState, ...]
    empty: tuple[str, ...]
    candidates: tuple[ScaleDownNode, ...] = ()
    leaving: int = 0
    opening: int = 0


def pool_nodes(
    nodes: Iterable[ApiObject],
    pods_on: Callable[[str], Iterable[Pod]],
    *,
    daemonsets: Sequence[DaemonSetView] = (),
    booting_taints: Sequence[Taint] | None = None,
) -> PoolNodes:
    """Summarise ``nodes`` (a pool's Node objects); ``pods_on(name)`` gives the pods bound there.

    ``booting_taints`` (the template's): the taints a node that is not Ready yet is simulated
    with, instead of its own. Taints an agent puts on a node before it is Ready are start-up
    taints, expected to go (Karpenter's ``startupTaints`` are ignored by its simulation the same
    way); counting them would scale up again for the very pods that node was added for. Once
    the node is Ready its own taints count, and the landing guard (``_landing``) takes over.

    Terminal pods take no room; terminating ones still do, as in kube-scheduler. A Node whose
    allocatable is malformed offers no room rather than failing the whole plan.
    """
    registered = ready = leaving = opening = 0
    room: list[NodeState] = []
    empty: list[str] = []
    candidates: list[ScaleDownNode] = []
    for node in nodes:
        view = node_view(node)
        if view.deleting:
            continue
        if any(t.key == DISRUPTING_TAINT.key for t in view.taints):
            leaving += 1
            continue
        registered += 1
        ready += view.ready
        if view.unschedulable:
            continue
        if view.allocatable == Resources():
            continue
        try:
            pods = [v for v in map(pod_view, pods_on(view.name)) if v.phase not in _TERMINAL]
        except ValueError:
            continue
        free = view.allocatable
        for pod in pods:
            free -= pod.requests
        here = {p.owner_uid for p in pods if not p.workload}
        # a reserved node takes DaemonSet pods once its reservation is lifted, as any other pod
        free -= daemonset_overhead(daemonsets, view.labels, view.taints, present=here)
        if not view.ready and booting_taints is not None:
            taints = tuple(booting_taints)
        else:
            taints = tuple(t for t in view.taints if t.key not in _LIFECYCLE_TAINTS)
        room.append(NodeState(view.name, free, view.labels, taints, tuple(pods)))
        if view.ready:
            opening += any(t.key in _LIFECYCLE_TAINTS for t in view.taints)
            candidates.append(
                ScaleDownNode(view.name, view.allocatable, view.labels, view.taints, tuple(pods))
            )
            if not any(p.workload for p in pods):
                empty.append(view.name)
    return PoolNodes(
        registered, ready, tuple(room), tuple(sorted(empty)), tuple(candidates), leaving, opening
    )


def scale_down_node(node: ApiObject, pods: Iterable[Pod]) -> ScaleDownNode:
    """A Node and the pods bound to it, as :func:`~nodepool_operator.scheduling.
    removal_order` reads them (terminal pods left out; a pod with a malformed quantity
    counts as requesting nothing, not as a reason to fail the pass)."""
    view = node_view(node)
    views = []
    for pod in pods:
        try:
            pod_ = pod_view(pod)
        except ValueError:
            continue
        if pod_.phase not in _TERMINAL:
            views.append(pod_)
    return ScaleDownNode(view.name, view.allocatable, view.labels, view.taints, tuple(views))
