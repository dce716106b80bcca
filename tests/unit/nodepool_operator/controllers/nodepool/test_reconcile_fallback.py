"""Capacity fallback in one reconcile, in process: the simulated cloud has no m5.large
(a stockout moto's server cannot produce: its RunInstances never answers
InsufficientInstanceCapacity, so the fault stays on the simulated cloud's side); the pool
lists other types and gets its VMs as the cheapest of them that fits, in the same pass,
without a Degraded condition or a held gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers.nodepool import FINALIZER
from tests import factories
from tests.unit.nodepool_operator.controllers import in_process
from tests.unit.nodepool_operator.controllers.nodepool.test_reconcile import UID, WEB


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    cloud = SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0)
    cloud.set_capacity("m5.large", 0)
    return cloud


def pool(target: int, **spec: Any) -> dict[str, Any]:
    obj = factories.nodepool("web", target=target, generation=1, **spec)
    obj["metadata"].update(uid=UID, finalizers=[FINALIZER])
    obj["status"] = {"instances": []}
    return obj


async def run(objects: list[Any], cloud: SimulatedCloud, tmp_path: Path) -> in_process.Pass:
    config = in_process.settings(tmp_path)
    return await in_process.reconcile(objects, cloud, config, WEB, controller="nodepool")


def degraded(status: dict[str, Any]) -> tuple[str, str]:
    (found,) = [c for c in status["conditions"] if c["type"] == "Degraded"]
    return found["status"], found["reason"]


async def test_out_of_capacity_goes_to_the_cheapest_fitting_type_at_once(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    # c5.large is cheapest but holds less memory than m5.large; r5.large is cheaper than
    # c5.xlarge: the spec's order is a preference, the price decides
    obj = pool(2, instanceTypes=["c5.xlarge", "c5.large", "r5.large"])

    done = await run([obj], cloud, tmp_path)

    assert done.error is None
    first, last = done.status_writes()
    a, b = (r["name"] for r in first["instances"])
    # m5.large is asked once; the refusal marks it out, so the second VM goes straight on
    assert done.timeline() == [
        "update NodePool/status web",
        f"cloud create {a}",
        f"cloud create {a}",
        f"cloud create {b}",
        "update NodePool/status web",
    ]
    live = cloud.snapshot().live
    assert sorted((vm.name, vm.instance_type) for vm in live) == sorted(
        [(a, "r5.large"), (b, "r5.large")]
    )
    assert [r["state"] for r in last["instances"]] == ["running", "running"]  # boot_seconds=0
    assert degraded(last)[0] == "False"
    assert [r for r, _ in done.events()] == ["ScalingUp", "OfferingUnavailable"]
    assert cloud.calls()["create"] == 3


async def test_a_pool_without_a_fitting_fallback_is_degraded_and_held(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    obj = pool(2, instanceTypes=["c5.large"])  # less memory than m5.large: never launched

    done = await run([obj], cloud, tmp_path)

    assert done.error is None, "the gate holds: a requeue after the cloud's retry_after"
    assert done.requeue_after is not None
    last = done.status_writes()[-1]
    assert degraded(last) == ("True", "CapacityUnavailable")
    assert cloud.snapshot().live == ()
    assert cloud.calls()["create"] == 1, "held by the gate after the one refusal"


async def test_a_fallback_the_cloud_does_not_offer_is_skipped(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    obj = pool(1, instanceTypes=["x9.nosuch", "r5.large"])

    done = await run([obj], cloud, tmp_path)

    assert done.error is None
    assert [vm.instance_type for vm in cloud.snapshot().live] == ["r5.large"]
    assert cloud.calls()["create"] == 2  # the refused m5.large, then r5.large
