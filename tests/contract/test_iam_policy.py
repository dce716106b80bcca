"""config/iam/nodepool-operator-policy.json is the least policy: it allows every API action
AwsCloud makes, and nothing it does not make.

The actions are recorded from botocore's own ``before-call`` events while AwsCloud does every
port operation against moto's server. Two actions are not API calls but authorizations EC2
checks inside RunInstances: ec2:CreateTags (for its TagSpecifications) and iam:PassRole (for
its IamInstanceProfile); the test checks that the recorded RunInstances really carried both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiobotocore.session import AioSession

from nodepool_operator.cloud import AwsCloud, CreateRequest, LaunchSettings
from nodepool_operator.testbed import MotoServer

POLICY = Path(__file__).resolve().parents[2] / "config" / "iam" / "nodepool-operator-policy.json"
_PREFIX = {"ec2": "ec2", "ssm": "ssm", "eks": "eks"}


def policy_actions() -> set[str]:
    statements = json.loads(POLICY.read_text())["Statement"]
    actions: set[str] = set()
    for statement in statements:
        assert statement["Effect"] == "Allow"
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


async def test_the_policy_allows_exactly_the_actions_awscloud_makes(moto: MotoServer) -> None:
    called: set[str] = set()
    run_params: list[dict[str, Any]] = []

    def record(model: Any, **_: Any) -> None:
        called.add(f"{_PREFIX[model.service_model.endpoint_prefix]}:{model.name}")

    def record_launch(params: dict[str, Any], **_: Any) -> None:
        run_params.append(params)

    session = AioSession()
    async with (
        session.create_client("ssm", endpoint_url=moto.endpoint_url) as ssm,
        session.create_client("iam", endpoint_url=moto.endpoint_url) as iam,
        session.create_client("ec2", endpoint_url=moto.endpoint_url) as ec2,
        session.create_client("eks", endpoint_url=moto.endpoint_url) as eks,
    ):
        await eks.create_cluster(
            name="demo",
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": []},
        )
        ami = (await ec2.describe_images(Owners=["amazon"]))["Images"][0]["ImageId"]
        await ssm.put_parameter(Name="/nodes/ami", Value=ami, Type="String")
        await iam.create_instance_profile(InstanceProfileName="nodes")
    async with AwsCloud(endpoint_url=moto.endpoint_url, instance_types=["m5.large"]) as aws:
        for client in (aws._client, aws._ssm, aws._eks):
            assert client is not None
            client.meta.events.register("before-call", record)
        assert aws._client is not None
        aws._client.meta.events.register("before-parameter-build.ec2.RunInstances", record_launch)
        request = CreateRequest(
            name="pool-a",
            instance_type="m5.large",
            image="resolve:ssm:/nodes/ami",
            idempotency_token="tok-a",
            tags={"kubeloop.dev/nodepool": "pool"},
            launch=LaunchSettings(instance_profile="nodes"),
            user_data="#!/bin/sh\n",
        )
        vm = await aws.create(request)
        await aws.describe(vm.id)
        await aws.list({"kubeloop.dev/nodepool": "pool"})
        await aws.stop(vm.id)
        await aws.start(vm.id)
        await aws.delete(vm.id)
        await aws.instance_types()
        await aws.describe_cluster("demo")
        await aws.create(request)  # a repeat: answered from the token lookup

    assert run_params, "RunInstances was called"
    assert all(p["TagSpecifications"] for p in run_params), "tags are part of the launch"
    assert all("IamInstanceProfile" in p for p in run_params), "the profile's role is passed"
    authorizations = {"ec2:CreateTags", "iam:PassRole"}
    assert policy_actions() == called | authorizations
