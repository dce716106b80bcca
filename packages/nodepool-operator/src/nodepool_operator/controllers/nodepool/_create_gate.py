"""Holds back creates the cloud has refused for a while, so that passes run for other reasons
(a VM booting, a Node event, the periodic garbage collection) do not become a retry storm.

A refusal holds for one pool incarnation, one spec generation and one generation of the node
class the pool names: a new spec (the user lowered targetNodes, fixed the instance type) or
an edited node class (a fixed AMI, subnet or instance profile) gets one fresh try at once.
An invalid request holds until then, except one known to clear by itself (an instance
profile IAM has not propagated yet: its ``retry_after``). In memory only: after a restart
the operator asks once more, which costs one call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubeloop import Object
from nodepool_operator.cloud import InvalidRequest, QuotaExceeded
from nodepool_operator.controllers.nodepool._pool_status import CloudFailure

#: How long a quota refusal holds when the cloud suggests no wait.
DEFAULT_QUOTA_WAIT = 60.0


@dataclass(frozen=True, slots=True)
class _Hold:
    generation: int
    node_class: str
    until: float
    failure: CloudFailure


def hold_seconds(failure: CloudFailure) -> float | None:
    """How long a refusal holds creates back: the cloud's ``retry_after`` when it names one
    (a quota, no capacity, throttling), a quota at least :data:`DEFAULT_QUOTA_WAIT` when it
    does not; an invalid request until the spec or node class changes (or its own
    ``retry_after``, for one known to clear by itself); anything else not at all (the
    per-item backoff spaces the retries)."""
    if isinstance(failure.error, InvalidRequest):
        return failure.error.retry_after or math.inf
    if isinstance(failure.error, QuotaExceeded):
        return failure.error.retry_after or DEFAULT_QUOTA_WAIT
    return failure.error.retry_after


class CreateGate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._holds: dict[str, _Hold] = {}

    def refused(
        self, pool_uid: str, generation: int, failure: CloudFailure, *, node_class: str = ""
    ) -> float | None:
        """Record a refusal; return the seconds it holds (None: it does not). ``node_class``:
        the version of the node class the pool names (see :func:`class_version`)."""
        seconds = hold_seconds(failure)
        if seconds is None:
            self._holds.pop(pool_uid, None)
        else:
            until = self._clock() + seconds
            self._holds[pool_uid] = _Hold(generation, node_class, until, failure)
        return seconds

    def holding(
        self, pool_uid: str, generation: int, *, node_class: str = ""
    ) -> CloudFailure | None:
        """The refusal still holding creates back for this pool, spec and node class."""
        hold = self._holds.get(pool_uid)
        if hold is None:
            return None
        if (
            hold.generation != generation
            or hold.node_class != node_class
            or self._clock() >= hold.until
        ):
            del self._holds[pool_uid]
            return None
        return hold.failure

    def remaining(self, pool_uid: str, generation: int, *, node_class: str = "") -> float | None:
        """Seconds until the refusal holding this pool, spec and node class ends, if one does."""
        if self.holding(pool_uid, generation, node_class=node_class) is None:
            return None
        return max(0.0, self._holds[pool_uid].until - self._clock())

    def forget(self, pool_uid: str) -> None:
        self._holds.pop(pool_uid, None)


def class_version(node_class: Object | None) -> str:
    """What a hold remembers of the node class a pool names: its uid and generation (a
    class deleted and made again, or its spec edited, is another), ``"absent"`` when the
    pool names one that does not exist, ``""`` when it names none."""
    if node_class is None:
        return "absent"
    meta = node_class.get("metadata") or {}
    return f"{meta.get('uid', '')}/{meta.get('generation', 0)}"
