"""Expiry as a decision table: which nodes are older than expireAfter, the replacement
launched first, the old node drained only once the replacement is Ready, the budgets (reason
Drifted) bounding how many at once, counted from the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.controllers.nodepool import decide
from tests.unit.nodepool_operator.controllers.nodepool.tables import (
    NOW,
    SETTINGS,
    node,
    observed,
    pool,
    rec,
    states,
    vm,
)

HOUR = 3600.0


def reasons(decision: decide.Decision) -> list[str]:
    return [e.reason for e in decision.events]


def expiring(**disruption: Any) -> dict[str, Any]:
    return {"disruption": {"expireAfter": "1h", **disruption}}


def test_without_expire_after_an_old_node_stays() -> None:
    seen = observed(pool(1, [rec("a")]), [node("a")], [vm("a", age=1000 * HOUR)])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.add, decision.retire, decision.expiring) == (0, (), "")


def test_an_expired_node_gets_its_replacement_first_and_keeps_serving() -> None:
    records = [rec("a"), rec("b")]
    seen = observed(
        pool(2, records, **expiring()),
        [node("a"), node("b")],
        [vm("a", age=2 * HOUR), vm("b", age=HOUR - 60)],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.add == 1
    assert decision.retire == ()
    assert decision.taint == ()
    assert sorted(states(decision).values()) == ["creating", "running", "running"]
    assert states(decision)["a"] == "running"
    assert reasons(decision) == ["ScalingUp", "Expiring"]
    assert "n-a" in decision.expiring
    assert "n-b" not in decision.expiring
    assert pytest.approx(60.0) in decision.waits  # b expires in a minute


@pytest.mark.parametrize(
    ("replacement", "ready"),
    [
        (None, False),  # launched, no Node yet
        (False, False),  # registered, not Ready
    ],
)
def test_the_expired_node_waits_for_its_replacement_to_be_ready(
    replacement: bool | None, ready: bool
) -> None:
    records = [rec("a"), rec("c", "running")]
    nodes = [node("a")] + ([] if replacement is None else [node("c", ready=ready)])
    seen = observed(pool(1, records, **expiring()), nodes, [vm("a", age=2 * HOUR), vm("c", age=30)])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.add, decision.retire, decision.taint) == (0, (), ())
    assert "n-a" in decision.expiring


def test_once_the_replacement_is_ready_the_expired_node_is_tainted_and_retired() -> None:
    records = [rec("a"), rec("c")]
    seen = observed(
        pool(1, records, **expiring()),
        [node("a"), node("c")],
        [vm("a", age=2 * HOUR), vm("c", age=30)],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.retire == ("a",)
    assert decision.taint == ("n-a",)
    assert decision.add == 0
    assert states(decision) == {"a": "deleting", "c": "running"}
    assert reasons(decision) == ["Expired"]


@pytest.mark.parametrize(
    ("budgets", "tainted", "aside", "held"),
    [
        ([{"nodes": "1"}], 0, ["a"], ["n-b", "n-c"]),  # one at a time, oldest first
        ([{"nodes": "2"}], 0, ["a", "b"], ["n-c"]),
        ([{"nodes": "2"}], 1, ["a"], ["n-b", "n-c"]),  # one already disrupted (taint)
        ([{"nodes": "0"}], 0, [], ["n-a", "n-b", "n-c"]),  # none: all held, none replaced
        ([{"nodes": "1", "reasons": ["Drifted"]}], 0, ["a"], ["n-b", "n-c"]),
        ([{"nodes": "0", "reasons": ["Empty"]}], 0, ["a", "b", "c"], []),  # not ours
        ([], 0, ["a", "b", "c"], []),  # no budget: unbounded
    ],
)
def test_expiry_within_the_budgets_counted_from_the_cluster(
    budgets: list[dict[str, Any]], tainted: int, aside: list[str], held: list[str]
) -> None:
    names = ["a", "b", "c", "d", "e"]  # a oldest; d, e young; e tainted when asked
    records = [rec(n) for n in names]
    nodes = [node(n, tainted=(n == "e" and tainted > 0)) for n in names]
    ages = {"a": 5 * HOUR, "b": 4 * HOUR, "c": 3 * HOUR, "d": 60.0, "e": 60.0}
    seen = observed(
        pool(5, records, **expiring(budgets=budgets)),
        nodes,
        [vm(n, age=ages[n]) for n in names],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    # Set aside: not counted, so as many replacements are launched; none drained yet.
    assert decision.add == len(aside)
    assert decision.taint == ()
    assert list(decision.expiry_held) == held
    for name in aside:
        assert f"n-{name}" in decision.expiring
    assert all(states(decision)[n] == "running" for n in names)


def test_an_expired_node_whose_drain_timed_out_rests_aside_and_its_replacement_stays() -> None:
    records = [rec("a"), rec("c")]
    seen = observed(
        pool(1, records, **expiring()),
        [node("a", timed_out_at=NOW - 10), node("c")],
        [vm("a", age=2 * HOUR), vm("c", age=30)],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    # neither drained again at once nor is its replacement taken as surplus
    assert (decision.add, decision.retire, decision.taint) == (0, (), ())
    assert "n-a" in decision.expiring
    # its rest over, it goes
    later = decide.decide(seen, NOW + 3600, SETTINGS)
    assert later.retire == ("a",)
