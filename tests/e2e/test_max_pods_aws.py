"""The template is the node, end to end on moto's EC2: the Autoscaler plans with the max
pods the node's kubelet will have (m5.large: 29, its ENI limit), so 30 one-millicore pods get
two nodes in one decision and the real kube-scheduler binds every one of them, none waiting
for a third scale-up.

The Autoscaler reads m5.large from AwsCloud's DescribeInstanceTypes and its node class's
kubelet settings; the NodePool controller launches each VM with AL2023 user data carrying
those settings; the moto kubelets register each Node from that user data and EC2 alone.

And the template is the node in its zone: a StatefulSet's pod whose claim is bound to a volume
pinned to one of the pool's zones gets an instance in that zone (EC2's Placement) and runs on
its Node.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from aiobotocore.session import AioSession

from kubeloop import NODES, PODS, NotFound
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.scheduling import classify
from nodepool_operator.testbed import MotoServer
from tests.e2e.conftest import OperatorEnv
from tests.e2e.moto_pool import create_moto_pool, ec2_states, operator_on_moto
from tests.e2e.test_autoscaler import BOTH, Timeline, autoscaler_manifest, names, pod_manifest
from tests.e2e.test_autoscaler_zones import zonal_stateful_set

pytestmark = pytest.mark.integration

#: m5.large's ENI limit: 3 ENIs x (10 addresses - 1) + 2.
MAX_PODS = 29
TINY = {"resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}


@pytest.fixture
async def aws_env(operator_env: OperatorEnv, moto: MotoServer) -> AsyncIterator[OperatorEnv]:
    async with operator_on_moto(operator_env, moto) as env:
        yield env


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("maxpods")


async def test_30_tiny_pods_on_m5_large_get_two_nodes(
    aws_env: OperatorEnv, moto: MotoServer, namespace: str
) -> None:
    env = aws_env
    pool, scaler = names(env)
    await create_moto_pool(env, moto.endpoint_url, pool, maxNodes=4)
    timeline = await Timeline.watch(env.client, pool, namespace)
    # every pod Unschedulable before the Autoscaler starts: its first decision sees all 30,
    # whatever the machine's speed
    for i in range(MAX_PODS + 1):
        await env.create(PODS, pod_manifest(f"t{i}", pool, container=TINY), namespace)

    async def all_unschedulable() -> bool:
        return len(timeline.unschedulable) == MAX_PODS + 1

    await env.eventually(all_unschedulable, "the scheduler to give up on all 30 pods")
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
    await env.start(controllers=BOTH)

    async def all_bound() -> dict[str, str] | None:
        pods = (await env.client.list(PODS, namespace))["items"]
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        return bound if len(bound) == MAX_PODS + 1 and all(bound.values()) else None

    try:
        bound = await env.eventually(all_bound, "all 30 pods to be bound", timeout=120)
    finally:
        await timeline.stop()
    assert bound is not None
    # one raise, straight to two (with the kubelet's default of 110 pods it would be 0, 1, 2)
    assert timeline.values == [0, 2]
    per_node = Counter(bound.values())
    assert sorted(per_node.values())[-1] <= MAX_PODS
    assert len(per_node) == 2
    nodes = (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
    assert {n["metadata"]["name"] for n in nodes} == set(per_node)
    assert {n["status"]["allocatable"]["pods"] for n in nodes} == {str(MAX_PODS)}
    assert (await env.client.get(NODEPOOLS, pool))["spec"]["targetNodes"] == 2
    assert await ec2_states(moto.endpoint_url, pool) == ["running", "running"]


async def test_a_statefulsets_pod_on_a_zonal_volume_gets_an_instance_in_that_zone(
    aws_env: OperatorEnv, moto: MotoServer, namespace: str
) -> None:
    env = aws_env
    pool, scaler = names(env)
    seeded = await create_moto_pool(env, moto.endpoint_url, pool, maxNodes=3)
    async with AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2:
        subnets = await ec2.describe_subnets(SubnetIds=list(seeded.subnet_ids))
    # the last zone by name: balancing alone would put a first node in the first
    zone = sorted({s["AvailabilityZone"] for s in subnets["Subnets"]})[-1]
    await zonal_stateful_set(env, namespace, pool, zone, TINY)

    async def unschedulable() -> bool:
        with contextlib.suppress(NotFound):
            return classify(await env.client.get(PODS, "db-0", namespace)).candidate
        return False

    await env.eventually(unschedulable, "db-0 Unschedulable", timeout=90)
    await env.start(controllers=BOTH)

    async def zoned() -> bool:
        return bool((await env.client.get(NODEPOOLS, pool)).get("status", {}).get("zones"))

    # the Autoscaler plans once the pool says its zones (as on a running cluster)
    await env.eventually(zoned, "the pool's status.zones")
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))

    async def bound() -> str | None:
        name = (await env.client.get(PODS, "db-0", namespace))["spec"].get("nodeName")
        return str(name) if name else None

    node_name = await env.eventually(bound, "db-0 bound", timeout=120)
    node = await env.client.get(NODES, str(node_name))
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == zone
    async with AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2:
        reply = await ec2.describe_instances(
            Filters=[{"Name": f"tag:{POOL_LABEL}", "Values": [pool]}]
        )
    placed = [
        i["Placement"]["AvailabilityZone"] for r in reply["Reservations"] for i in r["Instances"]
    ]
    assert placed == [zone]
    obj = await env.client.get(NODEPOOLS, pool)
    assert (obj["spec"]["targetNodes"], obj["spec"]["zoneTargets"]) == (1, {zone: 1})
