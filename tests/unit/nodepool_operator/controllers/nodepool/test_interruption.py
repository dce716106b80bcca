"""Interruptions as a decision table: a Node the interruption queue marked is replaced
replacement first while its VM has more than DRAIN_RESERVE seconds left, drained at once
when it has less or once the replacement is Ready; not budgeted; and its drain is not a
voluntary one (the pods' blockers and the drain timeout's give-up do not apply)."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers._interrupted import (
    INTERRUPTED,
    INTERRUPTED_BY,
    Interrupted,
    interrupted,
    mark_patch,
)
from nodepool_operator.controllers.nodepool import decide
from nodepool_operator.controllers.nodepool._interruption import DRAIN_RESERVE
from nodepool_operator.controllers.nodepool.records import decode_node
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


def spot(left: float) -> Interrupted:
    return Interrupted("SpotInterruption", NOW + left)


def reasons(decision: decide.Decision) -> list[str]:
    return [e.reason for e in decision.events]


def test_with_time_left_the_replacement_is_launched_first() -> None:
    records = [rec("a"), rec("b")]
    seen = observed(
        pool(2, records),
        [node("a", interrupted=spot(120)), node("b")],
        [vm("a"), vm("b")],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.add == 1
    assert (decision.retire, decision.taint) == ((), ())
    assert states(decision)["a"] == "running"
    assert reasons(decision) == ["ScalingUp", "Interrupting"]
    assert pytest.approx(120 - DRAIN_RESERVE) in decision.waits


@pytest.mark.parametrize("replacement", [None, False])
def test_the_interrupted_node_waits_while_its_replacement_is_not_ready(
    replacement: bool | None,
) -> None:
    records = [rec("a"), rec("c")]
    nodes = [node("a", interrupted=spot(120))]
    if replacement is not None:
        nodes.append(node("c", ready=replacement))
    seen = observed(pool(1, records), nodes, [vm("a"), vm("c")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.add, decision.retire, decision.taint) == (0, (), ())


def test_once_the_replacement_is_ready_the_node_is_tainted_and_retired() -> None:
    records = [rec("a"), rec("c")]
    seen = observed(
        pool(1, records),
        [node("a", interrupted=spot(100)), node("c")],
        [vm("a"), vm("c")],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.retire == ("a",)
    assert decision.taint == ("n-a",)
    assert decision.add == 0
    assert states(decision) == {"a": "deleting", "c": "running"}
    (event,) = decision.events
    assert (event.type, event.reason) == ("Warning", "Interrupted")
    assert "SpotInterruption" in event.note
    assert "replacement is Ready" in event.note


@pytest.mark.parametrize("left", [DRAIN_RESERVE, 30.0, 0.0, -5.0])
def test_with_too_little_time_it_is_drained_at_once_and_replaced(left: float) -> None:
    records = [rec("a"), rec("b")]
    seen = observed(
        pool(2, records),
        [node("a", interrupted=spot(left)), node("b")],
        [vm("a"), vm("b")],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.retire == ("a",)
    assert decision.taint == ("n-a",)
    assert decision.add == 1, "its replacement is launched in the same pass"
    assert reasons(decision) == ["Interrupted", "ScalingUp"]


def test_interruptions_are_not_held_by_a_zero_budget() -> None:
    records = [rec("a"), rec("b")]
    seen = observed(
        pool(2, records, disruption={"budgets": [{"nodes": "0"}]}),
        [node("a", interrupted=spot(10)), node("b", interrupted=spot(10))],
        [vm("a"), vm("b")],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert sorted(decision.retire) == ["a", "b"]
    assert decision.budget_held == ()
    assert decision.add == 2


def test_a_node_without_a_mark_or_being_deleted_is_not_interruptions_to_decide() -> None:
    records = [rec("a")]
    seen = observed(
        pool(1, records),
        [node("a", interrupted=spot(10), deleting=True)],
        [vm("a")],
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert "Interrupted" not in reasons(decision)  # the deleted Node's own path replaces it


def test_an_interrupted_node_is_not_a_voluntary_removal() -> None:
    assert node("a").scaling_down
    assert not node("a", interrupted=spot(60)).scaling_down


def test_the_mark_round_trips_through_the_nodes_annotations() -> None:
    patch = mark_patch("ScheduledChange", NOW + 3600)
    obj = {"metadata": {"name": "n-a", **patch["metadata"]}, "spec": {"providerID": "aws:///z/i-a"}}
    assert interrupted(obj) == Interrupted("ScheduledChange", NOW + 3600)
    assert decode_node(obj).interrupted == Interrupted("ScheduledChange", NOW + 3600)
    assert set(patch["metadata"]["annotations"]) == {INTERRUPTED, INTERRUPTED_BY}
    broken = {"metadata": {"annotations": {INTERRUPTED: "X", INTERRUPTED_BY: "soon"}}}
    assert interrupted(broken) is None
    assert interrupted({"metadata": {}}) is None
