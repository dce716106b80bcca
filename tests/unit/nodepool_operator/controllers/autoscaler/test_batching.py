"""Autoscaler: a burst of unschedulable pods is planned once, after it goes quiet."""

from __future__ import annotations

from typing import Any

from kubeloop import Added, Deleted, Updated
from nodepool_operator.controllers.autoscaler._batching import (
    MAX_BATCH_WINDOWS,
    FirstSeen,
    batch_wait,
)
from nodepool_operator.controllers.autoscaler._decode import pod_key


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, *, unschedulable: bool = True, node: str = "") -> dict[str, Any]:
    status = "False" if unschedulable else "True"
    reason = "Unschedulable" if unschedulable else ""
    return {
        "metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}"},
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": [{"type": "PodScheduled", "status": status, "reason": reason}]},
    }


def test_first_seen_is_when_the_watch_showed_the_pod_unschedulable() -> None:
    clock = Clock()
    seen = FirstSeen(clock)
    seen.observe(Added(pod("a", unschedulable=False)))
    assert len(seen) == 0
    clock.now = 101.0
    seen.observe(Updated(pod("a", unschedulable=False), pod("a")))
    clock.now = 105.0
    seen.observe(Updated(pod("a"), pod("a")))  # a repeat keeps the first time
    assert seen.frozen()(pod_key(pod("a"))) == 101.0


def test_pods_that_stop_being_candidates_are_forgotten() -> None:
    clock = Clock()
    seen = FirstSeen(clock)
    seen.observe(Added(pod("a")))
    seen.observe(Added(pod("b")))
    seen.observe(Updated(pod("a"), pod("a", unschedulable=False, node="n1")))
    seen.observe(Deleted(pod("b")))
    assert len(seen) == 0


def test_a_candidate_the_watch_has_not_shown_yet_is_new_as_of_the_read() -> None:
    clock = Clock()
    seen = FirstSeen(clock)
    assert seen.frozen()(pod_key(pod("a"))) == 100.0
    clock.now = 103.0
    seen.observe(Added(pod("a")))  # the watch shows it: that time holds from now on
    clock.now = 104.0
    assert seen.frozen()(pod_key(pod("a"))) == 103.0


def test_a_pod_bound_while_the_pass_reads_is_not_taken_in_again() -> None:
    # The pass freezes the times on the loop, then reads its snapshot in a worker thread
    # while the loop goes on: a pod bound meanwhile keeps the time it had, and stays gone.
    clock = Clock()
    seen = FirstSeen(clock)
    seen.observe(Added(pod("a")))
    times = seen.frozen()
    clock.now = 107.0
    seen.observe(Updated(pod("a"), pod("a", unschedulable=False, node="n1")))
    assert times(pod_key(pod("a"))) == 100.0  # not a new candidate: no window restarted
    assert len(seen) == 0  # and not remembered again


def test_wait_until_the_burst_is_quiet_for_a_window() -> None:
    assert batch_wait([], now=10.0, window=2.0, planned_at=None) == 0.0
    # youngest seen 0.5 s ago: 1.5 s to go
    assert batch_wait([9.0, 9.5], now=10.0, window=2.0, planned_at=None) == 1.5
    assert batch_wait([7.0, 8.0], now=10.0, window=2.0, planned_at=None) == 0.0


def test_a_steady_trickle_is_planned_after_the_max_window() -> None:
    window = 1.0
    start = 0.0
    limit = MAX_BATCH_WINDOWS * window
    # a new pod every 0.5 s: never quiet for a window
    now = limit - 0.25
    trickle = [start + 0.5 * i for i in range(int(now / 0.5) + 1)]
    assert batch_wait(trickle, now=now, window=window, planned_at=None) == 0.25
    now = limit
    trickle = [start + 0.5 * i for i in range(int(now / 0.5))]
    assert batch_wait(trickle, now=now, window=window, planned_at=None) == 0.0


def test_pods_planned_before_do_not_hold_or_rush_a_new_burst() -> None:
    # an old pod (pool at max) and a new burst: only the burst's own age counts
    assert batch_wait([0.0, 99.5], now=100.0, window=1.0, planned_at=50.0) == 0.5
    # nothing new since the last plan: plan now
    assert batch_wait([0.0, 40.0], now=100.0, window=1.0, planned_at=50.0) == 0.0
