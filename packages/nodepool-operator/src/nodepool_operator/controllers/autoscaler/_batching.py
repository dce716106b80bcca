"""Batching: plan a burst of unschedulable pods once, not once per pod.

The scheduler marks a burst's pods unschedulable one by one over a few hundred milliseconds.
Planning on the first event would raise the target for the first pods and again for the rest:
twice the writes, and with booting nodes counted right, the same nodes in the end. So the
Autoscaler waits until the burst has gone quiet for ``batch_window_seconds`` (Karpenter's idle
window), but never longer than :data:`MAX_BATCH_WINDOWS` windows from the burst's first pod
(Karpenter's max window), so a steady trickle of pods cannot postpone scale-up for ever.

When a pod became a candidate is taken from the watch, in memory, not from its
``PodScheduled.lastTransitionTime``: that has one-second precision, which would make a pod look
up to a second older than it is and split a burst in two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kubeloop import Deleted, Event
from nodepool_operator.controllers.autoscaler._decode import pod_key
from nodepool_operator.scheduling import classify

__all__ = ["MAX_BATCH_WINDOWS", "FirstSeen", "Seen", "batch_wait"]

#: The longest a burst is held back, in batch windows.
MAX_BATCH_WINDOWS: Final = 5


@dataclass(frozen=True, slots=True)
class Seen:
    """The first-seen times as they stood at ``at``, when a pass read the pods from the
    cache: called with a pod key, its time; a candidate the watch has not shown yet is new
    as of ``at``.

    ``at`` is also when the pass planned (its ``planned_at``): a candidate the watch brings
    after it is not in the pass's snapshot, so it must count as new to the next pass."""

    times: Mapping[str, float]
    at: float

    def __call__(self, key: str) -> float:
        return self.times.get(key, self.at)


class FirstSeen:
    """When each pod was first seen as a scale-up candidate, on a monotonic clock.

    :meth:`observe` is a pod informer handler: it sees every event, so a pod's time is when the
    watch delivered it as unschedulable, not when a reconcile got round to it. A pod that stops
    being a candidate (bound, gated, deleted) is forgotten, so memory follows the pending pods.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._since)

    def observe(self, event: Event) -> None:
        key = pod_key(event.obj)
        # a nominated pod keeps its time: our nomination does not make it a new candidate
        if isinstance(event, Deleted) or not classify(event.obj).candidate_on():
            self._since.pop(key, None)
        else:
            self._since.setdefault(key, self._clock())

    def frozen(self) -> Seen:
        """The times as they stand now, by pod key (:func:`~._decode.pod_key`).

        Why a copy: the pass reads its snapshot in a worker thread while the loop goes on
        handling events. Looked up live from there, a pod bound meanwhile was taken in again
        as a new candidate: it restarted the batch window (a second raise held back a window
        while the scheduler was still binding the first) and stayed until its next event."""
        return Seen(dict(self._since), self._clock())


def batch_wait(
    first_seen: Iterable[float], *, now: float, window: float, planned_at: float | None
) -> float:
    """Seconds to wait before planning, 0 to plan now.

    Args:
        first_seen: when each current candidate was first seen.
        now: the same clock's now.
        window: the quiet time that ends a burst (``batch_window_seconds``).
        planned_at: when this Autoscaler last planned, or ``None``. Candidates seen before
            that were planned already; only the newer ones form the burst being gathered.
    """
    burst = [t for t in first_seen if planned_at is None or t > planned_at]
    if not burst:
        return 0.0
    quiet_for = now - max(burst)
    gathering_for = now - min(burst)
    remaining = min(window - quiet_for, MAX_BATCH_WINDOWS * window - gathering_for)
    return max(remaining, 0.0)
