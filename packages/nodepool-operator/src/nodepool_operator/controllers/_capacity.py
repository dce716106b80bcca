"""What a pool offers the scheduler: its node template, and the room on the nodes it has.

Pure functions of the NodePool, its Nodes and the pods bound to them, so the Autoscaler's view
of capacity can be unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from nodepool_operator.api import NodePool
from nodepool_operator.cloud import CATALOGUE, InstanceType
from nodepool_operator.controllers._node_manifest import INSTANCE_TYPE_LABEL, capacity
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.scheduling import (
    NodeState,
    NodeTemplate,
    Pod,
    Resources,
    Taint,
    pod_requests,
)
from nodepool_operator.scheduling._pods import get_list, get_mapping, get_text

__all__ = ["PoolNodes", "pool_nodes", "pool_template"]

#: Taints the node lifecycle puts on a node that is still booting or briefly unreachable. They
#: say nothing about the pool's shape, so a booting node still counts as room for pods that do
#: not tolerate them (they will, once the taint is gone).
_LIFECYCLE_TAINTS: Final = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")

ApiObject = Mapping[str, object]


def pool_template(
    pool: NodePool,
    catalogue: Sequence[InstanceType] = CATALOGUE,
    *,
    scope_labels: Mapping[str, str] | None = None,
) -> NodeTemplate:
    """An empty node of ``pool``, exactly as the NodePool controller will register it.

    Sizes come from the same function the NodePool controller fills a Node's allocatable
    with (the pool's cpu/memory/diskSize, else its instance type's, and kubelet's default
    max-pods), so the plan and the scheduler agree on what fits. The labels are the ones every
    Node of the pool gets: the pool's, the operator's ``scope_labels``, the instance type and
    :data:`POOL_LABEL`; the taints are the pool's.

    Raises:
        ValueError: the instance type is unknown and the pool does not set cpu and memory, or
            a quantity is malformed.
    """
    spec = pool.spec
    known = next((t for t in catalogue if t.name == spec.instance_type), None)
    sizes = capacity(spec, known)
    if "cpu" not in sizes or "memory" not in sizes:
        raise ValueError(
            f"instance type {spec.instance_type!r} is not in the catalogue; "
            "set the pool's cpu and memory"
        )
    labels = {
        **spec.labels,
        **(scope_labels or {}),
        INSTANCE_TYPE_LABEL: spec.instance_type,
        POOL_LABEL: pool.metadata.name or "",
    }
    return NodeTemplate.from_pool(
        spec.instance_type,
        cpu=sizes["cpu"],
        memory=sizes["memory"],
        disk=sizes.get("ephemeral-storage", 0),
        labels=labels,
        taints=[Taint(t.key, t.effect, t.value or "") for t in spec.taints],
        max_pods=int(sizes["pods"]),
    )


@dataclass(frozen=True, slots=True)
class PoolNodes:
    """A pool's registered Nodes as the plan sees them.

    Attributes:
        registered: Nodes of the pool not being deleted, Ready or still booting.
        ready: of those, the Ready ones.
        room: the schedulable ones (not cordoned) with their free room, booting ones included:
            the pods already bound to a booting node are known, so it is counted with what it
            really has left rather than as an empty template node.
        empty: Ready, schedulable Nodes running no pods but DaemonSet and mirror pods, by name.
    """

    registered: int
    ready: int
    room: tuple[NodeState, ...]
    empty: tuple[str, ...]


def pool_nodes(nodes: Iterable[ApiObject], pods_on: Callable[[str], Iterable[Pod]]) -> PoolNodes:
    """Summarise ``nodes`` (a pool's Node objects); ``pods_on(name)`` gives the pods bound there.

    Terminal pods take no room; terminating ones still do, as in kube-scheduler. A Node whose
    allocatable is malformed offers no room rather than failing the whole plan.
    """
    registered = ready = 0
    room: list[NodeState] = []
    empty: list[str] = []
    for node in nodes:
        meta = get_mapping(node, "metadata")
        if meta.get("deletionTimestamp"):
            continue
        registered += 1
        name = get_text(meta, "name")
        is_ready = _is_ready(node)
        ready += is_ready
        spec = get_mapping(node, "spec")
        if spec.get("unschedulable") is True:
            continue
        pods = [p for p in pods_on(name) if _phase(p) not in _TERMINAL_PHASES]
        try:
            free = Resources.from_resource_list(
                get_mapping(get_mapping(node, "status"), "allocatable")
            )
            for pod in pods:
                free -= pod_requests(pod)
            taints = tuple(
                Taint.from_api(t)
                for t in get_list(spec, "taints")
                if isinstance(t, Mapping) and get_text(t, "key") not in _LIFECYCLE_TAINTS
            )
        except ValueError:
            continue
        labels = {k: v for k, v in get_mapping(meta, "labels").items() if isinstance(v, str)}
        room.append(NodeState(name=name, free=free, labels=labels, taints=taints))
        if is_ready and not any(_is_workload(p) for p in pods):
            empty.append(name)
    return PoolNodes(registered, ready, tuple(room), tuple(sorted(empty)))


def _phase(pod: Pod) -> str:
    return get_text(get_mapping(pod, "status"), "phase")


def _is_ready(node: ApiObject) -> bool:
    return any(
        get_text(c, "type") == "Ready" and get_text(c, "status") == "True"
        for c in get_list(get_mapping(node, "status"), "conditions")
    )


def _is_workload(pod: Pod) -> bool:
    """Whether ``pod`` makes its node needed: not a DaemonSet pod, not a static (mirror) pod."""
    meta = get_mapping(pod, "metadata")
    if "kubernetes.io/config.mirror" in get_mapping(meta, "annotations"):
        return False
    return not any(
        get_text(ref, "kind") == "DaemonSet" for ref in get_list(meta, "ownerReferences")
    )
