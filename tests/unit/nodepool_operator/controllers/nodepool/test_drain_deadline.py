"""When a drain stops waiting (pool deletion's grace period, scale-down's drain timeout) and
what is said about it: pure functions of the times the cluster keeps."""

from __future__ import annotations

from datetime import timedelta

from nodepool_operator.controllers._unneeded import (
    DRAIN_TIMED_OUT_AT,
    RECHECK_SECONDS,
    format_time,
    parse_time,
)
from nodepool_operator.controllers.nodepool._drain_deadline import (
    deletion_condition,
    drain_timeout_note,
    grace_expired_note,
    remaining,
    resting_for,
)

T0 = 1796425200.0  # 2026-12-04T23:00:00Z


def test_times_round_trip_in_the_api_servers_format() -> None:
    assert format_time(T0) == "2026-12-04T23:00:00Z"
    assert parse_time("2026-12-04T23:00:00Z") == T0
    assert parse_time(None) is None
    assert parse_time("yesterday") is None


def test_a_wait_is_over_once_its_limit_has_passed_since_its_start() -> None:
    limit = timedelta(seconds=30)
    assert remaining(T0, limit, T0 + 10) == 20
    assert remaining(T0, limit, T0 + 30) == 0  # over: the caller proceeds
    assert remaining(T0, limit, T0 + 45) < 0
    # A start nobody recorded is never cut short on a guess.
    assert remaining(None, limit, T0 + 3600) == 30


def test_a_node_whose_drain_timed_out_rests_for_the_recheck_period() -> None:
    stamped = {DRAIN_TIMED_OUT_AT: format_time(T0)}
    assert resting_for(stamped, T0 + 60) == RECHECK_SECONDS - 60
    assert resting_for(stamped, T0 + RECHECK_SECONDS) == 0
    assert resting_for({}, T0) == 0
    assert resting_for({DRAIN_TIMED_OUT_AT: "garbage"}, T0) == 0


def test_the_deleting_condition_names_what_each_node_waits_for_then_the_expiry() -> None:
    waiting = {"n2": "1 pod(s) on n2: 0 evicted, 1 held by PDB", "n1": "pods terminating"}
    grace = timedelta(minutes=5)
    assert deletion_condition(waiting, grace, expired=False) == (
        "Deleting",
        "True",
        "Draining",
        "draining 2 node(s) for at most 5m: pods terminating; "
        "1 pod(s) on n2: 0 evicted, 1 held by PDB",
    )
    kind, status, reason, message = deletion_condition(
        {"n1": "node n1: 2 pod(s) not evicted"}, grace, expired=True
    )
    assert (kind, status, reason) == ("Deleting", "True", "TerminationGracePeriodExpired")
    assert message == (
        "terminationGracePeriod 5m ran out; deleting the nodes anyway: "
        "node n1: 2 pod(s) not evicted"
    )


def test_the_condition_names_a_few_nodes_and_counts_the_rest() -> None:
    waiting = {f"n{i}": f"n{i} waits" for i in range(8)}
    _, _, _, message = deletion_condition(waiting, timedelta(hours=1), expired=False)
    assert message.endswith("n4 waits; and 3 more node(s)")
    assert message.startswith("draining 8 node(s) for at most 1h: n0 waits")


def test_event_notes_say_what_was_given_up() -> None:
    assert grace_expired_note(timedelta(seconds=4), {"b": 1, "a": 2}) == (
        "terminationGracePeriod 4s ran out with 2 node(s) not drained (a, b): removing the "
        "nodes and VMs with 3 pod(s) not evicted (the pod garbage collector deletes them)"
    )
    assert drain_timeout_note("n1", timedelta(minutes=10), "1 held by PDB") == (
        "node n1 not drained within drainTimeout 10m; untainted and kept, another node is "
        "tried (not this one for 5m): 1 held by PDB"
    )
