"""Zones in one reconcile, in process: a simulated cloud of three zones where sim-1a has no
m5.large (a zonal stockout moto's server cannot produce: its RunInstances never answers
InsufficientInstanceCapacity, so the fault stays on the simulated cloud's side). The pool's
VMs are placed before the first create (zone and subnet recorded with each intent); the one
sent to sim-1a is refused, that offering is marked out, and the same pass launches it and
the rest in sim-1b and sim-1c at once: no Degraded pool, no held gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodepool_operator.cloud import SimulatedCloud, SubnetFull
from tests.unit.nodepool_operator.controllers.nodepool.test_reconcile_fallback import (
    degraded,
    pool,
    run,
)

ZONES = ("sim-1a", "sim-1b", "sim-1c")


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    cloud = SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0, zones=ZONES)
    cloud.set_capacity("m5.large", 0, zone="sim-1a")
    return cloud


def zones_of(status: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r.get("zone", "") for r in status["instances"]}


async def test_a_zone_out_of_capacity_sends_the_pass_to_the_other_zones(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    done = await run([pool(4)], cloud, tmp_path)

    assert done.error is None
    first, last = done.status_writes()
    # recorded before any create: balanced over the three zones, name order on ties
    placed = zones_of(first)
    assert sorted(placed.values()) == ["sim-1a", "sim-1a", "sim-1b", "sim-1c"]
    subnets = {s.zone: s.id for s in await cloud.subnets(())}
    assert all(r["subnet"] == subnets[r["zone"]] for r in first["instances"])
    # sim-1a refuses once; its offering is out, so the second VM placed there is not sent
    creates = [c for c in done.timeline() if c.startswith("cloud create")]
    assert len(creates) == 5
    assert cloud.calls()["create"] == 5
    live = cloud.snapshot().live
    assert len(live) == 4
    by_zone = sorted(vm.zone for vm in live)
    assert by_zone == ["sim-1b", "sim-1b", "sim-1c", "sim-1c"]
    # the records say where each VM went (a retry asks for the same subnet)
    assert zones_of(last) == {vm.name: vm.zone for vm in live}
    assert [r["state"] for r in last["instances"]] == ["running"] * 4
    assert degraded(last)[0] == "False"
    assert done.requeue_after is not None
    reasons = [r for r, _ in done.events()]
    assert reasons.count("OfferingUnavailable") == 1
    (note,) = [n for r, n in done.events() if r == "OfferingUnavailable"]
    assert "m5.large in sim-1a is out" in note
    # the zones the pool can launch into now: sim-1a's m5.large is out
    assert last["zones"] == ["sim-1b", "sim-1c"]


async def test_zone_targets_are_filled_first(cloud: SimulatedCloud, tmp_path: Path) -> None:
    cloud.set_capacity("m5.large", None, zone="sim-1a")
    done = await run([pool(3, zoneTargets={"sim-1c": 2})], cloud, tmp_path)

    assert done.error is None
    assert sorted(vm.zone for vm in cloud.snapshot().live) == ["sim-1a", "sim-1c", "sim-1c"]
    assert done.status_writes()[-1]["zones"] == list(ZONES)


async def test_without_zones_nothing_changes(tmp_path: Path) -> None:
    plain = SimulatedCloud(tmp_path / "plain.sqlite", boot_seconds=0)
    done = await run([pool(2)], plain, tmp_path)

    assert done.error is None
    last = done.status_writes()[-1]
    assert "zones" not in last
    assert all("zone" not in r and "subnet" not in r for r in last["instances"])
    assert [vm.zone for vm in plain.snapshot().live] == ["", ""]


async def test_a_recorded_placement_is_asked_again(cloud: SimulatedCloud, tmp_path: Path) -> None:
    """An intent recorded with its zone and subnet (then a crash) is created there, not where
    the balance would put a new one; asked again (the status write lost), the same VM."""
    cloud.set_capacity("m5.large", None, zone="sim-1a")
    subnets = {s.zone: s.id for s in await cloud.subnets(())}
    obj = pool(1)
    obj["status"] = {
        "instances": [
            {
                "name": "web-0a1b2",
                "state": "creating",
                "zone": "sim-1c",
                "subnet": subnets["sim-1c"],
            }
        ]
    }
    for _ in range(2):
        done = await run([obj], cloud, tmp_path)
        assert done.error is None
        (vm,) = cloud.snapshot().live
        assert (vm.name, vm.zone) == ("web-0a1b2", "sim-1c")
    assert cloud.calls()["create"] == 2


async def test_a_full_subnet_is_marked_not_the_type(cloud: SimulatedCloud, tmp_path: Path) -> None:
    """InsufficientFreeAddressesInSubnet (its addresses taken since the list was read) marks
    the subnet it was sent to; the same VM goes to the next zone at once."""
    cloud.set_capacity("m5.large", None, zone="sim-1a")
    cloud.inject("create", SubnetFull)
    subnets = {s.zone: s.id for s in await cloud.subnets(())}

    done = await run([pool(1)], cloud, tmp_path)

    assert done.error is None
    (vm,) = cloud.snapshot().live
    assert vm.zone == "sim-1b"
    (note,) = [n for r, n in done.events() if r == "OfferingUnavailable"]
    assert note.startswith(f"subnet {subnets['sim-1a']} is out")
    assert "launching m5.large in sim-1b instead" in note
    last = done.status_writes()[-1]
    assert degraded(last)[0] == "False"
    assert last["zones"] == ["sim-1b", "sim-1c"]
