"""The VM side of moto's EC2: each running instance's kubelet registers its own Node.

moto runs no VMs, so nothing would ever register the Nodes of instances ``AwsCloud`` launched
there. :class:`MotoKubelets` plays those kubelets as :class:`SimulatedKubelets` does for the
simulated cloud, reading what the instances themselves know, from EC2: DescribeInstances for
their state, zone and addresses, and DescribeInstanceAttribute for the user data they booted
with (the :class:`NodeBootstrap` the operator launched them with: Node name, labels, taints,
capacity). The Node's providerID is EC2's, ``aws:///<zone>/<instance id>``.

Only for moto (tests and ``demo --cloud aws``): on EC2 the instances' real kubelets do this.
Instances whose user data is no NodeBootstrap (an Instance's VM, a boot script from a node
class's ``userData``) register nothing, as the simulated cloud's do.
"""

from __future__ import annotations

import base64
import contextlib
from typing import TYPE_CHECKING, Any, Final

from aiobotocore.session import AioSession

from kubeloop import Client
from nodepool_operator.cloud import Instance, NodeBootstrap

from ._kubelet import SimulatedKubelets

if TYPE_CHECKING:
    from types_aiobotocore_ec2 import EC2Client
    from types_aiobotocore_ec2.type_defs import InstanceTypeDef

#: EC2's providerID scheme, as the AWS cloud provider sets it on a Node.
AWS_PROVIDER_PREFIX: Final = "aws:///"
_RUNNING: Final = "running"
_GONE: Final = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


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
        self._user_data: dict[str, NodeBootstrap | None] = {}
        """Per instance, what it booted with (user data does not change while it runs)."""

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

    async def sync(self) -> None:
        """One look at every instance; registers or unregisters as SimulatedKubelets does."""
        if self._ec2 is None:
            raise RuntimeError("MotoKubelets is not open; use `async with MotoKubelets(...)`")
        paginator = self._ec2.get_paginator("describe_instances")
        async for page in paginator.paginate():
            for reservation in page.get("Reservations", []):
                for raw in reservation.get("Instances", []):
                    await self._sync_one(raw)

    async def _sync_one(self, raw: InstanceTypeDef) -> None:
        instance_id = raw["InstanceId"]
        state = str(raw.get("State", {}).get("Name"))
        bootstrap = await self._bootstrap(instance_id)
        if bootstrap is None:
            return
        if state == _RUNNING:
            if instance_id not in self._up:
                zone = str(raw.get("Placement", {}).get("AvailabilityZone") or "")
                await self._start(_vm(raw), bootstrap, provider=aws_provider_id(zone, instance_id))
                self._up.add(instance_id)
                self._down.discard(instance_id)
        elif state in _GONE and instance_id not in self._down:
            await self._stop(bootstrap)
            self._down.add(instance_id)
            self._up.discard(instance_id)

    async def _bootstrap(self, instance_id: str) -> NodeBootstrap | None:
        if instance_id not in self._user_data:
            assert self._ec2 is not None
            reply = await self._ec2.describe_instance_attribute(
                InstanceId=instance_id, Attribute="userData"
            )
            encoded = str(reply.get("UserData", {}).get("Value") or "")
            text = base64.b64decode(encoded).decode(errors="replace") if encoded else ""
            self._user_data[instance_id] = NodeBootstrap.decode(text)
        return self._user_data[instance_id]


def _vm(raw: Any) -> Instance:
    """Just what a kubelet registers with: the instance's id and addresses."""
    return Instance(
        id=raw["InstanceId"],
        name="",
        instance_type=str(raw.get("InstanceType", "")),
        image=str(raw.get("ImageId", "")),
        state="running",
        private_ip=str(raw.get("PrivateIpAddress") or ""),
        public_ip=raw.get("PublicIpAddress") or None,
        tags={},
        created_at=0.0,
        launched_at=None,
    )
