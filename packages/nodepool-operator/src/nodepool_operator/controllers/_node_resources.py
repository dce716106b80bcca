"""What a node of a node class and an instance type has: its kubelet's settings and the
capacity and allocatable they give. The one source for both the bootstrap (the NodeConfig's or
Bottlerocket's kubelet settings, :mod:`.nodepool._userdata`) and the Autoscaler's node
template (:func:`._node_manifest.pool_shape`), so the template is the Node the kubelet
registers.

Allocatable is computed as the kubelet computes it: capacity less kube-reserved (EKS's formula,
from max pods and vCPUs), system-reserved and the hard eviction threshold (a quantity, or a
percentage of capacity: ``memory.available`` of memory, ``nodefs.available`` of the root
volume). Capacity is the type's vCPUs and memory (DescribeInstanceTypes), max pods, and the
root volume's size (the class's, sent as the launch's block device mapping), and the type's
NVIDIA GPUs as ``nvidia.com/gpu`` (what the device plugin advertises).

The moto kubelets (``testbed/_boot.py``) do the same arithmetic on the kubelet's side, from
the user data and EC2 alone, and on purpose apart from this module: a test comparing the two
(tests/integration/test_node_template_aws.py) then checks the arithmetic too, not only what
reaches the user data.

A real node's memory capacity is some 5-8% below the type's (the hypervisor's share): the
Autoscaler passes the memory a registered Node of the type reports instead, once there is one
(:func:`._capacity.machine_memory`); before that the template overstates memory by that share
(Karpenter estimates it with ``VM_MEMORY_OVERHEAD_PERCENT``). Not modelled: the file system's
own overhead on the root volume.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from nodepool_operator.api import AwsNodeClassSpec
from nodepool_operator.cloud import (
    NVIDIA_GPU,
    InstanceType,
    KubeletSettings,
    RootVolume,
    kubelet_settings,
)
from nodepool_operator.scheduling import format_bytes, format_cpu, parse_bytes, parse_cpu

_GIB: Final = 1024**3

__all__ = ["NodeResources", "class_kubelet", "node_resources", "root_volume"]


@dataclass(frozen=True, slots=True)
class NodeResources:
    """A node's ``status.capacity`` and ``status.allocatable``, as API quantities."""

    capacity: dict[str, str]
    allocatable: dict[str, str]


def class_kubelet(node_class: AwsNodeClassSpec, instance_type: InstanceType) -> KubeletSettings:
    """The kubelet settings of a node of ``instance_type`` booted by ``node_class``: max
    pods (the class's, else the type's ENI or prefix limit), EKS's kube-reserved, the class's
    system-reserved, the default hard eviction thresholds."""
    options = node_class.kubelet
    return kubelet_settings(
        instance_type,
        max_pods=options.max_pods if options else None,
        system_reserved=options.system_reserved if options else None,
        eni_limited_memory=node_class.ami_family == "AL2023",
        prefix_delegation=bool(options and options.prefix_delegation),
    )


def root_volume(node_class: AwsNodeClassSpec) -> RootVolume:
    """The root volume a VM of ``node_class`` is launched with (the class's, or the default)."""
    spec = node_class.root
    return RootVolume(
        device_name=node_class.root_device,
        size_bytes=spec.size_gib * _GIB,
        volume_type=spec.volume_type,
        encrypted=spec.encrypted,
    )


def node_resources(
    instance_type: InstanceType, kubelet: KubeletSettings, *, root_disk_bytes: int
) -> NodeResources:
    """Capacity and allocatable of a node of ``instance_type`` whose kubelet runs with
    ``kubelet`` on a root volume of ``root_disk_bytes``; see the module docstring.

    Raises:
        ValueError: a reservation or threshold is not a quantity.
    """
    cpu = instance_type.cpu_cores * 1000
    memory = instance_type.memory_bytes
    disk = root_disk_bytes
    reserved = (kubelet.kube_reserved, kubelet.system_reserved)
    reserved_cpu = sum(parse_cpu(r.get("cpu", "0")) for r in reserved)
    reserved_memory = sum(parse_bytes(r.get("memory", "0")) for r in reserved)
    reserved_disk = sum(parse_bytes(r.get("ephemeral-storage", "0")) for r in reserved)
    evict_memory = _threshold(kubelet.eviction_hard.get("memory.available"), memory)
    evict_disk = _threshold(kubelet.eviction_hard.get("nodefs.available"), disk)
    pods = str(kubelet.max_pods)
    # the NVIDIA device plugin advertises every GPU; nothing of them is reserved
    gpus = {NVIDIA_GPU: str(instance_type.gpus)} if instance_type.gpus else {}
    return NodeResources(
        capacity={
            "cpu": format_cpu(cpu),
            "memory": format_bytes(memory),
            "ephemeral-storage": format_bytes(disk),
            "pods": pods,
            **gpus,
        },
        allocatable={
            "cpu": format_cpu(max(0, cpu - reserved_cpu)),
            "memory": format_bytes(max(0, memory - reserved_memory - evict_memory)),
            "ephemeral-storage": format_bytes(max(0, disk - reserved_disk - evict_disk)),
            "pods": pods,
            **gpus,
        },
    )


def _threshold(value: str | None, capacity: int) -> int:
    """An eviction threshold in bytes: a quantity, or a percentage of ``capacity`` (rounded
    down, as the kubelet's ``int64(capacity * percent)``)."""
    if not value:
        return 0
    if value.endswith("%"):
        return int(capacity * Decimal(value[:-1]) / 100)
    return parse_bytes(value)
