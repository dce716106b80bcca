"""The simulated kubelets look at the cloud again when the next VM's boot ends, if that is
sooner than their interval: a kubelet starts with its VM, so a Node registers at its boot's
end, not up to an interval later (issue 25: the fair Karpenter variant's Nodes appear exactly
at their boot's end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodepool_operator.cloud import CreateRequest, SimulatedCloud
from nodepool_operator.testbed import SimulatedKubelets

T0 = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _request(name: str) -> CreateRequest:
    # no user data: the VM joins no cluster, so a look registers nothing (no client needed)
    return CreateRequest(
        name=name, instance_type="m5.large", image="img-1", tags={}, idempotency_token=name
    )


@pytest.mark.parametrize(
    ("boot", "after", "expected"),
    [
        (0.05, 0.0, 0.052),  # the boot ends before the interval: look then (and a hair after)
        (5.0, 0.0, 0.2),  # it ends later: the interval
        (5.0, 5.0, 0.2),  # nothing booting: the interval
    ],
)
async def test_the_next_look_is_at_the_next_boot_end_or_the_interval(
    tmp_path: Path, boot: float, after: float, expected: float
) -> None:
    clock = Clock()
    cloud = SimulatedCloud(tmp_path / "cloud.db", boot_seconds=boot, clock=clock)
    await cloud.create(_request("vm"))
    clock.now += after
    client: Any = None
    kubelets = SimulatedKubelets(cloud, client, interval=0.2)
    await kubelets.sync()
    assert kubelets._next_look == pytest.approx(expected)
