"""The VM side of moto's EC2: each running instance's kubelet registers its own Node.

moto runs no VMs, so nothing would ever register the Nodes of instances ``AwsCloud`` launched
there. :class:`MotoKubelets` plays those kubelets (with nodeadm before them, and the cloud
controller manager's labels) as :class:`SimulatedKubelets` does for the simulated cloud,
reading only what a real node reads, from EC2:

- the user data the instance booted with (DescribeInstanceAttribute), read as nodeadm reads
  it (:mod:`._boot`): the NodeConfig's ``--node-labels``, ``--register-with-taints``, max
  pods, kube/system reservations and hard eviction thresholds;
- the instance itself (DescribeInstances): its private DNS name, which is the Node's name
  (what EKS authorises a node as), zone, addresses and type; the type's vCPUs, memory,
  architecture and NVIDIA GPUs (DescribeInstanceTypes) and its root volume's size
  (DescribeVolumes), which a kubelet (and, for the GPUs, the NVIDIA device plugin) reads off
  its machine.

Capacity and allocatable follow from those as the kubelet computes them (capacity minus
kube-reserved, system-reserved and the hard eviction threshold). The Node's providerID is
EC2's, ``aws:///<zone>/<instance id>``.

Only for moto (tests and ``demo --cloud aws``): on EC2 the instances' real kubelets do this.
Instances whose user data holds no NodeConfig (an Instance's VM, a Custom class's boot
script) register nothing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from aiobotocore.session import AioSession

from kubeloop import Client
from nodepool_operator.cloud import NVIDIA_GPU

from ._boot import KubeletBoot, kubelet_resources, read_boot
from ._kubelet import SimulatedKubelets

if TYPE_CHECKING:
    from types_aiobotocore_ec2 import EC2Client
    from types_aiobotocore_ec2.type_defs import InstanceTypeDef, InstanceTypeInfoTypeDef

#: EC2's providerID scheme, as the AWS cloud provider sets it on a Node.
AWS_PROVIDER_PREFIX: Final = "aws:///"
_RUNNING: Final = "running"
_GONE: Final = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
_ARCH: Final = {"x86_64": "amd64", "arm64": "arm64"}
_MIB: Final = 1024**2
_GIB: Final = 1024**3


def aws_provider_id(zone: str, instance_id: str) -> str:
    return f"{AWS_PROVIDER_PREFIX}{zone}/{instance_id}"


class MotoKubelets(SimulatedKubelets):
    """The kubelets of a moto server's instances; see the module docstring.

    :meth:`run` opens its EC2 client for as long as it runs; for single :meth:`sync` calls,
    use ``async with MotoKubelets(endpoint_url, client)``.

    Args:
        endpoint_url: moto's server.
        client: a client for the cluster the instances join (field manager ``kubelet``).
        region: the region whose instances to watch; None: the standard chain's.
        interval: seconds between looks. Default 0.5 (each look is a DescribeInstances).
    """

    def __init__(
        self,
        endpoint_url: str,
        client: Client,
        *,
        region: str | None = None,
        interval: float = 0.5,
    ) -> None:
        super().__init__(None, client, interval=interval)
        self._endpoint_url = endpoint_url
        self._region = region
        self._stack = contextlib.AsyncExitStack()
        self._ec2: EC2Client | None = None
        self._boots: dict[str, KubeletBoot | None] = {}
        """Per instance, what it booted with (user data does not change while it runs)."""
        self._types: dict[str, InstanceTypeInfoTypeDef] = {}
        self._names: dict[str, str] = {}
        """Per instance, the name its Node registered under."""

    async def __aenter__(self) -> MotoKubelets:
        self._ec2 = await self._stack.enter_async_context(
            AioSession().create_client(
                "ec2", region_name=self._region, endpoint_url=self._endpoint_url
            )
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._ec2 = None
        await self._stack.aclose()

    async def run(self) -> None:
        if self._ec2 is not None:
            await super().run()
            return
        async with self:
            await super().run()

    @property
    def _client(self) -> EC2Client:
        if self._ec2 is None:
            raise RuntimeError("MotoKubelets is not open; use `async with MotoKubelets(...)`")
        return self._ec2

    async def sync(self) -> None:
        """One look at every instance; registers or unregisters as SimulatedKubelets does."""
        paginator = self._client.get_paginator("describe_instances")
        async for page in paginator.paginate():
            for reservation in page.get("Reservations", []):
                for raw in reservation.get("Instances", []):
                    await self._sync_one(raw)

    async def _sync_one(self, raw: InstanceTypeDef) -> None:
        instance_id = raw["InstanceId"]
        state = str(raw.get("State", {}).get("Name"))
        boot = await self._boot(instance_id)
        if boot is None:
            return
        if state == _RUNNING:
            if instance_id not in self._up:
                node = await self._node(raw, boot)
                self._names[instance_id] = node["metadata"]["name"]
                await self._start(instance_id, node)
                self._up.add(instance_id)
                self._down.discard(instance_id)
        elif state in _GONE and instance_id not in self._down:
            name = self._names.get(instance_id) or str(raw.get("PrivateDnsName") or "")
            if name:
                await self._stop(name)
            self._down.add(instance_id)
            self._up.discard(instance_id)

    async def _boot(self, instance_id: str) -> KubeletBoot | None:
        if instance_id not in self._boots:
            reply = await self._client.describe_instance_attribute(
                InstanceId=instance_id, Attribute="userData"
            )
            encoded = str(reply.get("UserData", {}).get("Value") or "")
            self._boots[instance_id] = read_boot(encoded) if encoded else None
        return self._boots[instance_id]

    async def _node(self, raw: InstanceTypeDef, boot: KubeletBoot) -> dict[str, Any]:
        """The Node this instance's kubelet registers: see the module docstring."""
        instance_id = raw["InstanceId"]
        name = str(raw.get("PrivateDnsName") or "")
        zone = str(raw.get("Placement", {}).get("AvailabilityZone") or "")
        type_name = str(raw.get("InstanceType", ""))
        info = await self._type(type_name)
        archs = info.get("ProcessorInfo", {}).get("SupportedArchitectures") or []
        arch = _ARCH.get(str(archs[0])) if archs else None
        cpu = int(info.get("VCpuInfo", {}).get("DefaultVCpus") or 0) * 1000
        memory = int(info.get("MemoryInfo", {}).get("SizeInMiB") or 0) * _MIB
        disk = await self._root_disk(instance_id)
        capacity, allocatable = kubelet_resources(boot, cpu_millis=cpu, memory=memory, disk=disk)
        # the NVIDIA device plugin, on a GPU node, advertises the GPUs it finds on the machine
        gpus = sum(
            int(g.get("Count") or 0)
            for g in info.get("GpuInfo", {}).get("Gpus", [])
            if g.get("Manufacturer") == "NVIDIA"
        )
        if gpus:
            capacity[NVIDIA_GPU] = allocatable[NVIDIA_GPU] = str(gpus)
        # the kubelet's (and cloud controller manager's) own labels win over --node-labels
        labels = {
            **boot.labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": type_name,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": self._client.meta.region_name,
        }
        if arch:
            labels["kubernetes.io/arch"] = arch
        addresses = [{"type": "InternalIP", "address": str(raw.get("PrivateIpAddress") or "")}]
        if raw.get("PublicIpAddress"):
            addresses.append({"type": "ExternalIP", "address": str(raw["PublicIpAddress"])})
        addresses += [
            {"type": "InternalDNS", "address": name},
            {"type": "Hostname", "address": name},
        ]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "providerID": aws_provider_id(zone, instance_id),
                "taints": [dict(t) for t in boot.taints],
            },
            "status": {"capacity": capacity, "allocatable": allocatable, "addresses": addresses},
        }

    async def _type(self, name: str) -> InstanceTypeInfoTypeDef:
        if name not in self._types:
            reply = await self._client.describe_instance_types(InstanceTypes=[name])  # type: ignore[list-item]
            found = reply.get("InstanceTypes", [])
            if not found:
                raise RuntimeError(f"EC2 does not describe instance type {name!r}")
            self._types[name] = found[0]
        return self._types[name]

    async def _root_disk(self, instance_id: str) -> int:
        """The size of the instance's root volume: what the kubelet sees as nodefs."""
        reply = await self._client.describe_volumes(
            Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
        )
        sizes = [int(v.get("Size") or 0) for v in reply.get("Volumes", [])]
        return (max(sizes) if sizes else 0) * _GIB
