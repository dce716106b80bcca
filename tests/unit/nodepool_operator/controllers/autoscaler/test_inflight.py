"""In-flight nodes that never come stop counting; pods new nodes did not take are not scaled
for again. Both pure, with the clock as an argument."""

from __future__ import annotations

from typing import Any

from nodepool_operator.api import parse_nodepool
from nodepool_operator.controllers.autoscaler._landing import Landing
from nodepool_operator.controllers.autoscaler._provision import (
    Provisioning,
    observe,
    requested,
    timed_out,
)
from nodepool_operator.controllers.autoscaler.decide import cloud_refusing

TIMEOUT, BACKOFF = 900.0, 300.0


def test_in_flight_nodes_time_out_without_progress_and_back_off_doubling() -> None:
    state = observe(Provisioning(), in_flight=3, registered=0, now=0.0)
    assert timed_out(state, now=899.0, timeout=TIMEOUT, backoff=BACKOFF) is None
    failed = timed_out(state, now=900.0, timeout=TIMEOUT, backoff=BACKOFF)
    assert failed is not None
    assert failed.since is None
    assert failed.backoff_until == 1200.0
    assert failed.backing_off(1199.0)
    assert not failed.backing_off(1200.0)
    # the target lowered back: nothing in flight, but no node came, so no reset
    failed = observe(failed, in_flight=0, registered=0, now=901.0)
    assert failed.failures == 1
    again = timed_out(
        observe(failed, in_flight=1, registered=0, now=1300.0),
        now=2200.0,
        timeout=TIMEOUT,
        backoff=BACKOFF,
    )
    assert again is not None
    assert again.backoff_until == 2200.0 + 600.0


def test_a_registering_node_is_progress_and_restarts_the_clock() -> None:
    state = observe(Provisioning(), in_flight=3, registered=0, now=0.0)
    state = observe(state, in_flight=2, registered=1, now=800.0)
    assert timed_out(state, now=1000.0, timeout=TIMEOUT, backoff=BACKOFF) is None
    assert timed_out(state, now=1700.0, timeout=TIMEOUT, backoff=BACKOFF) is not None


def test_nothing_in_flight_ends_the_wait_and_a_new_request_gets_full_time() -> None:
    state = observe(Provisioning(), in_flight=1, registered=0, now=0.0)
    state = observe(state, in_flight=0, registered=1, now=10.0)
    assert state.since is None
    assert state.failures == 0
    state = requested(observe(state, in_flight=1, registered=1, now=20.0), registered=1, now=500.0)
    assert timed_out(state, now=1000.0, timeout=TIMEOUT, backoff=BACKOFF) is None


def _pool(generation: int, *conditions: dict[str, Any]) -> Any:
    return parse_nodepool(
        {
            "metadata": {"name": "p", "generation": generation},
            "spec": {"instanceType": "m5.large"},
            "status": {"conditions": list(conditions)},
        }
    )


def _degraded(reason: str, status: str = "True", generation: int = 2) -> dict[str, Any]:
    return {
        "type": "Degraded",
        "status": status,
        "reason": reason,
        "message": "m",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_the_pool_says_the_cloud_refuses_only_for_its_current_spec() -> None:
    assert cloud_refusing(_pool(2, _degraded("CapacityUnavailable"))) == "CapacityUnavailable: m"
    assert cloud_refusing(_pool(2, _degraded("QuotaExceeded"))) == "QuotaExceeded: m"
    # a refusal of an older spec (before the target was raised) says nothing of the new nodes
    assert cloud_refusing(_pool(3, _degraded("CapacityUnavailable"))) is None
    assert cloud_refusing(_pool(2, _degraded("CapacityUnavailable", status="False"))) is None
    assert cloud_refusing(_pool(2, _degraded("TransientCloudError"))) is None
    assert cloud_refusing(_pool(2)) is None


def test_a_pod_not_taken_by_its_ready_node_is_set_aside_after_the_grace() -> None:
    landing = Landing()
    common: dict[str, Any] = {"grace": 30.0}
    assert landing.look(candidates={"a", "b"}, ready=1, registered=1, now=0.0, **common) is None
    landing.planned(["a", "b"], target=2)
    # the node it waits for is booting: nothing counts down
    assert landing.look(candidates={"a", "b"}, ready=1, registered=2, now=5.0, **common) is None
    # Ready now: the scheduler gets 30 s
    assert landing.look(candidates={"a", "b"}, ready=2, registered=2, now=10.0, **common) == 30.0
    # meanwhile they wait for the scheduler, not for another node
    assert landing.waiting({"a": 1, "b": 1, "c": 1}) == {"a", "b"}
    # b got scheduled meanwhile; a did not
    landing.look(candidates={"a"}, ready=2, registered=2, now=40.0, **common)
    assert landing.excluded({"a": 1, "b": 1}) == {"a"}
    # planning it again does not start a new wait
    landing.planned(["a"], target=3)
    assert landing.awaiting == {}


def test_a_released_pod_waits_for_capacity_again_not_for_the_scheduler() -> None:
    landing = Landing()
    common: dict[str, Any] = {"grace": 30.0}
    landing.look(candidates={"a", "b", "c"}, ready=0, registered=0, now=0.0, **common)
    landing.planned(["a", "b", "c"], target=1)
    landing.look(candidates={"a", "b", "c"}, ready=1, registered=1, now=5.0, **common)
    landing.look(candidates={"a", "b"}, ready=1, registered=1, now=40.0, **common)
    assert landing.excluded({"a": 1, "b": 1}) == {"a", "b"}
    landing.release(["a"])
    assert landing.excluded({"a": 1, "b": 1}) == {"b"}
    # released, it may be planned (and wait) again
    landing.planned(["a"], target=2)
    assert "a" in landing.awaiting
