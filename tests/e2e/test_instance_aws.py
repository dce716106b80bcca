"""The Instance controller (the seeds' EC2Instance) on AwsCloud against moto's EC2 server.

The Instance names an AwsNodeClass; the oracle is moto's DescribeInstances, read with a
plain EC2 client of the test's own (never the operator's AwsCloud): the VM is launched into
the class's subnets and security group with its instance profile and tags, the status
reports what EC2 reports, and drift made through EC2 itself (a StopInstances or
TerminateInstances the operator did not send) is repaired.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiobotocore.session import AioSession

from kubeloop import EVENTS
from nodepool_operator.api import AWSNODECLASSES, INSTANCES
from nodepool_operator.cloud import AwsCloud
from nodepool_operator.controllers.instance import UID_TAG
from nodepool_operator.testbed import LaunchEnvironment, MotoServer, seed_launch_environment
from tests import factories
from tests.e2e.conftest import OperatorEnv

pytestmark = pytest.mark.integration

DRIFT = 1.0


@pytest.fixture
async def aws_env(
    operator_env: OperatorEnv, moto: MotoServer
) -> AsyncIterator[tuple[OperatorEnv, Any, LaunchEnvironment]]:
    """The operator env with AwsCloud on moto, a seeded account, and the test's EC2 client."""
    seeded = await seed_launch_environment(moto.endpoint_url)
    async with (
        AwsCloud(endpoint_url=moto.endpoint_url, instance_types=["m5.large", "c5.large"]) as aws,
        AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2,
    ):
        operator_env.provider = aws
        yield operator_env, ec2, seeded
        await operator_env.cleanup()  # while AwsCloud is open: the finalizer needs it


def _nodeclass(name: str, seeded: LaunchEnvironment) -> dict[str, Any]:
    return {
        "apiVersion": AWSNODECLASSES.api_version,
        "kind": AWSNODECLASSES.kind,
        "metadata": {"name": name},
        "spec": {
            **seeded.node_class_spec(),
            "userData": "#!/bin/sh\necho ${nodeName}\n",
            "tags": {"team": "platform"},
        },
    }


def _instance(name: str, node_class: str, ami: str) -> dict[str, Any]:
    return factories.instance(name, image=ami, nodeClassRef={"name": node_class})


async def _status(env: OperatorEnv, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (await env.client.get(INSTANCES, name, ns)).get("status", {})
    return status


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})


async def _running(
    env: OperatorEnv, ns: str, name: str, other_than: str | None = None
) -> dict[str, Any]:
    async def probe() -> dict[str, Any]:
        status = await _status(env, ns, name)
        ok = status.get("state") == "running" and status.get("instanceId") not in (
            None,
            other_than,
        )
        return status if ok and _ready(status).get("status") == "True" else {}

    return await env.eventually(probe, f"Instance {name} to report a running VM")


async def _ec2_instances(ec2: Any, uid: str) -> list[dict[str, Any]]:
    """Every instance EC2 (moto) holds for this Instance, terminated ones too."""
    reply = await ec2.describe_instances(Filters=[{"Name": f"tag:{UID_TAG}", "Values": [uid]}])
    return [i for r in reply["Reservations"] for i in r["Instances"]]


async def _live(ec2: Any, uid: str) -> list[dict[str, Any]]:
    return [i for i in await _ec2_instances(ec2, uid) if i["State"]["Name"] != "terminated"]


async def test_instance_launches_with_its_node_class_and_reports_what_ec2_reports(
    aws_env: tuple[OperatorEnv, Any, LaunchEnvironment], kube_namespace: str
) -> None:
    env, ec2, seeded = aws_env
    ns = kube_namespace
    await env.create(AWSNODECLASSES, _nodeclass(f"nc-{env.run_id}", seeded))
    await env.start(controllers=("instance",))
    obj = await env.create(
        INSTANCES, _instance("web", f"nc-{env.run_id}", seeded.ami_id), namespace=ns
    )
    uid = obj["metadata"]["uid"]

    status = await _running(env, ns, "web")
    (raw,) = await _live(ec2, uid)
    assert status["instanceId"] == raw["InstanceId"]
    assert status["publicIP"] == raw["PublicIpAddress"]
    assert status["lastCheckedAt"]
    assert raw["State"]["Name"] == "running"
    assert raw["InstanceType"] == "m5.large"
    assert raw["ImageId"] == seeded.ami_id
    assert raw["SubnetId"] in seeded.subnet_ids
    assert [g["GroupId"] for g in raw["SecurityGroups"]] == [seeded.security_group_id]
    assert raw["IamInstanceProfile"]["Arn"].endswith(f"/{seeded.instance_profile}")
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags["team"] == "platform"
    assert tags[UID_TAG] == uid
    assert tags["Name"] == f"{ns}/web"


async def test_drift_made_through_ec2_is_repaired(
    aws_env: tuple[OperatorEnv, Any, LaunchEnvironment], kube_namespace: str
) -> None:
    env, ec2, seeded = aws_env
    ns = kube_namespace
    await env.create(AWSNODECLASSES, _nodeclass(f"nc-{env.run_id}", seeded))
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    obj = await env.create(
        INSTANCES, _instance("db", f"nc-{env.run_id}", seeded.ami_id), namespace=ns
    )
    uid = obj["metadata"]["uid"]
    first = (await _running(env, ns, "db"))["instanceId"]

    # stopped by someone with console access: started again, not replaced
    await ec2.stop_instances(InstanceIds=[first])

    async def started_again() -> bool:
        (raw,) = await _live(ec2, uid)
        status = await _status(env, ns, "db")
        return raw["State"]["Name"] == "running" and status.get("state") == "running"

    await env.eventually(started_again, "the stopped VM to be started again")
    events = (await env.client.list(EVENTS, ns))["items"]
    assert any(
        e["reason"] == "DriftRepaired" and "stopped" in e["note"] and first in e["note"]
        for e in events
    )
    assert [i["InstanceId"] for i in await _ec2_instances(ec2, uid)] == [first]

    # terminated behind the back: replaced by exactly one new instance
    await ec2.terminate_instances(InstanceIds=[first])
    status = await _running(env, ns, "db", other_than=first)
    live = await _live(ec2, uid)
    assert [i["InstanceId"] for i in live] == [status["instanceId"]]
    assert len(await _ec2_instances(ec2, uid)) == 2

    # deleting the Instance terminates its instance (the finalizer)
    await env.client.delete(INSTANCES, "db", ns)

    async def gone() -> bool:
        return not await _live(ec2, uid)

    await env.eventually(gone, "the Instance's instance to be terminated")


async def test_a_missing_node_class_is_reported_and_picked_up_once_created(
    aws_env: tuple[OperatorEnv, Any, LaunchEnvironment], kube_namespace: str
) -> None:
    env, ec2, seeded = aws_env
    ns = kube_namespace
    name = f"nc-{env.run_id}"
    await env.start(controllers=("instance",))
    obj = await env.create(INSTANCES, _instance("late", name, seeded.ami_id), namespace=ns)
    uid = obj["metadata"]["uid"]

    async def reported() -> dict[str, Any]:
        ready = _ready(await _status(env, ns, "late"))
        return ready if ready.get("reason") == "NodeClassUnavailable" else {}

    ready = await env.eventually(reported, "Ready=False with reason NodeClassUnavailable")
    assert ready["status"] == "False"
    assert name in ready["message"]
    assert await _ec2_instances(ec2, uid) == [], "nothing is launched without the class"

    await env.create(AWSNODECLASSES, _nodeclass(name, seeded))
    status = await _running(env, ns, "late")
    assert [i["InstanceId"] for i in await _live(ec2, uid)] == [status["instanceId"]]
