"""The Node a pool's VM registers as, built from the VM and the pool alone.

There is no kubelet: the operator creates the Node with its status (which the API accepts on
create) and keeps its Ready condition in step with the VM. kube-scheduler needs ``pods`` in
allocatable and no NoSchedule taint of its own to bind pods to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubeloop import Object
from nodepool_operator.api import NodePool, NodePoolSpec
from nodepool_operator.cloud import Instance, InstanceType
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.scheduling import DEFAULT_MAX_PODS, NodeShape, Taint, node_shape

INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
#: ``spec.providerID`` is this plus the instance id (``aws:///zone/i-...`` for EC2).
PROVIDER_ID_PREFIX: Final = "sim:///"

_BINARY_UNITS: Final = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))


def provider_id(instance_id: str) -> str:
    return PROVIDER_ID_PREFIX + instance_id


def _bytes(amount: int) -> str:
    """An exact quantity: ``8Gi``, ``1536Mi``, or plain bytes."""
    for suffix, unit in _BINARY_UNITS:
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def capacity(spec: NodePoolSpec, instance_type: InstanceType | None) -> dict[str, str]:
    """cpu, memory and ephemeral-storage from the spec, else the instance type; and ``pods``.

    ``pods`` is kubelet's default max-pods, the value the Autoscaler's node template assumes,
    so its packing and the scheduler agree. A resource neither source knows is left out.
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
    return out


def pool_shape(
    pool: NodePool,
    instance_type: InstanceType | None,
    *,
    scope_labels: Mapping[str, str] | None = None,
) -> NodeShape:
    """What every Node of ``pool`` registers with: the one source for the registered Node
    and the Autoscaler's node template (:func:`~._capacity.pool_template`).

    Label precedence, lowest first: the kubelet's ``kubernetes.io/os``/``arch`` defaults,
    the pool's ``spec.labels`` (which may set those two, and the Node then says so too), the
    operator's scope labels, then the instance type and pool labels, which nobody may
    override. Allocatable is :func:`capacity` (nothing reserved).
    """
    spec = pool.spec
    fixed = {
        **(scope_labels or {}),
        INSTANCE_TYPE_LABEL: spec.instance_type,
        POOL_LABEL: pool.metadata.name or "",
    }
    return node_shape(
        resources=capacity(spec, instance_type),
        labels=spec.labels,
        fixed_labels=fixed,
        taints=[Taint(t.key, t.effect, t.value or "") for t in spec.taints],
    )


def ready_condition(ready: bool) -> dict[str, str]:
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "VMRunning" if ready else "VMNotRunning",
        "message": "the VM is running" if ready else "the VM is not running",
    }


def is_ready(node: Object) -> bool:
    """Whether the Node's Ready condition is True."""
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _hostname(name: str) -> str:
    # A label value: at most 63 characters, ending alphanumeric.
    return name[:63].rstrip("-.")


def node_manifest(
    pool: NodePool,
    vm: Instance,
    instance_type: InstanceType | None,
    *,
    run_labels: Mapping[str, str] | None = None,
) -> Object:
    """The Node for ``vm`` (named like it), Ready, shaped by :func:`pool_shape`."""
    name = vm.name
    shape = pool_shape(pool, instance_type, scope_labels=run_labels)
    labels = shape.node_labels(_hostname(name))
    taints: list[dict[str, Any]] = list(shape.api_taints())
    resources = dict(shape.resources)
    addresses = [{"type": "InternalIP", "address": vm.private_ip}]
    if vm.public_ip:
        addresses.append({"type": "ExternalIP", "address": vm.public_ip})
    addresses.append({"type": "Hostname", "address": _hostname(name)})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider_id(vm.id), "taints": taints},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [ready_condition(vm.state == "running")],
            "addresses": addresses,
        },
    }
