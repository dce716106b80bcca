"""One contract, two clouds: the CloudProvider port's promises, checked against
:class:`SimulatedCloud` and against :class:`AwsCloud` talking to moto's EC2 server on loopback.

Every test in the first part runs on both (ids ``[simulated]`` and ``[aws-moto]``); the
oracle is the provider's own answers (describe, list), which for AwsCloud are moto's records
over the wire. Faults moto's server cannot produce (no capacity, an account quota, injected
throttling) are checked on the simulated cloud only, in the tests named ``simulated_only``;
the mapping of EC2's codes for them is covered by
tests/unit/nodepool_operator/cloud/test_aws_errors.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodepool_operator.cloud import (
    MAX_TOKEN_LENGTH,
    AwsCloud,
    CapacityUnavailable,
    CloudProvider,
    CreateRequest,
    GiB,
    IdempotencyMismatch,
    InstanceNotFound,
    InvalidRequest,
    LaunchSettings,
    QuotaExceeded,
    SelectorTerm,
    SimulatedCloud,
    TransientCloudError,
)
from nodepool_operator.testbed import MotoServer

#: Types both clouds offer, with EC2's figures (ENI max pods: enis * (ips - 1) + 2).
EXPECTED_TYPES = {  # vCPUs, memory, ENI max-pods, NVIDIA GPUs
    "m5.large": (2, 8 * GiB, 29, 0),
    "c5.xlarge": (4, 8 * GiB, 58, 0),
    "r5.xlarge": (4, 32 * GiB, 58, 0),
    "m5.4xlarge": (16, 64 * GiB, 234, 0),
    "g4dn.xlarge": (4, 16 * GiB, 29, 1),
    "g4dn.12xlarge": (48, 192 * GiB, 234, 4),
}
UNKNOWN_ID = "i-0123456789abcdef0"


@pytest.fixture(params=["simulated", pytest.param("aws-moto", marks=pytest.mark.integration)])
async def cloud(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CloudProvider]:
    if request.param == "simulated":
        yield SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0.0)
        return
    moto: MotoServer = request.getfixturevalue("moto")
    # page_size 5 (EC2's least) so listing a handful of VMs takes several pages
    async with AwsCloud(
        endpoint_url=moto.endpoint_url, instance_types=sorted(EXPECTED_TYPES), page_size=5
    ) as aws:
        yield aws


def req(name: str = "pool-a", token: str | None = None, **overrides: object) -> CreateRequest:
    fields: dict[str, object] = {
        "name": name,
        "instance_type": "m5.large",
        "image": "ami-0abcdef1234567890",
        "idempotency_token": token or f"tok-{name}",
        "tags": {"kubeloop.dev/nodepool": "pool", "team": "a"},
    }
    fields.update(overrides)
    return CreateRequest(**fields)  # type: ignore[arg-type]


# -- both clouds ------------------------------------------------------------------------------


async def test_create_launches_a_vm_as_requested_and_describe_agrees(
    cloud: CloudProvider,
) -> None:
    vm = await cloud.create(req())
    assert vm.id
    assert (vm.name, vm.instance_type, vm.image) == ("pool-a", "m5.large", "ami-0abcdef1234567890")
    assert vm.tags == {"kubeloop.dev/nodepool": "pool", "team": "a"}
    assert vm.state in ("pending", "running")
    again = await cloud.describe(vm.id)
    assert (again.id, again.name, again.tags) == (vm.id, vm.name, vm.tags)
    assert again.state in ("pending", "running")
    assert again.private_ip


async def test_repeating_a_create_returns_the_same_vm_and_launches_no_second(
    cloud: CloudProvider,
) -> None:
    first = await cloud.create(req())
    for _ in range(3):
        assert (await cloud.create(req())).id == first.id
    listed = await cloud.list({"kubeloop.dev/nodepool": "pool"})
    assert [vm.id for vm in listed] == [first.id]


async def test_a_token_reused_with_other_arguments_is_a_mismatch(cloud: CloudProvider) -> None:
    first = await cloud.create(req())
    with pytest.raises(IdempotencyMismatch):
        await cloud.create(req(token=first_token(), instance_type="c5.xlarge"))
    with pytest.raises(IdempotencyMismatch):
        await cloud.create(req(token=first_token(), tags={"other": "tags"}))
    assert [vm.id for vm in await cloud.list({})] == [first.id]


def first_token() -> str:
    return req().idempotency_token


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"idempotency_token": ""}, id="no-token"),
        pytest.param({"idempotency_token": "x" * (MAX_TOKEN_LENGTH + 1)}, id="token-too-long"),
        pytest.param({"idempotency_token": "tok\n1"}, id="token-not-printable"),
        pytest.param({"name": ""}, id="no-name"),
        pytest.param({"instance_type": "nonexistent.huge"}, id="unknown-type"),
    ],
)
async def test_requests_that_can_never_succeed_are_invalid_and_launch_nothing(
    cloud: CloudProvider, bad: dict[str, object]
) -> None:
    fields = {"name": "pool-a", "idempotency_token": "tok-a", **bad}
    with pytest.raises(InvalidRequest):
        await cloud.create(req(**fields))  # type: ignore[arg-type]
    assert await cloud.list({}) == []


async def test_a_token_of_the_longest_allowed_length_is_accepted(cloud: CloudProvider) -> None:
    vm = await cloud.create(req(token="t" * MAX_TOKEN_LENGTH))
    assert (await cloud.create(req(token="t" * MAX_TOKEN_LENGTH))).id == vm.id


async def test_delete_terminates_is_idempotent_and_list_forgets_the_vm(
    cloud: CloudProvider,
) -> None:
    vm = await cloud.create(req())
    await cloud.delete(vm.id)
    await cloud.delete(vm.id)
    await cloud.delete(UNKNOWN_ID)  # never existed: not an error either
    assert (await cloud.describe(vm.id)).state == "terminated"
    assert await cloud.list({}) == []


async def test_a_token_whose_vm_was_terminated_returns_it_terminated(
    cloud: CloudProvider,
) -> None:
    """A token names one VM for good: a lost VM is replaced under a new token, never by
    repeating the old one (which would hand out a second VM for one intent)."""
    vm = await cloud.create(req())
    await cloud.delete(vm.id)
    again = await cloud.create(req())
    assert (again.id, again.state) == (vm.id, "terminated")
    assert await cloud.list({}) == []


async def test_describe_of_an_id_never_launched_is_not_found(cloud: CloudProvider) -> None:
    with pytest.raises(InstanceNotFound):
        await cloud.describe(UNKNOWN_ID)
    with pytest.raises(InstanceNotFound):
        await cloud.start(UNKNOWN_ID)
    with pytest.raises(InstanceNotFound):
        await cloud.stop(UNKNOWN_ID)


async def test_list_matches_every_given_tag_across_pages(cloud: CloudProvider) -> None:
    """Seven VMs of one pool and two of another: with AwsCloud's page size of 5 the pool's
    list spans two DescribeInstances pages."""
    ours = [await cloud.create(req(f"a-{i}", tags={"pool": "a", "team": "x"})) for i in range(7)]
    theirs = [await cloud.create(req(f"b-{i}", tags={"pool": "b", "team": "x"})) for i in range(2)]
    await cloud.delete(ours[0].id)
    listed = await cloud.list({"pool": "a"})
    assert sorted(vm.id for vm in listed) == sorted(vm.id for vm in ours[1:])
    assert sorted(vm.id for vm in await cloud.list({"pool": "a", "team": "x"})) == sorted(
        vm.id for vm in ours[1:]
    )
    assert await cloud.list({"pool": "a", "team": "y"}) == []
    everything = await cloud.list({})
    assert sorted(vm.id for vm in everything) == sorted(vm.id for vm in ours[1:] + theirs)


async def test_stop_and_start(cloud: CloudProvider) -> None:
    vm = await cloud.create(req())
    await cloud.stop(vm.id)
    await cloud.stop(vm.id)  # already stopped: left alone
    stopped = await cloud.describe(vm.id)
    assert stopped.state == "stopped"
    assert stopped.public_ip is None, "a stopped VM has given its public address up"
    assert [v.state for v in await cloud.list({})] == ["stopped"], "stopped VMs are listed"
    await cloud.start(vm.id)
    await cloud.start(vm.id)  # already booting or running: left alone
    assert (await cloud.describe(vm.id)).state in ("pending", "running")


async def test_stop_or_start_of_a_terminated_vm_is_invalid(cloud: CloudProvider) -> None:
    vm = await cloud.create(req())
    await cloud.delete(vm.id)
    with pytest.raises(InvalidRequest):
        await cloud.start(vm.id)
    with pytest.raises(InvalidRequest):
        await cloud.stop(vm.id)


async def test_catalogue_has_ec2s_figures(cloud: CloudProvider) -> None:
    offered = {t.name: t for t in await cloud.instance_types()}
    for name, (cpu, memory, pods, gpus) in EXPECTED_TYPES.items():
        assert name in offered, name
        t = offered[name]
        assert (t.cpu_cores, t.memory_bytes, t.pods, t.gpus) == (cpu, memory, pods, gpus), name
        assert t.disk_bytes > 0


# -- AwsCloud only: what EC2 does that the simulated cloud has no need to -----------------------


@pytest.mark.integration
async def test_aws_a_fresh_vm_unknown_to_describe_is_transient_not_gone(
    moto: MotoServer,
) -> None:
    """EC2 may not know an instance for a while after RunInstances returned it. Here moto's
    server really forgets it (a reset right after the launch): describe must say "try again"
    while the id is fresh, and only afterwards "not found"."""
    now = [0.0]
    async with AwsCloud(
        endpoint_url=moto.endpoint_url, consistency_seconds=30.0, clock=lambda: now[0]
    ) as aws:
        vm = await aws.create(req())
        moto.reset()
        with pytest.raises(TransientCloudError):
            await aws.describe(vm.id)
        with pytest.raises(TransientCloudError):
            await aws.delete(vm.id)  # not "already gone": it may well exist
        now[0] = 31.0
        with pytest.raises(InstanceNotFound):
            await aws.describe(vm.id)
        await aws.delete(vm.id)


@pytest.mark.integration
async def test_aws_launch_settings_reach_ec2_and_a_changed_setting_is_a_mismatch(
    moto: MotoServer,
) -> None:
    from aiobotocore.session import AioSession

    from nodepool_operator.cloud import LaunchSettings

    session = AioSession()
    async with (
        session.create_client("ec2", endpoint_url=moto.endpoint_url) as ec2,
        session.create_client("ssm", endpoint_url=moto.endpoint_url) as ssm,
        session.create_client("iam", endpoint_url=moto.endpoint_url) as iam,
        AwsCloud(endpoint_url=moto.endpoint_url) as aws,
    ):
        vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
        subnets = [s["SubnetId"] for s in (await ec2.describe_subnets())["Subnets"][:2]]
        group = (await ec2.create_security_group(GroupName="nodes", Description="n", VpcId=vpc))[
            "GroupId"
        ]
        ami = (await ec2.describe_images(Owners=["amazon"]))["Images"][0]["ImageId"]
        param = f"/kubeloop/test/{uuid.uuid4().hex[:6]}/ami"
        await ssm.put_parameter(Name=param, Value=ami, Type="String")
        await iam.create_instance_profile(InstanceProfileName="nodes")
        launch = LaunchSettings(
            subnets=tuple(subnets),
            security_groups=(group,),
            instance_profile="nodes",
        )
        script = "#!/bin/sh\necho hello\n"
        vm = await aws.create(req(image=f"resolve:ssm:{param}", launch=launch, user_data=script))
        assert vm.image == f"resolve:ssm:{param}", "reported as asked, so drift checks agree"
        raw = (await ec2.describe_instances(InstanceIds=[vm.id]))["Reservations"][0]["Instances"][0]
        assert raw["ImageId"] == ami
        assert vm.image_id == ami, "the AMI it booted, for drift"
        assert await aws.resolve_image(f"resolve:ssm:{param}") == ami
        assert await aws.resolve_image(ami) == ami  # an id is its own answer
        assert raw["SubnetId"] in subnets
        assert [g["GroupId"] for g in raw["SecurityGroups"]] == [group]
        assert raw["IamInstanceProfile"]["Arn"].endswith("/nodes")
        user_data = await ec2.describe_instance_attribute(InstanceId=vm.id, Attribute="userData")
        assert user_data["UserData"]["Value"]
        again = await aws.create(req(image=f"resolve:ssm:{param}", launch=launch, user_data=script))
        assert again.id == vm.id
        other = LaunchSettings(subnets=tuple(subnets), security_groups=())
        with pytest.raises(IdempotencyMismatch):
            await aws.create(req(image=f"resolve:ssm:{param}", launch=other, user_data=script))
        with pytest.raises(IdempotencyMismatch):
            await aws.create(req(image=f"resolve:ssm:{param}", launch=launch, user_data="other"))


@pytest.mark.integration
async def test_aws_security_groups_by_tags_name_or_id(moto: MotoServer) -> None:
    """A node class's security group selector terms as DescribeSecurityGroups answers them
    (issue 21 item 4): every tag of a term must match (``"*"``: the key alone), a name or an
    id picks its group, and the terms are ORed."""
    from aiobotocore.session import AioSession

    async with (
        AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2,
        AwsCloud(endpoint_url=moto.endpoint_url) as aws,
    ):
        vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
        groups: dict[str, str] = {}
        for name, tags in (
            ("nodes", {"discovery": "c1", "role": "nodes"}),
            ("other-cluster", {"discovery": "c2", "role": "nodes"}),
            ("untagged", {}),
        ):
            made = await ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)
            groups[name] = made["GroupId"]
            if tags:
                await ec2.create_tags(
                    Resources=[made["GroupId"]],
                    Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
                )

        def term(**tags: str) -> SelectorTerm:
            return SelectorTerm(tags=tuple(sorted(tags.items())))

        both = term(discovery="c1", role="nodes")
        assert await aws.security_groups([both]) == [groups["nodes"]]
        assert await aws.security_groups([term(discovery="c1", role="other")]) == []
        tagged = await aws.security_groups([term(discovery="*")])
        assert tagged == sorted([groups["nodes"], groups["other-cluster"]])
        assert await aws.security_groups([SelectorTerm(name="untagged")]) == [groups["untagged"]]
        by_id_or_tags = await aws.security_groups(
            [SelectorTerm(id=groups["untagged"]), term(discovery="c2")]
        )
        assert by_id_or_tags == sorted([groups["untagged"], groups["other-cluster"]])


@pytest.mark.integration
async def test_aws_an_ssm_parameter_that_does_not_exist_is_invalid(moto: MotoServer) -> None:
    async with AwsCloud(endpoint_url=moto.endpoint_url) as aws:
        with pytest.raises(InvalidRequest, match="ParameterNotFound"):
            await aws.create(req(image="resolve:ssm:/no/such/parameter"))
        with pytest.raises(InvalidRequest, match="ParameterNotFound"):
            await aws.resolve_image("resolve:ssm:/no/such/parameter")
        assert await aws.list({}) == []


@pytest.mark.integration
async def test_aws_describe_cluster_reads_eks_and_an_unknown_cluster_is_invalid(
    moto: MotoServer,
) -> None:
    from aiobotocore.session import AioSession

    async with AioSession().create_client("eks", endpoint_url=moto.endpoint_url) as eks:
        await eks.create_cluster(
            name="prod",
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": []},
            kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
        )
        created = (await eks.describe_cluster(name="prod"))["cluster"]
    async with AwsCloud(endpoint_url=moto.endpoint_url) as aws:
        info = await aws.describe_cluster("prod")
        assert info.name == "prod"
        assert info.endpoint == created["endpoint"]
        assert info.certificate_authority == created["certificateAuthority"]["data"]
        assert info.service_cidr == created["kubernetesNetworkConfig"]["serviceIpv4Cidr"]
        assert await aws.describe_cluster("prod") == info  # cached
        with pytest.raises(InvalidRequest, match="no EKS cluster 'nope'"):
            await aws.describe_cluster("nope")


# -- simulated only: faults moto's server cannot produce ----------------------------------------


async def test_simulated_only_capacity_unavailable(tmp_path: Path) -> None:
    """moto never answers InsufficientInstanceCapacity; AwsCloud maps that code (unit test)."""
    cloud = SimulatedCloud(tmp_path / "c.sqlite")
    cloud.set_capacity("m5.large", 1)
    await cloud.create(req("a"))
    with pytest.raises(CapacityUnavailable):
        await cloud.create(req("b"))
    assert len(await cloud.list({})) == 1


async def test_simulated_only_quota_exceeded(tmp_path: Path) -> None:
    """moto never answers InstanceLimitExceeded or VcpuLimitExceeded; AwsCloud maps them."""
    cloud = SimulatedCloud(tmp_path / "c.sqlite", quota=1)
    await cloud.create(req("a"))
    with pytest.raises(QuotaExceeded):
        await cloud.create(req("b"))
    assert len(await cloud.list({})) == 1


async def test_a_vm_sent_to_a_subnet_runs_in_its_zone_and_takes_an_address(
    cloud: CloudProvider,
) -> None:
    """The default subnets are one per zone; a VM launched into one is in its zone (as
    DescribeInstances reports it) and takes one of its free addresses."""
    if isinstance(cloud, SimulatedCloud):
        SimulatedCloud(cloud.path, zones=("sim-1a", "sim-1b"))  # zones live in its file
    subnets = await cloud.subnets(())
    assert len({s.zone for s in subnets}) == len(subnets) >= 2
    target = subnets[1]
    launch = LaunchSettings(subnets=(target.id,))
    vm = await cloud.create(req(launch=launch, zone=target.zone))
    assert vm.zone == target.zone
    assert (await cloud.describe(vm.id)).zone == target.zone
    (after,) = await cloud.subnets([SelectorTerm(id=target.id)])
    assert (after.id, after.zone) == (target.id, target.zone)
    assert after.free_addresses == target.free_addresses - 1
