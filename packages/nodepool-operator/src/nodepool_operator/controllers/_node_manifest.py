"""The Node a pool's VM registers as, built from the pool and the VM's type alone.

The operator never creates Nodes: it launches each VM with :func:`node_bootstrap` as its user
data, and the VM's kubelet registers the Node from it (see
:class:`~nodepool_operator.cloud.NodeBootstrap`). This module is the one source of the labels,
taints and capacity of a pool's Nodes; :func:`node_manifest` is the Node a kubelet registers
from them, for the scheduling template and tests. kube-scheduler needs ``pods`` in allocatable
to bind pods to it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final, cast

from kubeloop import Object
from nodepool_operator.api import AwsNodeClassSpec, NodePool, NodePoolSpec
from nodepool_operator.cloud import (
    NVIDIA_GPU,
    PROVIDER_ID_PREFIX,
    Instance,
    InstanceType,
    MarketType,
    NodeBootstrap,
    provider_id,
    registered_node,
)
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._node_resources import class_kubelet, node_resources
from nodepool_operator.controllers._reserve import reservation_taint
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.scheduling import DEFAULT_MAX_PODS, NodeShape, Taint, node_shape

INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
#: The market a Node's VM was bought in (``on-demand`` or ``spot``): ours, as Karpenter's
#: ``karpenter.sh/capacity-type``, so a pod may ask for (or avoid) spot nodes.
CAPACITY_TYPE_LABEL: Final = "node.kubeloop.dev/capacity-type"
#: Where a Node runs, as the kubelet (with its cloud provider) labels it from the cloud.
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"
#: On a Node chosen for removal, from the choice on (Karpenter's ``karpenter.sh/disrupted``):
#: the NodePool controller puts it, and the Autoscaler counts no room on such a Node.
DISRUPTING_TAINT: Final = Taint("kubeloop.dev/disrupting", "NoSchedule")
#: Taints the node lifecycle keeps on a Node that may not take pods yet (or briefly, again):
#: kube-controller-manager lifts ``not-ready`` some time after the Ready condition turns True
#: (up to its node monitor period), the cloud controller ``uninitialized`` once it has
#: labelled the Node.
STARTING_TAINTS: Final = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)

__all__ = [
    "CAPACITY_TYPE_LABEL",
    "DISRUPTING_TAINT",
    "INSTANCE_TYPE_LABEL",
    "PROVIDER_ID_PREFIX",
    "REGION_LABEL",
    "STARTING_TAINTS",
    "ZONE_LABEL",
    "capacity",
    "is_ready",
    "node_bootstrap",
    "node_manifest",
    "open_for",
    "parse_time",
    "provider_id",
    "ready_for",
    "ready_since",
]

_BINARY_UNITS: Final = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))


def _bytes(amount: int) -> str:
    """An exact quantity: ``8Gi``, ``1536Mi``, or plain bytes."""
    for suffix, unit in _BINARY_UNITS:
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def capacity(spec: NodePoolSpec, instance_type: InstanceType | None) -> dict[str, str]:
    """cpu, memory and ephemeral-storage from the spec, else the instance type; and ``pods``.

    ``pods`` is kubelet's default max-pods, the value the Autoscaler's node template assumes,
    so its packing and the scheduler agree. A type's NVIDIA GPUs are ``nvidia.com/gpu``, as
    the device plugin advertises them. A resource neither source knows is left out.
    """
    known: dict[str, str] = {}
    if instance_type is not None:
        known = {
            "cpu": str(instance_type.cpu_cores),
            "memory": _bytes(instance_type.memory_bytes),
            "ephemeral-storage": _bytes(instance_type.disk_bytes),
        }
    given = {"cpu": spec.cpu, "memory": spec.memory, "ephemeral-storage": spec.disk_size}
    out = {key: str(value) for key, value in given.items() if value is not None}
    out = {**known, **out}
    out["pods"] = str(DEFAULT_MAX_PODS)
    if instance_type is not None and instance_type.gpus:
        out[NVIDIA_GPU] = str(instance_type.gpus)
    return out


def pool_shape(
    pool: NodePool,
    instance_type: InstanceType | None,
    *,
    scope_labels: Mapping[str, str] | None = None,
    instance_type_name: str | None = None,
    node_class: AwsNodeClassSpec | None = None,
    capacity_type: MarketType | None = None,
    zone: str = "",
    region: str = "",
) -> NodeShape:
    """What every Node of ``pool`` registers with: the one source for the registered Node
    and the Autoscaler's node template (:func:`~._capacity.pool_template`).

    Label precedence, lowest first: the kubelet's ``kubernetes.io/os``/``arch`` defaults
    (``arch`` the type's), the pool's ``spec.labels`` (which may set those two, and the Node
    then says so too), the operator's scope labels, then the instance type and pool labels,
    which nobody may override. ``instance_type_name`` is the VM's type for its label (the
    pool's, unless a VM of an older spec registers); ``capacity_type`` its market for
    :data:`CAPACITY_TYPE_LABEL` (the pool's, unless a spot create fell back to on-demand).

    Allocatable: with a ``node_class`` that bootstraps the kubelet (AL2023, Bottlerocket) and
    a known type, the kubelet's (:func:`~._node_resources.node_resources` of the settings
    the bootstrap writes and the class's root volume; the pool's cpu, memory and diskSize
    do not apply: the machine decides). Otherwise :func:`capacity` (nothing reserved), which
    the simulated kubelets register as it is.
    """
    spec = pool.spec
    fixed = {
        **(scope_labels or {}),
        INSTANCE_TYPE_LABEL: instance_type_name or spec.instance_type,
        CAPACITY_TYPE_LABEL: capacity_type or spec.capacity_type,
        POOL_LABEL: pool.metadata.name or "",
        **({ZONE_LABEL: zone} if zone else {}),
        **({REGION_LABEL: region} if zone and region else {}),
    }
    if node_class is not None and node_class.ami_family != "Custom" and instance_type is not None:
        resources = node_resources(
            instance_type,
            class_kubelet(node_class, instance_type),
            root_disk_bytes=node_class.root.size_gib * 1024**3,
        ).allocatable
    else:
        resources = capacity(spec, instance_type)
    return node_shape(
        resources=resources,
        labels=spec.labels,
        fixed_labels=fixed,
        taints=[Taint(t.key, t.effect, t.value or "") for t in spec.taints],
        arch=instance_type.architecture if instance_type is not None else "amd64",
    )


def _ready(node: Object) -> Mapping[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cast(Mapping[str, Any], cond)
    return None


def is_ready(node: Object) -> bool:
    """Whether the Node's Ready condition is True."""
    cond = _ready(node)
    return cond is not None and cond.get("status") == "True"


def ready_since(node: Object) -> float | None:
    """When the Node's Ready condition last changed (seconds since the epoch), or None if it
    has none (not reported yet) or no usable time."""
    cond = _ready(node)
    return parse_time(cond.get("lastTransitionTime") if cond is not None else None)


def parse_time(stamp: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the API server writes it, or None."""
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def ready_for(node: Object, now: float) -> float | None:
    """Seconds the Node has been Ready at ``now`` (never negative: clocks differ), or None
    when it is not Ready or says not since when. The reservation lift and its backstop
    both time from it."""
    since = ready_since(node) if is_ready(node) else None
    return None if since is None else max(0.0, now - since)


def open_for(node: Object, now: float) -> float | None:
    """:func:`ready_for`, but ``None`` while the Node still carries one of the
    :data:`STARTING_TAINTS`: Ready in its condition, it still refuses every pod, so a pod
    nominated to it would be tried and lose its nomination."""
    fields = node_fields(node)
    if any(fields.taint(key) is not None for key in STARTING_TAINTS):
        return None
    return ready_for(node, now)


def _hostname(name: str) -> str:
    # A label value: at most 63 characters, ending alphanumeric.
    return name[:63].rstrip("-.")


def pool_taints(spec: NodePoolSpec) -> list[dict[str, str]]:
    """The pool's ``spec.taints`` as API taints."""
    taints: list[dict[str, str]] = []
    for taint in spec.taints:
        entry = {"key": taint.key, "effect": taint.effect}
        if taint.value is not None:
            entry["value"] = taint.value
        taints.append(entry)
    return taints


def node_bootstrap(
    pool: NodePool,
    name: str,
    instance_type_name: str,
    instance_type: InstanceType | None,
    *,
    run_labels: Mapping[str, str] | None = None,
    capacity_type: MarketType | None = None,
    gated: bool = False,
) -> NodeBootstrap:
    """How the VM ``name`` of ``pool`` registers: its Node's name, labels, taints, capacity,
    all from :func:`pool_shape` (the Autoscaler's node template is built from it too), plus
    the per-node ``kubernetes.io/hostname`` and, when ``gated`` (an Autoscaler scales the
    pool) or with ``spec.reserveNewNodes``, the taint that reserves the node for the pods
    planned onto it (``_reserve``)."""
    shape = pool_shape(
        pool,
        instance_type,
        scope_labels=run_labels,
        instance_type_name=instance_type_name,
        capacity_type=capacity_type,
    )
    taints = [*shape.api_taints()]
    if gated or pool.spec.reserve_new_nodes:
        taints.append(reservation_taint(name))
    return NodeBootstrap(
        node_name=name,
        labels=shape.node_labels(_hostname(name)),
        taints=tuple(taints),
        capacity=dict(shape.resources),
    )


def node_manifest(
    pool: NodePool,
    vm: Instance,
    instance_type: InstanceType | None,
    *,
    run_labels: Mapping[str, str] | None = None,
) -> Object:
    """The Node ``vm``'s kubelet registers (before it reports any condition)."""
    bootstrap = node_bootstrap(
        pool,
        vm.name,
        vm.instance_type,
        instance_type,
        run_labels=run_labels,
        capacity_type=vm.capacity_type,
    )
    return registered_node(
        bootstrap, instance_id=vm.id, private_ip=vm.private_ip, public_ip=vm.public_ip
    )
