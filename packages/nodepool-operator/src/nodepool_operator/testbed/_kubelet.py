"""The VM side of the simulated cloud: each booted VM's kubelet registers its own Node.

On a real cloud nobody but the kubelet on a new VM creates its Node. :class:`SimulatedKubelets`
plays those kubelets for a :class:`SimulatedCloud`: it watches the cloud's VMs (reading the
cloud's file directly, as the VMs themselves would know their state; these reads are not
counted as cloud calls) and

- registers a Node for every running VM launched with node settings in its user data
  (:class:`NodeBootstrap`, or a node class's NodeConfig or Bottlerocket settings, read as
  the moto kubelets read them): the VM's name, its providerID, the labels, taints and
  capacity of its launch, and the annotation by which kwok takes over as that Node's
  kubelet (heartbeats, Lease, running its pods);
- when a VM stops or is terminated, its kubelet is gone: the Node's heartbeats stop (the
  annotation goes, and the Lease is silenced, see
  :func:`kubeloop.envtest.silenced_lease_patch`) and the node lifecycle controller marks it
  ``Unknown``; a VM started again gets both back. :meth:`SimulatedKubelets.kill` does the
  same to a VM that keeps running (a hung kubelet).

It never deletes a Node (kubelets do not), and it never touches a Node after registration
otherwise: labels and taints are the NodePool controller's from then on. It runs in the
operator's process in tests and the demo ("the VM side"), as a supervised loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from kubeloop import LEASES, NODES, AlreadyExists, Client, NotFound
from kubeloop.envtest import NODE_LEASE_NAMESPACE, silenced_lease_patch
from nodepool_operator.cloud import (
    SIMULATED_REGION,
    Instance,
    NodeBootstrap,
    SimulatedCloud,
    provider_id,
    registered_node,
)

from ._boot import kubelet_resources, read_boot

log = logging.getLogger("nodepool_operator.kubelet")

#: kwok manages the Nodes that carry this annotation (see ``kubeloop.envtest``).
KWOK_ANNOTATIONS: Final[Mapping[str, str]] = {"kwok.x-k8s.io/node": "fake"}
#: The well-known topology labels a kubelet sets from its cloud.
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"
#: Field manager of the kubelets' writes, as a real kubelet's are attributed to ``kubelet``.
FIELD_MANAGER: Final = "kubelet"
_BACKOFF_MAX: Final = 10.0


class SimulatedKubelets:
    """The kubelets of a simulated cloud's VMs; see the module docstring.

    Args:
        cloud: the VMs.
        client: a client for the cluster the VMs join (its own, with field manager
            ``kubelet``, so its requests are not counted as the operator's).
        interval: seconds between looks at the cloud, at most: a VM whose boot ends sooner
            is looked at when it ends (a kubelet starts with its VM). Default 0.2.
    """

    def __init__(
        self, cloud: SimulatedCloud | None, client: Client, *, interval: float = 0.2
    ) -> None:
        self.cloud = cloud
        self.client = client
        self.interval = interval
        self._up: set[str] = set()
        """VMs whose Node this process registered (or found) with the kwok annotation."""
        self._down: set[str] = set()
        """VMs whose Node this process has taken the annotation from (or that never ran)."""
        self.registered = 0
        """Nodes this object created (for reports)."""
        self._next_look = interval
        """Seconds until the next look: the interval, or sooner when a boot ends sooner."""

    async def run(self) -> None:
        """Sync until cancelled; a failed round is logged and retried with a backoff."""
        failures = 0
        while True:
            try:
                await self.sync()
                failures = 0
                await asyncio.sleep(self._next_look)
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                log.exception("simulated kubelets: sync failed", extra={"failures": failures})
                await asyncio.sleep(min(self.interval * 2**failures, _BACKOFF_MAX))

    async def sync(self) -> None:
        """One look at every VM; registers or unregisters as described above."""
        assert self.cloud is not None, "subclasses without a SimulatedCloud override sync()"
        snapshot = await asyncio.to_thread(self.cloud.snapshot)
        booting = snapshot.next_launch_in
        # a hair past the boot's end, so the look finds the VM running
        self._next_look = self.interval if booting is None else min(self.interval, booting + 0.002)
        acts = []
        for vm in snapshot.instances:
            node = self._registration(vm)
            if node is None:
                continue
            if vm.state == "running":
                if vm.id not in self._up:
                    acts.append(self._come_up(vm.id, node))
            elif vm.id not in self._down:
                acts.append(self._go_down(vm.id, node["metadata"]["name"]))
        # one kubelet per VM, each on its own as on a real cloud: VMs whose boots end
        # together register together, not one request after another's answer
        failed = [r for r in await asyncio.gather(*acts, return_exceptions=True) if r is not None]
        if failed:
            raise failed[0]  # the others took; the failed ones are looked at again

    async def _come_up(self, instance_id: str, node: dict[str, Any]) -> None:
        await self._start(instance_id, node)
        self._up.add(instance_id)
        self._down.discard(instance_id)

    async def _go_down(self, instance_id: str, node_name: str) -> None:
        await self._stop(node_name)
        self._down.add(instance_id)
        self._up.discard(instance_id)

    def _registration(self, vm: Instance) -> dict[str, Any] | None:
        """The Node ``vm``'s kubelet would register, or None if its user data joins none:
        the simulated bootstrap (:class:`NodeBootstrap`), or a node class's NodeConfig or
        Bottlerocket settings (the Node named after the VM, which has no DNS name here,
        sized by its type as the kubelet reads its machine)."""
        bootstrap = NodeBootstrap.decode(vm.user_data)
        if bootstrap is not None:
            node = _simulated_node(vm, bootstrap)
            node["metadata"]["labels"] = {**node["metadata"].get("labels", {}), **_zone_labels(vm)}
            return node
        boot = read_boot(vm.user_data)
        machine = self.cloud.machine(vm.instance_type) if self.cloud is not None else None
        if boot is None or machine is None:
            return None
        capacity, allocatable = kubelet_resources(
            boot,
            cpu_millis=machine.cpu_cores * 1000,
            memory=machine.memory_bytes,
            disk=machine.disk_bytes,
        )
        labels = {
            **boot.labels,
            "kubernetes.io/hostname": vm.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": vm.instance_type,
            **_zone_labels(vm),
        }
        labels.setdefault("kubernetes.io/arch", "amd64")
        addresses = [{"type": "InternalIP", "address": vm.private_ip}]
        if vm.public_ip:
            addresses.append({"type": "ExternalIP", "address": vm.public_ip})
        addresses.append({"type": "Hostname", "address": vm.name})
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": vm.name, "labels": labels},
            "spec": {"providerID": provider_id(vm.id), "taints": [dict(t) for t in boot.taints]},
            "status": {"capacity": capacity, "allocatable": allocatable, "addresses": addresses},
        }

    async def _start(self, instance_id: str, node: dict[str, Any]) -> None:
        """Register ``node`` (its annotations get kwok's), or bring a registered one back."""
        name = node["metadata"]["name"]
        node["metadata"]["annotations"] = {
            **(node["metadata"].get("annotations") or {}),
            **KWOK_ANNOTATIONS,
        }
        try:
            await self.client.create(NODES, node)
        except AlreadyExists:
            # registered before (another process, or before a stop): the kubelet is back
            with contextlib.suppress(NotFound):
                await self.client.patch(
                    NODES, name, {"metadata": {"annotations": KWOK_ANNOTATIONS}}
                )
            with contextlib.suppress(NotFound):  # kwok re-creates it and heartbeats again
                lease = await self.client.get(LEASES, name, NODE_LEASE_NAMESPACE)
                holder = (lease.get("spec") or {}).get("holderIdentity")
                if holder == silenced_lease_patch()["spec"]["holderIdentity"]:
                    await self.client.delete(LEASES, name, NODE_LEASE_NAMESPACE)
            return
        self.registered += 1
        log.info("registered node", extra={"node": name, "instance": instance_id})

    async def kill(self, node_name: str) -> None:
        """The kubelet of ``node_name`` dies while its VM keeps running: no more heartbeats
        (the node lifecycle controller marks the Node ``Unknown`` after its grace period)."""
        await self._silence(node_name)

    async def _stop(self, node_name: str) -> None:
        gone = dict.fromkeys(KWOK_ANNOTATIONS)  # merge patch: null removes the key
        with contextlib.suppress(NotFound):
            await self.client.patch(NODES, node_name, {"metadata": {"annotations": gone}})
        await self._silence(node_name)

    async def _silence(self, node_name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.patch(LEASES, node_name, silenced_lease_patch(), NODE_LEASE_NAMESPACE)


def _zone_labels(vm: Instance) -> dict[str, str]:
    """The zone and region labels, from the cloud's record of the VM (as a kubelet with the
    cloud provider gets them from the cloud): none for a VM without a zone."""
    if not vm.zone:
        return {}
    return {ZONE_LABEL: vm.zone, REGION_LABEL: SIMULATED_REGION}


def _simulated_node(vm: Instance, bootstrap: NodeBootstrap) -> dict[str, Any]:
    return registered_node(
        bootstrap, instance_id=vm.id, private_ip=vm.private_ip, public_ip=vm.public_ip
    )
