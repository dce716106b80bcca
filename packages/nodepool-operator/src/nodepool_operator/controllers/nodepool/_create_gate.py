"""Holds back creates the cloud has refused for a while, so that passes run for other reasons
(a VM booting, a Node event, the periodic garbage collection) do not become a retry storm.

A refusal holds for one pool incarnation and one spec generation: a new spec (the user
lowered targetNodes, fixed the instance type) gets one fresh try at once. In memory only:
after a restart the operator asks once more, which costs one call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from nodepool_operator.cloud import InvalidRequest, QuotaExceeded
from nodepool_operator.controllers.nodepool._pool_status import CloudFailure

#: How long a quota refusal holds when the cloud suggests no wait.
DEFAULT_QUOTA_WAIT = 60.0


@dataclass(frozen=True, slots=True)
class _Hold:
    generation: int
    until: float
    failure: CloudFailure


def hold_seconds(failure: CloudFailure) -> float | None:
    """How long a refusal holds creates back: the cloud's ``retry_after`` when it names one
    (a quota, no capacity, throttling), a quota at least :data:`DEFAULT_QUOTA_WAIT` when it
    does not; an invalid request until the spec changes; anything else not at all (the
    per-item backoff spaces the retries)."""
    if isinstance(failure.error, InvalidRequest):
        return math.inf
    if isinstance(failure.error, QuotaExceeded):
        return failure.error.retry_after or DEFAULT_QUOTA_WAIT
    return failure.error.retry_after


class CreateGate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._holds: dict[str, _Hold] = {}

    def refused(self, pool_uid: str, generation: int, failure: CloudFailure) -> float | None:
        """Record a refusal; return the seconds it holds (None: it does not)."""
        seconds = hold_seconds(failure)
        if seconds is None:
            self._holds.pop(pool_uid, None)
        else:
            self._holds[pool_uid] = _Hold(generation, self._clock() + seconds, failure)
        return seconds

    def holding(self, pool_uid: str, generation: int) -> CloudFailure | None:
        """The refusal still holding creates back for this pool and spec, if any."""
        hold = self._holds.get(pool_uid)
        if hold is None:
            return None
        if hold.generation != generation or self._clock() >= hold.until:
            del self._holds[pool_uid]
            return None
        return hold.failure

    def remaining(self, pool_uid: str, generation: int) -> float | None:
        """Seconds until the refusal holding this pool and spec ends, if one does."""
        if self.holding(pool_uid, generation) is None:
            return None
        return max(0.0, self._holds[pool_uid].until - self._clock())

    def forget(self, pool_uid: str) -> None:
        self._holds.pop(pool_uid, None)
