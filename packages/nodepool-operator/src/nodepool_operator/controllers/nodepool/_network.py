"""Where a pool's VMs may launch: the subnets its node class selects, by ids or by selector
terms (:func:`~nodepool_operator.controllers._launch.subnet_terms`), as the cloud lists them.

The subnet list is cached for :data:`SUBNETS_FOR` (Karpenter caches its subnets too), so a
pass that creates many VMs asks DescribeSubnets once, not once per create; each create made
meanwhile takes its addresses off the cached count, so the free-address check holds within a
burst. In memory, shared by the controller's pools; after a restart it is asked once again.
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


class SubnetCache:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lists: dict[tuple[SelectorTerm, ...], tuple[float, list[Subnet]]] = {}

    async def subnets(self, cloud: ListsSubnets, terms: tuple[SelectorTerm, ...]) -> list[Subnet]:
        """The subnets ``terms`` select, from the cache while fresh."""
        now = self._clock()
        cached = self._lists.get(terms)
        if cached is not None and now - cached[0] < SUBNETS_FOR:
            return list(cached[1])
        found = await cloud.subnets(terms)
        self._lists[terms] = (now, list(found))
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
