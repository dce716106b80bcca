"""The demo's cloud: the simulated one (a SQLite file), or AwsCloud on a moto server the demo
starts on loopback (``--cloud aws``). Either way the demo counts VMs from the cloud's own
record (the SQLite file; moto's DescribeInstances), never from the operator.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiobotocore.session import AioSession

from kubeloop import ClusterConfig
from nodepool_operator.api import AWSNODECLASSES
from nodepool_operator.cloud import AwsCloud, CloudSnapshot, SimulatedCloud
from nodepool_operator.demo._workload import DEMO_LABEL, EC2_INSTANCE_TYPE
from nodepool_operator.testbed import (
    MotoServer,
    moto_vms,
    seed_launch_environment,
    simulated_vms,
)


class DemoCloud(Protocol):
    """What the demo needs of its cloud besides the operator's use of it."""

    name: str
    settings: dict[str, Any]
    """OperatorSettings fields that select this cloud."""

    async def snapshot(self) -> CloudSnapshot: ...

    def node_class(self, name: str) -> dict[str, Any] | None:
        """The AwsNodeClass to apply before the pool, or None."""
        ...

    def vm_side(self, config: ClusterConfig) -> contextlib.AbstractAsyncContextManager[Any]:
        """The VMs' kubelets, registering their Nodes while the context is open."""
        ...


class SimulatedDemoCloud:
    def __init__(self, path: Path) -> None:
        self.name = "simulated"
        self.settings: dict[str, Any] = {"cloud": "simulated", "cloud_state": path}
        self._path = path
        self._cloud: SimulatedCloud | None = None

    async def snapshot(self) -> CloudSnapshot:
        if self._cloud is None:  # the operator creates the file; open it once it runs
            self._cloud = await asyncio.to_thread(SimulatedCloud, self._path)
        return await asyncio.to_thread(self._cloud.snapshot)

    def node_class(self, name: str) -> dict[str, Any] | None:
        return None

    def vm_side(self, config: ClusterConfig) -> contextlib.AbstractAsyncContextManager[Any]:
        return simulated_vms(config, SimulatedCloud(self._path))


@dataclass
class MotoDemoCloud:
    moto: MotoServer
    census: AwsCloud
    spec: dict[str, Any]
    name: str = "aws"
    settings: dict[str, Any] = field(default_factory=dict)
    #: Each instance's user data, by id: EC2 never changes it, so each is asked for once.
    user_data: dict[str, str] = field(default_factory=dict)

    async def snapshot(self) -> CloudSnapshot:
        """EC2's record, each instance with the user data it was launched with
        (DescribeInstanceAttribute, the demo's own look: the operator never reads it back),
        so the report's ``cloud.json`` shows what each instance's nodeadm was given."""
        found = await self.census.snapshot()
        missing = [vm.id for vm in found.instances if vm.id not in self.user_data]
        if missing:
            async with AioSession().create_client(
                "ec2", endpoint_url=self.moto.endpoint_url
            ) as ec2:
                for instance_id in missing:
                    reply = await ec2.describe_instance_attribute(
                        InstanceId=instance_id, Attribute="userData"
                    )
                    encoded = str(reply.get("UserData", {}).get("Value") or "")
                    self.user_data[instance_id] = base64.b64decode(encoded).decode()
        instances = tuple(
            dataclasses.replace(vm, user_data=self.user_data[vm.id]) for vm in found.instances
        )
        return dataclasses.replace(found, instances=instances)

    def node_class(self, name: str) -> dict[str, Any] | None:
        return {
            "apiVersion": AWSNODECLASSES.api_version,
            "kind": AWSNODECLASSES.kind,
            "metadata": {"name": name, "labels": {DEMO_LABEL: "nodeclass"}},
            "spec": self.spec,
        }

    def vm_side(self, config: ClusterConfig) -> contextlib.AbstractAsyncContextManager[Any]:
        return moto_vms(config, self.moto.endpoint_url)


@contextlib.asynccontextmanager
async def moto_cloud(workdir: Path) -> AsyncIterator[MotoDemoCloud]:
    """Start moto's server, point this process's AWS chain at it (test credentials, a
    region), and seed what a node class names (AMI parameter, subnets, group, profile)."""
    moto = MotoServer(log=workdir / "moto.log")
    await asyncio.to_thread(moto.start)
    try:
        # The standard chain reads these; moto accepts any key.
        os.environ.update(moto.env())
        seeded = await seed_launch_environment(moto.endpoint_url)
        # AL2023 in the seeded EKS cluster: the instances boot with the operator's nodeadm
        # NodeConfig, which MotoKubelets registers their Nodes from (named after their
        # private DNS names)
        spec = {**seeded.node_class_spec(), "tags": {"demo": "kubeloop"}}
        async with AwsCloud(endpoint_url=moto.endpoint_url) as census:
            yield MotoDemoCloud(
                moto,
                census,
                spec,
                settings={
                    "cloud": "aws",
                    "aws_endpoint_url": moto.endpoint_url,
                    # one DescribeInstanceTypes call, not moto's 1400 types
                    "aws_instance_types": (EC2_INSTANCE_TYPE,),
                },
            )
    finally:
        await asyncio.to_thread(moto.stop)
