"""Subnets and zones through the port: which subnets selector terms select (the simulated
cloud's and EC2's filters), a zone's own stockout, a full subnet, and a create that keeps
its zone on every repeat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodepool_operator.api import AwsNodeClassSpec, parse_nodeclass
from nodepool_operator.cloud import (
    CapacityUnavailable,
    CreateRequest,
    IdempotencyMismatch,
    InvalidRequest,
    LaunchSettings,
    SelectorTerm,
    SimulatedCloud,
    SubnetFull,
)
from nodepool_operator.cloud._aws import _subnet_filters
from nodepool_operator.controllers._launch import group_terms, resolved_launch, subnet_terms
from tests import factories

ZONES = ("sim-1a", "sim-1b", "sim-1c")


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    return SimulatedCloud(tmp_path / "cloud.sqlite", zones=ZONES, subnet_addresses=3)


def create(token: str, zone: str = "", subnets: tuple[str, ...] = ()) -> CreateRequest:
    return CreateRequest(
        name=token,
        instance_type="m5.large",
        image="img",
        idempotency_token=token,
        zone=zone,
        launch=LaunchSettings(subnets=subnets),
    )


async def test_no_zones_by_default(tmp_path: Path) -> None:
    """A cloud file made without zones has none: VMs have no zone, as before zones."""
    plain = SimulatedCloud(tmp_path / "plain.sqlite")
    assert await plain.subnets(()) == []
    vm = await plain.create(create("t-1"))
    assert vm.zone == ""
    assert plain.region == "sim-1"


async def test_one_subnet_per_zone_and_the_terms_select(cloud: SimulatedCloud) -> None:
    subnets = await cloud.subnets(())
    assert [s.zone for s in subnets] == list(ZONES)
    assert {s.free_addresses for s in subnets} == {3}
    b = subnets[1]
    assert b.id.startswith("subnet-")
    assert [s.zone for s in await cloud.subnets([SelectorTerm(id=b.id)])] == ["sim-1b"]
    by_tag = [SelectorTerm(tags=(("topology.kubernetes.io/zone", "sim-1c"),))]
    assert [s.zone for s in await cloud.subnets(by_tag)] == ["sim-1c"]
    any_name = [SelectorTerm(tags=(("Name", "*"),))]
    assert len(await cloud.subnets(any_name)) == 3
    nothing = [SelectorTerm(tags=(("Name", "sim-1z"),))]
    assert await cloud.subnets(nothing) == []
    # terms are ORed
    two = [SelectorTerm(id=b.id), *by_tag]
    assert [s.zone for s in await cloud.subnets(two)] == ["sim-1b", "sim-1c"]


async def test_a_vm_runs_in_the_zone_asked_and_takes_an_address(cloud: SimulatedCloud) -> None:
    vm = await cloud.create(create("t-1", zone="sim-1b"))
    assert vm.zone == "sim-1b"
    free = {s.zone: s.free_addresses for s in await cloud.subnets(())}
    assert free == {"sim-1a": 3, "sim-1b": 2, "sim-1c": 3}
    # by its subnet alone, too
    b = (await cloud.subnets(()))[1]
    assert (await cloud.create(create("t-2", subnets=(b.id,)))).zone == "sim-1b"
    # a repeat in another zone is another request
    with pytest.raises(IdempotencyMismatch):
        await cloud.create(create("t-1", zone="sim-1c"))
    assert (await cloud.create(create("t-1", zone="sim-1b"))).id == vm.id
    with pytest.raises(InvalidRequest, match="sim-1z"):
        await cloud.create(create("t-3", zone="sim-1z"))


async def test_a_zones_stockout_and_a_full_subnet(cloud: SimulatedCloud) -> None:
    # moto's server never refuses for capacity: a zone's stockout exists only here
    cloud.set_capacity("m5.large", 0, zone="sim-1a")
    with pytest.raises(CapacityUnavailable) as refused:
        await cloud.create(create("t-1", zone="sim-1a"))
    assert (refused.value.instance_type, refused.value.zone) == ("m5.large", "sim-1a")
    assert not isinstance(refused.value, SubnetFull)
    assert (await cloud.create(create("t-2", zone="sim-1b"))).zone == "sim-1b"
    cloud.set_capacity("m5.large", None, zone="sim-1a")
    for token in ("t-3", "t-4", "t-5"):
        await cloud.create(create(token, zone="sim-1c"))
    with pytest.raises(SubnetFull) as full:
        await cloud.create(create("t-6", zone="sim-1c"))
    assert full.value.zone == "sim-1c"
    assert full.value.subnet == (await cloud.subnets(()))[2].id


def test_node_class_subnets_as_terms() -> None:
    def spec(**fields: Any) -> AwsNodeClassSpec:
        return parse_nodeclass(factories.nodeclass(**fields)).spec

    assert subnet_terms(None) == ()
    assert subnet_terms(spec()) == ()
    assert subnet_terms(spec(subnetIds=["subnet-0123abcd"])) == (
        SelectorTerm(id="subnet-0123abcd"),
    )
    selected = spec(
        subnetSelectorTerms=[{"tags": {"b": "2", "a": "*"}}, {"id": "subnet-0123abcd"}],
        securityGroupSelectorTerms=[{"name": "nodes"}],
    )
    assert subnet_terms(selected) == (
        SelectorTerm(tags=(("a", "*"), ("b", "2"))),
        SelectorTerm(id="subnet-0123abcd"),
    )
    assert group_terms(selected) == (SelectorTerm(name="nodes"),)


def test_ec2_filters_of_a_term() -> None:
    assert _subnet_filters(SelectorTerm(id="subnet-0123abcd")) == [
        {"Name": "subnet-id", "Values": ["subnet-0123abcd"]}
    ]
    assert _subnet_filters(SelectorTerm(tags=(("discovery", "prod"), ("tier", "*")))) == [
        {"Name": "tag:discovery", "Values": ["prod"]},
        {"Name": "tag-key", "Values": ["tier"]},
    ]
    assert _subnet_filters(SelectorTerm(id="sg-0123abcd"), id_filter="group-id") == [
        {"Name": "group-id", "Values": ["sg-0123abcd"]}
    ]


async def test_an_instances_launch_reads_the_selector_terms(cloud: SimulatedCloud) -> None:
    """An Instance chooses no zone: its launch carries every subnet the terms select (the
    cloud picks one by its token), and terms that select nothing are refused by name."""
    by_zone = {s.zone: s.id for s in await cloud.subnets(())}
    spec = parse_nodeclass(
        factories.nodeclass(
            subnetSelectorTerms=[
                {"tags": {"topology.kubernetes.io/zone": "sim-1c"}},
                {"id": by_zone["sim-1a"]},
            ],
            securityGroupSelectorTerms=[{"id": "sg-0123abcd"}],
        )
    ).spec
    launch = await resolved_launch(cloud, spec)
    assert launch.subnets == tuple(sorted([by_zone["sim-1a"], by_zone["sim-1c"]]))
    assert launch.security_groups == ("sg-0123abcd",)
    nothing = parse_nodeclass(
        factories.nodeclass(subnetSelectorTerms=[{"tags": {"Name": "sim-1z"}}])
    ).spec
    with pytest.raises(InvalidRequest, match=r"spec\.subnetSelectorTerms") as refused:
        await resolved_launch(cloud, nothing)
    assert refused.value.reason == "InvalidSubnet"
    # ids stay as they are (no call)
    plain = parse_nodeclass(factories.nodeclass(subnetIds=["subnet-0123abcd"])).spec
    assert (await resolved_launch(cloud, plain)).subnets == ("subnet-0123abcd",)
