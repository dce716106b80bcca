"""The simulated kubelets look at the cloud again when the next VM's boot ends, if that is
sooner than their interval: a kubelet starts with its VM, so a Node registers at its boot's
end, not up to an interval later (issue 25: the fair Karpenter variant's Nodes appear exactly
at their boot's end). And each VM's kubelet registers on its own: VMs whose boots end
together register together."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from kubeloop import Client
from nodepool_operator.cloud import CreateRequest, NodeBootstrap, SimulatedCloud
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


class _Apiserver:
    """Answers Node creates only once all ``expected`` are in flight at once."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.in_flight = 0
        self.most = 0
        self.all_in = asyncio.Event()
        self.created: list[str] = []

    async def create(self, resource: Any, obj: dict[str, Any], *_: Any) -> dict[str, Any]:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight == self.expected:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), 1.0)
        self.in_flight -= 1
        self.created.append(obj["metadata"]["name"])
        return obj


async def test_vms_whose_boots_end_together_register_together(tmp_path: Path) -> None:
    """One kubelet per VM: three Nodes are registered at once, not each after the last
    one's answer (one at a time, the first create would wait for the others in vain)."""
    clock = Clock()
    cloud = SimulatedCloud(tmp_path / "cloud.db", boot_seconds=1.0, clock=clock)
    for name in ("vm-a", "vm-b", "vm-c"):
        joins = NodeBootstrap(node_name=name).encode()
        await cloud.create(replace(_request(name), user_data=joins))
    clock.now += 1.0
    api = _Apiserver(expected=3)
    kubelets = SimulatedKubelets(cloud, cast("Client", api), interval=0.2)
    await kubelets.sync()
    assert api.most == 3
    assert sorted(api.created) == ["vm-a", "vm-b", "vm-c"]
    assert kubelets.registered == 3
