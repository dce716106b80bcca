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
