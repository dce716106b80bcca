"""Where a pool's VMs may launch: the subnets its node class selects, by ids or by selector
terms (:func:`~nodepool_operator.controllers._launch.subnet_terms`), and the security groups
its selector terms find, as the cloud lists them.

Both lists are cached for :data:`SUBNETS_FOR` (Karpenter caches its subnets and security
groups too), so the passes of a scale-up ask DescribeSubnets and DescribeSecurityGroups once
a minute, not once per pass (EC2 throttles its Describe calls per account, shared with every
other tool in it); each create made meanwhile takes its addresses off the cached count, so the
free-address check holds within a burst. In memory, shared by the controller's pools; after a
restart they are asked once again. A group deleted meanwhile fails the create, which the
create path reports as for any refused launch; the next list a minute later drops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final, Protocol

from nodepool_operator.cloud import SelectorTerm, Subnet

#: How long a subnet list is reused.
SUBNETS_FOR: Final = 60.0


class ListsSubnets(Protocol):
    """The part of the cloud port this cache reads."""

    async def subnets(self, terms: Sequence[SelectorTerm]) -> list[Subnet]: ...


class ListsSecurityGroups(Protocol):
    """The part of the cloud port :meth:`SubnetCache.security_groups` reads."""

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> list[str]: ...


class SubnetCache:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lists: dict[tuple[SelectorTerm, ...], tuple[float, list[Subnet]]] = {}
        self._groups: dict[tuple[SelectorTerm, ...], tuple[float, list[str]]] = {}

    async def subnets(self, cloud: ListsSubnets, terms: tuple[SelectorTerm, ...]) -> list[Subnet]:
        """The subnets ``terms`` select, from the cache while fresh."""
        now = self._clock()
        cached = self._lists.get(terms)
        if cached is not None and now - cached[0] < SUBNETS_FOR:
            return list(cached[1])
        found = await cloud.subnets(terms)
        self._lists[terms] = (now, list(found))
        return list(found)

    async def security_groups(
        self, cloud: ListsSecurityGroups, terms: tuple[SelectorTerm, ...]
    ) -> list[str]:
        """The security group ids ``terms`` select, from the cache while fresh. An empty
        answer is not kept: the caller refuses it, naming the field, and a group created
        after that refusal is found on the next pass."""
        now = self._clock()
        cached = self._groups.get(terms)
        if cached is not None and now - cached[0] < SUBNETS_FOR:
            return list(cached[1])
        found = await cloud.security_groups(terms)
        if found:
            self._groups[terms] = (now, list(found))
        return list(found)

    def used(self, subnet_id: str, addresses: int) -> None:
        """A VM was just launched into ``subnet_id``: its addresses are taken until the list
        is read again."""
        for terms, (at, subnets) in self._lists.items():
            self._lists[terms] = (
                at,
                [
                    replace(s, free_addresses=s.free_addresses - addresses)
                    if s.id == subnet_id
                    else s
                    for s in subnets
                ],
            )
