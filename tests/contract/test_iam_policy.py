"""config/iam/nodepool-operator-policy.json is the least policy: it allows every API action
AwsCloud makes, and nothing it does not make; what it allows is scoped to the cluster named by
its parameters (config/iam/README.md), and the VMs the operator launches carry the tags its
conditions ask for.

The actions are recorded from botocore's own ``before-call`` events while AwsCloud does every
port operation against moto's server. Two actions are not API calls but authorizations EC2
checks inside RunInstances: ec2:CreateTags (for its TagSpecifications) and iam:PassRole (for
its IamInstanceProfile); the test checks that the recorded RunInstances really carried both.

moto evaluates no policy conditions, so what the conditions ask is compared with what was
sent (the tags RunInstances carried) and what EC2 keeps (DescribeTags, DescribeVolumes);
parliament, which knows each action's resource types and condition keys, lints the policy,
and moto's IAM validates it as CreatePolicy does.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiobotocore.session import AioSession
from parliament import analyze_policy_string  # type: ignore[import-untyped]

from nodepool_operator.api import parse_nodeclass
from nodepool_operator.cloud import (
    EKS_CLUSTER_TAG,
    AwsCloud,
    CreateRequest,
    LaunchSettings,
    SelectorTerm,
    SqsQueue,
    cluster_tags,
)
from nodepool_operator.controllers._launch import launch_tags
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.nodepool._intent import create_request
from nodepool_operator.testbed import MotoServer, seed_launch_environment
from tests import factories

IAM = Path(__file__).resolve().parents[2] / "config" / "iam"
POLICY = IAM / "nodepool-operator-policy.json"
_PREFIX = {"ec2": "ec2", "ssm": "ssm", "eks": "eks", "sqs": "sqs"}
ACCOUNT = "123456789012"  # moto's
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/kubeloop-nodes"
QUEUE = "demo-interruptions"


def rendered(cluster: str, node_role: str = NODE_ROLE) -> dict[str, Any]:
    """The policy with its parameters filled in, as ``envsubst`` would (README's way)."""
    text = string.Template(POLICY.read_text()).substitute(
        CLUSTER_NAME=cluster,
        NODE_ROLE_ARN=node_role,
        AWS_ACCOUNT_ID=ACCOUNT,
        INTERRUPTION_QUEUE=QUEUE,
    )
    policy: dict[str, Any] = json.loads(text)
    return policy


def statements(policy: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        yield statement


def listed(statement: dict[str, Any], key: str) -> list[str]:
    value = statement[key]
    return [value] if isinstance(value, str) else list(value)


def policy_actions(policy: dict[str, Any]) -> set[str]:
    return {action for s in statements(policy) for action in listed(s, "Action")}


def granting(policy: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in statements(policy) if action in listed(s, "Action")]


def test_the_parameters_are_the_documented_ones() -> None:
    used = set(re.findall(r"\$\{([A-Z_]+)\}", POLICY.read_text()))
    assert used == {"CLUSTER_NAME", "NODE_ROLE_ARN", "AWS_ACCOUNT_ID", "INTERRUPTION_QUEUE"}
    readme = (IAM / "README.md").read_text()
    for name in used:
        assert f"`{name}`" in readme, f"config/iam/README.md documents {name}"


def test_passrole_names_only_the_node_role_and_only_to_ec2() -> None:
    (statement,) = granting(rendered("demo"), "iam:PassRole")
    assert listed(statement, "Resource") == [NODE_ROLE]
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


def test_terminate_stop_start_only_the_clusters_instances() -> None:
    policy = rendered("demo")
    for action in ("ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances"):
        (statement,) = granting(policy, action)
        assert statement["Condition"] == {
            "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"}
        }, action


def test_launch_only_with_the_clusters_tags_on_instance_and_volume() -> None:
    policy = rendered("demo")
    tagged = [s for s in granting(policy, "ec2:RunInstances") if "Condition" in s]
    (statement,) = tagged
    assert sorted(r.rsplit(":", 1)[1] for r in listed(statement, "Resource")) == [
        "instance/*",
        "volume/*",
    ]
    assert statement["Condition"]["StringEquals"] == {
        f"aws:RequestTag/{key}": value for key, value in cluster_tags("demo").items()
    }


def test_parliament_finds_nothing() -> None:
    """Each action's resources and condition keys are ones AWS documents for it. RunInstances
    is split in two statements (only the instance and volume carry the request's tags), which
    parliament reads one by one; merged, they must cover every resource it needs."""
    policy = rendered("demo")
    findings = analyze_policy_string(json.dumps(policy)).findings
    assert {f.issue for f in findings} <= {"RESOURCE_MISMATCH"}, findings
    assert all({d["action"] for d in f.detail} == {"ec2:RunInstances"} for f in findings), findings
    launch = granting(policy, "ec2:RunInstances")
    merged = {
        "Version": policy["Version"],
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "ec2:RunInstances",
                "Resource": [r for s in launch for r in listed(s, "Resource")],
            }
        ],
    }
    assert analyze_policy_string(json.dumps(merged)).findings == []


@pytest.mark.integration
async def test_moto_iam_accepts_the_policy(moto: MotoServer) -> None:
    async with AioSession().create_client("iam", endpoint_url=moto.endpoint_url) as iam:
        reply = await iam.create_policy(
            PolicyName="nodepool-operator", PolicyDocument=json.dumps(rendered("demo"))
        )
    assert reply["Policy"]["PolicyName"] == "nodepool-operator"


def test_node_classes_may_not_set_the_ownership_tags() -> None:
    for key in cluster_tags("demo"):
        with pytest.raises(ValueError, match="reserved"):
            parse_nodeclass(factories.nodeclass(tags={key: "x"}))


@pytest.mark.integration
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
        session.create_client("sqs", endpoint_url=moto.endpoint_url) as sqs,
    ):
        url = (await sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
        await sqs.send_message(QueueUrl=url, MessageBody="{}")
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
            tags={**cluster_tags("demo"), "kubeloop.dev/nodepool": "pool"},
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
        await aws.subnets([SelectorTerm(tags=(("Name", "*"),))])
        await aws.security_groups([SelectorTerm(name="default")])
        await aws.create(request)  # a repeat: answered from the token lookup
        await aws.create(replace(request, idempotency_token="tok-b", capacity_type="spot"))
    async with SqsQueue(QUEUE, endpoint_url=moto.endpoint_url, wait_seconds=0) as queue:
        queue.client.meta.events.register("before-call", record)
        # the queue's calls as the interruption source makes them (GetQueueUrl was made
        # before the hook: asked again here through a second opening's client)
        await queue.client.get_queue_url(QueueName=QUEUE)
        (message,) = await queue.receive()
        await queue.delete(message)

    assert run_params, "RunInstances was called"
    assert all(p["TagSpecifications"] for p in run_params), "tags are part of the launch"
    assert all("IamInstanceProfile" in p for p in run_params), "the profile's role is passed"
    assert [p.get("InstanceMarketOptions", {}).get("MarketType") for p in run_params] == [
        None,
        "spot",
    ]
    authorizations = {"ec2:CreateTags", "iam:PassRole"}
    assert policy_actions(rendered("demo")) == called | authorizations


@pytest.mark.integration
async def test_a_pools_vm_and_its_volume_carry_what_the_policy_asks(moto: MotoServer) -> None:
    """Through the pool's own create request (node class naming the cluster): RunInstances
    tags the instance and its volume with every ``aws:RequestTag`` the launch statement
    requires and the pool label; EC2 keeps them (DescribeTags, DescribeVolumes), so the
    ``aws:ResourceTag`` the terminate, stop and start statement requires is there."""
    env = await seed_launch_environment(moto.endpoint_url, name="shop")
    node_class = parse_nodeclass(
        factories.nodeclass("general", **env.node_class_spec(), tags={"team": "platform"})
    ).spec
    request = create_request(
        pool_name="web",
        pool_uid="uid-1",
        instance_type="m5.large",
        name="web-0a1b2",
        user_data="#!/bin/sh\n",
        node_class=node_class,
    )
    policy = rendered(env.cluster_name)
    (launch,) = [s for s in granting(policy, "ec2:RunInstances") if "Condition" in s]
    asked = {
        key.removeprefix("aws:RequestTag/"): value
        for key, value in launch["Condition"]["StringEquals"].items()
    }
    (manage,) = granting(policy, "ec2:TerminateInstances")
    kept = {
        key.removeprefix("aws:ResourceTag/"): value
        for key, value in manage["Condition"]["StringEquals"].items()
    }
    assert asked
    assert kept

    sent: list[dict[str, Any]] = []
    async with AwsCloud(endpoint_url=moto.endpoint_url, instance_types=["m5.large"]) as aws:
        assert aws._client is not None
        aws._client.meta.events.register(
            "before-parameter-build.ec2.RunInstances",
            lambda params, **_: sent.append(params),
        )
        vm = await aws.create(request)
    (params,) = sent
    by_type = {
        spec["ResourceType"]: {t["Key"]: t["Value"] for t in spec["Tags"]}
        for spec in params["TagSpecifications"]
    }
    assert set(by_type) == {"instance", "volume"}
    for tags in by_type.values():
        assert asked.items() <= tags.items()
        assert tags[POOL_LABEL] == "web"
        assert tags[EKS_CLUSTER_TAG] == "shop"
        assert tags["team"] == "platform"

    async with AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2:
        volumes = (
            await ec2.describe_volumes(
                Filters=[{"Name": "attachment.instance-id", "Values": [vm.id]}]
            )
        )["Volumes"]
        assert len(volumes) == 1
        volume_id = volumes[0]["VolumeId"]
        for resource in (vm.id, volume_id):
            described = (
                await ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [resource]}])
            )["Tags"]
            tags = {t["Key"]: t["Value"] for t in described}
            assert asked.items() <= tags.items(), resource
            assert kept.items() <= tags.items(), resource
            assert tags[POOL_LABEL] == "web", resource
        volume_tags = {t["Key"]: t["Value"] for t in volumes[0].get("Tags", [])}
        assert kept.items() <= volume_tags.items()
        # what the policy's condition filters on finds the VM (and only through the tag)
        owned = await ec2.describe_instances(
            Filters=[{"Name": f"tag:kubernetes.io/cluster/{env.cluster_name}", "Values": ["owned"]}]
        )
        assert [i["InstanceId"] for r in owned["Reservations"] for i in r["Instances"]] == [vm.id]


def test_a_class_without_cluster_adds_no_ownership_tags() -> None:
    spec = parse_nodeclass(factories.nodeclass(tags={"team": "a"})).spec
    assert launch_tags(spec, {"owner": "x"}) == {"team": "a", "owner": "x"}
    assert launch_tags(None, {"owner": "x"}) == {"owner": "x"}
