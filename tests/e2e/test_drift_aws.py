"""Drift on EC2 (moto's server): a new AMI put in the node class's SSM parameter rolls the
pool node by node, each replacement launched before the drifted node is drained.

The pool's two nodes boot the AMI the parameter holds; the test registers another AMI in
moto and puts its id in the parameter, as EKS publishes a new node AMI. Oracles: the
apiserver's watch of the pool's Nodes (never two tainted for removal or deleted at once,
the budget being one node), of the Deployment's pods (each one deleted was evicted through
the Eviction API) and EC2's own record of the pool's instances (every running one on the
new AMI, every one on the old AMI terminated). The operator resolves the parameter every
second here (``image_resolve_seconds``) instead of every five minutes, and restarts once
in the middle of the roll.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiobotocore.session import AioSession

from kubeloop.envtest import ControlPlane
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.testbed import MotoServer
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    PodWatch,
    Requests,
    available,
    deployment,
    events,
    is_evicted,
    is_ready_untainted,
    nodes_of,
    settled_nodes,
)
from tests.e2e.moto_pool import create_moto_pool, operator_on_moto
from tests.e2e.test_budget import Disrupted

pytestmark = pytest.mark.integration

NODES = 2


@pytest.fixture
async def aws_env(operator_env: OperatorEnv, moto: MotoServer) -> AsyncIterator[OperatorEnv]:
    async with operator_on_moto(operator_env, moto) as env:
        yield env


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("drift")


async def instances(endpoint_url: str, pool: str) -> list[tuple[str, str]]:
    """Each EC2 instance of the pool, terminated ones too: (state, AMI)."""
    async with AioSession().create_client("ec2", endpoint_url=endpoint_url) as ec2:
        reply = await ec2.describe_instances(
            Filters=[{"Name": f"tag:{POOL_LABEL}", "Values": [pool]}]
        )
    found = [i for r in reply["Reservations"] for i in r["Instances"]]
    return sorted((i["State"]["Name"], i["ImageId"]) for i in found)


async def publish_new_ami(endpoint_url: str, parameter: str) -> str:
    """Register another AMI and put its id in ``parameter`` (what EKS does per release)."""
    session = AioSession()
    async with (
        session.create_client("ec2", endpoint_url=endpoint_url) as ec2,
        session.create_client("ssm", endpoint_url=endpoint_url) as ssm,
    ):
        image = await ec2.register_image(
            Name=f"{parameter.strip('/').replace('/', '-')}-next",
            Architecture="x86_64",
            RootDeviceName="/dev/xvda",
            VirtualizationType="hvm",
            BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20}}],
        )
        ami = str(image["ImageId"])
        await ssm.put_parameter(Name=parameter, Value=ami, Type="String", Overwrite=True)
    return ami


async def test_a_new_ami_in_ssm_rolls_the_pool_node_by_node(
    aws_env: OperatorEnv, moto: MotoServer, namespace: str
) -> None:
    env = aws_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"drift-{env.run_id}"
    seeded = await create_moto_pool(
        env,
        moto.endpoint_url,
        name,
        targetNodes=NODES,
        maxNodes=NODES + 2,
        disruption={"budgets": [{"nodes": "1"}]},
    )
    await env.start(controllers=("nodepool",), image_resolve_seconds=1.0)
    old_nodes = await settled_nodes(env, name, NODES)
    assert await instances(moto.endpoint_url, name) == [("running", seeded.ami_id)] * NODES

    web = deployment(NODES)
    web["spec"]["template"]["spec"]["nodeSelector"] = {POOL_LABEL: name}
    await env.create(DEPLOYMENTS_RES, web, namespace)

    async def serving() -> bool:
        return await available(env, namespace, NODES)

    await env.eventually(serving, "the Deployment's pods available", timeout=90)
    nodes, pods = Disrupted(env, name), PodWatch(env, namespace)
    await nodes.start()
    await pods.start()
    try:
        new_ami = await publish_new_ami(moto.endpoint_url, seeded.ami_parameter)

        async def first_retired() -> bool:
            return bool(nodes.ever)

        await env.eventually(first_retired, "the first drifted node tainted", timeout=120)
        # a restart mid-roll: the new operator reads the marks, taints and records back from
        # the cluster and resolves the parameter anew; still one node at a time
        await env.stop()
        await env.start(controllers=("nodepool",), image_resolve_seconds=1.0)

        async def rolled() -> list[tuple[str, str]]:
            found = await instances(moto.endpoint_url, name)
            running = [ami for state, ami in found if state == "running"]
            old_left = [state for state, ami in found if ami != new_ami and state != "terminated"]
            done = running == [new_ami] * NODES and not old_left
            ready = [n for n in await nodes_of(env, name) if is_ready_untainted(n)]
            return found if done and len(ready) == NODES else []

        final = await env.eventually(rolled, "the pool rolled onto the new AMI", timeout=240)
        await env.eventually(serving, "the Deployment's pods available again", timeout=90)
    finally:
        await nodes.stop()
        await pods.stop()

    # EC2: every instance on the old AMI terminated, as many on the new one running, and
    # no replacement launched for nothing
    assert final == sorted([("running", new_ami)] * NODES + [("terminated", seeded.ami_id)] * NODES)
    # node by node: each old node tainted for removal, never two at once
    assert set(old_nodes) <= nodes.ever
    assert nodes.most == 1
    # every pod that went was evicted (PodDisruptionBudgets honoured), none deleted outright
    assert pods.final
    assert all(is_evicted(p) for p in pods.final.values())
    assert requests.pod_deletes() == 0
    assert requests.evictions() >= len(pods.final)
    detected = await events(env, name, "DriftDetected")
    assert detected
    assert all("ImageDrift" in note for note in detected)
    retired = await events(env, name, "Drifted")
    assert all(any(f"node {old} " in note for note in retired) for old in old_nodes)
