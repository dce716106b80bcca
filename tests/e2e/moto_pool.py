"""A NodePool on moto's EC2, for the tests that run the operator out of this process (from a
wheel's venv, from the image) with ``--cloud aws``: its AwsNodeClass, the pool, and EC2's own
record of the pool's instances as the oracle (never the operator's view).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from aiobotocore.session import AioSession

from nodepool_operator.api import AWSNODECLASSES, NODEPOOLS
from nodepool_operator.cloud import AwsCloud
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.testbed import (
    LaunchEnvironment,
    MotoKubelets,
    MotoServer,
    seed_launch_environment,
)
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import pool_manifest

#: A real EC2 type moto knows (2 vCPUs, 8 GiB); the operator is told to offer only it.
INSTANCE_TYPE = "m5.large"


@asynccontextmanager
async def operator_on_moto(
    env: OperatorEnv, moto: MotoServer, instance_types: Sequence[str] = (INSTANCE_TYPE,)
) -> AsyncIterator[OperatorEnv]:
    """``env`` with AwsCloud on moto offering ``instance_types``, and the moto stand-in kubelets
    (which read what a kubelet reads: the user data) registering its instances as Nodes. The
    env is cleaned up while AwsCloud is still open: the pools' finalizer needs it."""
    async with AwsCloud(endpoint_url=moto.endpoint_url, instance_types=list(instance_types)) as aws:
        env.provider = aws
        env.make_kubelets = lambda client: MotoKubelets(moto.endpoint_url, client)
        yield env
        await env.cleanup()


async def create_moto_pool(
    env: OperatorEnv, endpoint_url: str, name: str, **spec: Any
) -> LaunchEnvironment:
    """Seed moto for ``name`` (AMI parameter, subnets, group, profile), then create the
    AwsNodeClass and a NodePool of :data:`INSTANCE_TYPE` naming it, both called ``name``;
    what was seeded."""
    seeded = await seed_launch_environment(endpoint_url, name=name)
    node_class = {
        "apiVersion": AWSNODECLASSES.api_version,
        "kind": AWSNODECLASSES.kind,
        "metadata": {"name": name},
        "spec": seeded.node_class_spec(),
    }
    await env.create(AWSNODECLASSES, node_class)
    # m5.large's own figures: the pool states its nodes' capacity
    pool = pool_manifest(name, instanceType=INSTANCE_TYPE, cpu="2", memory="8Gi", **spec)
    pool["spec"]["nodeClassRef"] = {"name": name}
    await env.create(NODEPOOLS, pool)
    return seeded


async def ec2_states(endpoint_url: str, pool: str) -> list[str]:
    """Every EC2 (moto) instance of the pool, terminated ones too, by state, sorted."""
    async with AioSession().create_client("ec2", endpoint_url=endpoint_url) as ec2:
        reply = await ec2.describe_instances(
            Filters=[{"Name": f"tag:{POOL_LABEL}", "Values": [pool]}]
        )
    return sorted(i["State"]["Name"] for r in reply["Reservations"] for i in r["Instances"])


async def ec2_boots(endpoint_url: str, pool: str) -> dict[str, str]:
    """Each instance of the pool's private DNS name (its Node's name on EKS) and the user
    data EC2 holds for it (decoded), for nodeadm's check."""
    out: dict[str, str] = {}
    async with AioSession().create_client("ec2", endpoint_url=endpoint_url) as ec2:
        reply = await ec2.describe_instances(
            Filters=[{"Name": f"tag:{POOL_LABEL}", "Values": [pool]}]
        )
        for raw in (i for r in reply["Reservations"] for i in r["Instances"]):
            attribute = await ec2.describe_instance_attribute(
                InstanceId=raw["InstanceId"], Attribute="userData"
            )
            text = base64.b64decode(attribute["UserData"]["Value"]).decode()
            out[str(raw["PrivateDnsName"])] = text
    return out
