"""The subnet list is read once a minute, not once per create, and each launch meanwhile
takes its addresses off the cached count."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from nodepool_operator.cloud import SelectorTerm, Subnet
from nodepool_operator.controllers.nodepool._network import SUBNETS_FOR, SubnetCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Subnets:
    """The port's subnet listing, counted."""

    def __init__(self) -> None:
        self.calls = 0

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        self.calls += 1
        return [Subnet(id="subnet-a", zone="sim-1a", free_addresses=100)]


async def test_read_once_a_minute_and_launches_counted_meanwhile() -> None:
    clock, cloud = Clock(), Subnets()
    cache = SubnetCache(clock)
    terms = (SelectorTerm(tags=(("discovery", "prod"),)),)
    for _ in range(5):
        (subnet,) = await cache.subnets(cloud, terms)
        cache.used(subnet.id, 29)
    assert cloud.calls == 1
    (subnet,) = await cache.subnets(cloud, terms)
    assert subnet.free_addresses == 100 - 5 * 29
    clock.now += SUBNETS_FOR
    (subnet,) = await cache.subnets(cloud, terms)
    assert (cloud.calls, subnet.free_addresses) == (2, 100)
    # other terms are another list
    await cache.subnets(cloud, ())
    assert cloud.calls == 3


class Groups:
    """The port's security group listing, counted; ``ids`` is what it answers."""

    def __init__(self, ids: list[str]) -> None:
        self.calls = 0
        self.ids = ids

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        self.calls += 1
        return list(self.ids)


async def test_security_groups_read_once_a_minute_and_an_empty_answer_asked_again() -> None:
    clock, cloud = Clock(), Groups(["sg-1"])
    cache = SubnetCache(clock)
    terms = (SelectorTerm(tags=(("discovery", "prod"),)),)
    for _ in range(5):
        assert await cache.security_groups(cloud, terms) == ["sg-1"]
    assert cloud.calls == 1
    clock.now += SUBNETS_FOR
    cloud.ids = ["sg-1", "sg-2"]
    assert await cache.security_groups(cloud, terms) == ["sg-1", "sg-2"]
    assert cloud.calls == 2
    # nothing found is refused by the caller (naming the field) and not kept: a group
    # created after the refusal is found on the next pass
    other = (SelectorTerm(name="missing"),)
    cloud.ids = []
    assert await cache.security_groups(cloud, other) == []
    cloud.ids = ["sg-3"]
    assert await cache.security_groups(cloud, other) == ["sg-3"]
    assert cloud.calls == 4
