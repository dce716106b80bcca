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
