"""Offerings the cloud said it cannot launch right now, remembered for a while so the next
create goes to another one at once instead of asking for the same one again.

An offering is an instance type in a zone (the zone the error named, or the one the VM was
sent to; ``""``: every zone, when neither is known), in a market (on-demand or spot: a spot
stockout leaves the type's on-demand capacity open). A subnet with no address left is
remembered apart (:meth:`UnavailableOfferings.mark_subnet`): the type is fine there, in
another subnet. After Karpenter's unavailable-offerings cache
(``pkg/cache/unavailableofferings.go``): an entry lasts :data:`UNAVAILABLE_FOR` (3 minutes),
long enough not to ask again within a burst of creates, short enough that capacity coming
back is used soon. In memory, shared by the controller's pools: EC2's capacity is the
region's, not a pool's. After a restart the operator asks once more, which costs one call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from nodepool_operator.cloud import CloudError, LaunchRefused, MarketType, SubnetFull

#: How long an offering stays unavailable after a refusal (Karpenter's TTL).
UNAVAILABLE_FOR: Final = 180.0


@dataclass(frozen=True, slots=True, order=True)
class Offering:
    instance_type: str
    zone: str = ""
    """"": the error named no zone, so the type is out in every zone as far as we know."""
    capacity_type: MarketType = "on-demand"


def refused_offering(err: CloudError) -> Offering | None:
    """The offering a create's error says is out (no capacity, the type's instance limit,
    no free address), or None when the error is not about one (a transient failure, an
    invalid request, an account-wide quota). Reads the port's typed error, never a message."""
    if isinstance(err, LaunchRefused) and not isinstance(err, SubnetFull) and err.instance_type:
        return Offering(err.instance_type, err.zone or "", err.capacity_type)
    return None


def refused_subnet(err: CloudError) -> str | None:
    """The subnet a create's error says has no address left, or None."""
    return err.subnet if isinstance(err, SubnetFull) else None


class UnavailableOfferings:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[Offering, float] = {}
        self._subnets: dict[str, float] = {}

    def mark_subnet(self, subnet: str, seconds: float = UNAVAILABLE_FOR) -> None:
        """Remember ``subnet`` as full for ``seconds`` from now."""
        self._subnets[subnet] = max(self._clock() + seconds, self._subnets.get(subnet, 0.0))

    def subnet_full(self, subnet: str) -> bool:
        until = self._subnets.get(subnet)
        if until is None:
            return False
        if self._clock() >= until:
            del self._subnets[subnet]
            return False
        return True

    def mark(self, offering: Offering, seconds: float = UNAVAILABLE_FOR) -> None:
        """Remember ``offering`` as out for ``seconds`` from now (a later mark extends it)."""
        until = self._clock() + seconds
        self._until[offering] = max(until, self._until.get(offering, until))

    def unavailable(
        self, instance_type: str, zone: str = "", capacity_type: MarketType = "on-demand"
    ) -> bool:
        """Whether the type is out in ``capacity_type``'s market: in ``zone``, or in every
        zone (an entry without one)."""
        return any(self._live(Offering(instance_type, z, capacity_type)) for z in {zone, ""})

    def current(self) -> list[tuple[Offering, float]]:
        """Every offering still out and the seconds left, sorted (for the pool's status)."""
        now = self._clock()
        self._expire(now)
        return sorted((o, until - now) for o, until in self._until.items())

    def _live(self, offering: Offering) -> bool:
        until = self._until.get(offering)
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[offering]
            return False
        return True

    def _expire(self, now: float) -> None:
        for offering in [o for o, until in self._until.items() if now >= until]:
            del self._until[offering]
