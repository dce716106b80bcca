"""Autoscaler: targetNodes is written through /scale, guarded by resourceVersion, never lowered
below what someone else raised."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from kubeloop import Client, Conflict, Resource
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scale import ScaleOutcome, lower_target, raise_target


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


def asking(decide: Callable[[int], int]) -> Callable[[int], Awaitable[int]]:
    """``raise_target`` awaits its decision (the plan is made off the event loop)."""

    async def desired_for(current: int) -> int:
        return decide(current)

    return desired_for


async def test_raise_writes_the_desired_target() -> None:
    fake = FakeScale(1)
    outcome = await raise_target(client(fake), "big", asking(lambda current: current + 2))
    assert outcome == ScaleOutcome(1, 3)
    assert outcome.written
    assert fake.puts == [3]


async def test_raise_writes_nothing_when_the_target_is_already_high_enough() -> None:
    fake = FakeScale(5)
    outcome = await raise_target(client(fake), "big", asking(lambda current: 3))
    assert outcome == ScaleOutcome(5, 5)
    assert not outcome.written
    assert fake.puts == []


async def test_raise_re_decides_against_the_value_someone_else_wrote() -> None:
    fake = FakeScale(0)
    fake.before_put = [4]  # a person scales to 4 between our GET and PUT
    asked: list[int] = []

    def desired_for(current: int) -> int:
        asked.append(current)
        return 3 if current < 3 else current  # the plan needs 3 nodes in all

    outcome = await raise_target(client(fake), "big", asking(desired_for))
    assert asked == [0, 4]
    assert outcome == ScaleOutcome(4, 4)
    assert fake.puts == []
    assert fake.replicas == 4


async def test_lower_only_from_the_value_the_decision_was_based_on() -> None:
    fake = FakeScale(4)
    assert await lower_target(client(fake), "big", expected=4, desired=2) == ScaleOutcome(4, 2)
    fake = FakeScale(6)  # raised by someone else since the decision
    assert await lower_target(client(fake), "big", expected=4, desired=2) == ScaleOutcome(6, 6)
    assert fake.puts == []
    fake = FakeScale(4)
    fake.before_put = [7]
    assert await lower_target(client(fake), "big", expected=4, desired=2) == ScaleOutcome(7, 7)
    assert fake.replicas == 7


async def test_persistent_conflicts_end_in_a_conflict_for_the_workqueue() -> None:
    fake = FakeScale(0)
    fake.before_put = [0] * 10
    with pytest.raises(Conflict):
        await raise_target(client(fake), "big", asking(lambda current: current + 1))
