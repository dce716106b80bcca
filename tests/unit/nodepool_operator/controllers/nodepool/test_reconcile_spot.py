"""Spot pools in one reconcile, in process against the simulated cloud: VMs launched in
the spot market with the capacity-type label in their bootstrap; a spot stockout
(``set_capacity(..., capacity_type="spot")``) launches the same type on-demand in the same
pass, with an Event, and the refused spot offering is not asked again for the next VM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers._node_manifest import CAPACITY_TYPE_LABEL
from tests.unit.nodepool_operator.controllers.nodepool.test_reconcile_fallback import pool, run


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    return SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0)


def labels(user_data: str) -> dict[str, str]:
    """The labels a simulated VM's kubelet registers its Node with."""
    return dict(json.loads(user_data)["labels"])


async def test_a_spot_pool_launches_spot_vms_labelled_spot(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    done = await run([pool(2, capacityType="spot")], cloud, tmp_path)

    assert done.error is None
    live = cloud.snapshot().live
    assert [vm.capacity_type for vm in live] == ["spot", "spot"]
    assert {labels(vm.user_data)[CAPACITY_TYPE_LABEL] for vm in live} == {"spot"}
    assert [r for r, _ in done.events()] == ["ScalingUp"]


async def test_an_on_demand_pool_is_labelled_on_demand(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    done = await run([pool(1)], cloud, tmp_path)

    assert done.error is None
    (vm,) = cloud.snapshot().live
    assert vm.capacity_type == "on-demand"
    assert labels(vm.user_data)[CAPACITY_TYPE_LABEL] == "on-demand"


async def test_no_spot_capacity_launches_on_demand_at_once_and_says_so(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    cloud.set_capacity("m5.large", 0, capacity_type="spot")

    done = await run([pool(2, capacityType="spot")], cloud, tmp_path)

    assert done.error is None
    first, last = done.status_writes()
    a, b = (r["name"] for r in first["instances"])
    # spot asked once for the first VM; the refusal marks m5.large's spot out, so the
    # first goes on-demand at once and the second straight on-demand
    assert done.timeline() == [
        "update NodePool/status web",
        f"cloud create {a}",
        f"cloud create {a}",
        f"cloud create {b}",
        "update NodePool/status web",
    ]
    live = cloud.snapshot().live
    assert sorted((vm.name, vm.instance_type, vm.capacity_type) for vm in live) == sorted(
        [(a, "m5.large", "on-demand"), (b, "m5.large", "on-demand")]
    )
    assert {labels(vm.user_data)[CAPACITY_TYPE_LABEL] for vm in live} == {"on-demand"}
    (degraded,) = [c for c in last["conditions"] if c["type"] == "Degraded"]
    assert degraded["status"] == "False"
    events = done.events()
    assert [r for r, _ in events] == ["ScalingUp", "SpotUnavailable"]
    assert "no spot capacity for m5.large" in events[1][1]
    assert "on-demand" in events[1][1]


async def test_spot_capacity_left_is_used_before_on_demand(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    cloud.set_capacity("m5.large", 1, capacity_type="spot")

    done = await run([pool(3, capacityType="spot")], cloud, tmp_path)

    assert done.error is None
    markets = sorted(vm.capacity_type for vm in cloud.snapshot().live)
    assert markets == ["on-demand", "on-demand", "spot"]
    assert cloud.calls()["create"] == 4  # one spot refusal, then on-demand
