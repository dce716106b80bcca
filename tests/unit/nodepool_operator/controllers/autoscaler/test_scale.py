"""Autoscaler: targetNodes is written through /scale, guarded by resourceVersion, and only
from the value the decision was made from (never over what someone else wrote)."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from kubeloop import Client, Conflict, Resource
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers.autoscaler._scale import write_target


class FakeScale:
    """A pool's scale subresource with optimistic concurrency, and a hook to race a writer."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.rv = 1
        self.puts: list[int] = []
        self.gets = 0
        self.before_put: list[int] = []  # someone else's writes, one per PUT, before it lands

    async def get_scale(self, res: Resource, name: str) -> dict[str, Any]:
        assert res == NODEPOOLS
        self.gets += 1
        return {
            "metadata": {"name": name, "resourceVersion": str(self.rv)},
            "spec": {"replicas": self.replicas},
        }

    async def update_scale(self, res: Resource, scale: dict[str, Any]) -> dict[str, Any]:
        if self.before_put:
            self.replicas = self.before_put.pop(0)
            self.rv += 1
        if scale["metadata"]["resourceVersion"] != str(self.rv):
            raise Conflict(409, "Conflict", "the object has been modified")
        self.replicas = scale["spec"]["replicas"]
        self.rv += 1
        self.puts.append(self.replicas)
        return copy.deepcopy(scale)


def client(fake: FakeScale) -> Client:
    return cast(Client, fake)


async def test_a_target_is_written_from_the_value_the_decision_was_made_from() -> None:
    fake = FakeScale(1)
    assert await write_target(client(fake), "big", expected=1, desired=3) is None
    assert fake.puts == [3]
    fake = FakeScale(4)
    assert await write_target(client(fake), "big", expected=4, desired=2) is None
    assert fake.puts == [2]


async def test_a_moved_target_is_not_written_and_its_value_returned() -> None:
    fake = FakeScale(6)  # raised by someone else (or the cache lagged) since the decision
    assert await write_target(client(fake), "big", expected=4, desired=2) == 6
    assert await write_target(client(fake), "big", expected=4, desired=7) == 6
    assert fake.puts == []
    assert fake.replicas == 6


async def test_a_conflict_reads_again_and_finds_the_other_writers_value() -> None:
    fake = FakeScale(0)
    fake.before_put = [4]  # a person scales to 4 between our GET and PUT
    assert await write_target(client(fake), "big", expected=0, desired=3) == 4
    assert fake.puts == []
    assert fake.replicas == 4
    assert fake.gets == 2


async def test_a_conflict_that_left_the_value_alone_is_retried() -> None:
    fake = FakeScale(2)
    fake.before_put = [2]  # another write (same replicas) bumps the resourceVersion
    assert await write_target(client(fake), "big", expected=2, desired=5) is None
    assert fake.puts == [5]


async def test_persistent_conflicts_end_in_a_conflict_for_the_workqueue() -> None:
    fake = FakeScale(0)
    fake.before_put = [0] * 10
    with pytest.raises(Conflict):
        await write_target(client(fake), "big", expected=0, desired=1)


class FakePool:
    """A NodePool with optimistic concurrency: GET and PUT of the object itself."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.obj: dict[str, Any] = {"metadata": {"name": "big", "resourceVersion": "1"}}
        self.obj["spec"] = spec
        self.puts: list[dict[str, Any]] = []
        self.before_put: list[dict[str, Any]] = []  # someone else's spec changes

    async def get(self, res: Resource, name: str) -> dict[str, Any]:
        assert (res, name) == (NODEPOOLS, "big")
        return copy.deepcopy(self.obj)

    async def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        if self.before_put:
            self.obj["spec"].update(self.before_put.pop(0))
            self.obj["metadata"]["resourceVersion"] += "'"
        if obj["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.obj = copy.deepcopy(obj)
        self.obj["metadata"]["resourceVersion"] += "'"
        self.puts.append(copy.deepcopy(obj["spec"]))
        return copy.deepcopy(self.obj)


async def test_zone_targets_go_in_the_same_write_as_the_target() -> None:
    fake = FakePool({"targetNodes": 1, "zoneTargets": {"zone-a": 1}, "instanceType": "m"})
    zones = {"zone-a": 1, "zone-b": 2}
    done = await write_target(cast(Client, fake), "big", expected=1, desired=3, zone_targets=zones)
    assert done is None
    assert fake.puts == [{"targetNodes": 3, "zoneTargets": zones, "instanceType": "m"}]
    # empty zone targets take the field away, in the same write
    assert (
        await write_target(cast(Client, fake), "big", expected=3, desired=4, zone_targets={})
        is None
    )
    assert fake.puts[-1] == {"targetNodes": 4, "instanceType": "m"}


async def test_zone_targets_are_not_written_over_a_moved_target() -> None:
    fake = FakePool({"targetNodes": 5, "instanceType": "m"})
    assert (
        await write_target(cast(Client, fake), "big", expected=2, desired=3, zone_targets={}) == 5
    )
    assert fake.puts == []
    # moved between the GET and the PUT: the conflict reads again and sees the move
    fake = FakePool({"targetNodes": 2, "instanceType": "m"})
    fake.before_put = [{"targetNodes": 6}]
    moved = await write_target(
        cast(Client, fake), "big", expected=2, desired=3, zone_targets={"zone-a": 1}
    )
    assert moved == 6
    assert fake.puts == []
