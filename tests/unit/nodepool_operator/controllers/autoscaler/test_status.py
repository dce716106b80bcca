"""The Autoscaler's status, written from a typed change: replace() on the parsed status, one
to_api; a condition's lastTransitionTime moves only when its status flips."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodepool_operator.api import UnremovableNode
from nodepool_operator.controllers.autoscaler._status import ConditionChange, StatusChange

T1 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T2 = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)

WATCHING = ConditionChange("Ready", "True", "Watching", "scaling NodePool big for pods in prod")
ALLOWED = ConditionChange(
    "Provisioning", "True", "ScaleUpAllowed", "NodePool big: scale-up allowed", if_present=True
)


def write(change: StatusChange, status: dict[str, Any], now: datetime) -> dict[str, Any]:
    raw = dict(status)
    change.mutate(now)(raw)
    return raw


def test_a_decision_writes_its_fields_and_conditions() -> None:
    change = StatusChange(
        generation=3,
        conditions=(WATCHING, ALLOWED),
        pending_pods=4,
        unschedulable_pods=2,
        last_decision="scale up 0 -> 1: 2 pods need 1 new mem96.large node",
        unremovable_nodes=(UnremovableNode(node="n-0", reason="NodeDoNotDisrupt"),),
        last_scale_time=T1,
    )
    assert write(change, {}, T1) == {
        "pendingPods": 4,
        "unschedulablePods": 2,
        "lastScaleTime": "2026-01-01T12:00:00Z",
        "lastDecision": "scale up 0 -> 1: 2 pods need 1 new mem96.large node",
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T12:00:00Z",
                "reason": "Watching",
                "message": "scaling NodePool big for pods in prod",
            }
        ],  # Provisioning is set only once it was ever False
        "unremovableNodes": [{"node": "n-0", "reason": "NodeDoNotDisrupt"}],
    }


def test_an_unchanged_decision_leaves_the_status_as_it_was() -> None:
    change = StatusChange(3, (WATCHING,), pending_pods=1, unschedulable_pods=1, last_decision="x")
    first = write(change, {}, T1)
    assert write(change, first, T2) == first  # so update_status sends nothing


def test_a_transition_moves_the_time_a_new_message_does_not() -> None:
    backing_off = ConditionChange("Provisioning", "False", "ProvisionTimedOut", "backed off")
    first = write(StatusChange(3, (WATCHING, backing_off)), {}, T1)
    reworded = ConditionChange("Provisioning", "False", "ProvisionTimedOut", "still backed off")
    second = write(StatusChange(4, (WATCHING, reworded)), first, T2)
    assert [c["lastTransitionTime"] for c in second["conditions"]] == [
        "2026-01-01T12:00:00Z",
        "2026-01-01T12:00:00Z",
    ]
    assert second["conditions"][1]["message"] == "still backed off"
    assert second["conditions"][1]["observedGeneration"] == 4
    allowed = write(StatusChange(4, (WATCHING, ALLOWED)), second, T2)
    assert allowed["conditions"][1]["status"] == "True"
    assert allowed["conditions"][1]["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_not_ready_changes_only_the_ready_condition() -> None:
    full = write(
        StatusChange(3, (WATCHING,), pending_pods=4, unschedulable_pods=2, last_decision="x"),
        {},
        T1,
    )
    missing = ConditionChange("Ready", "False", "NodePoolNotFound", "NodePool big not found")
    after = write(StatusChange(5, (missing,)), full, T2)
    assert (after["pendingPods"], after["lastDecision"], after["observedGeneration"]) == (4, "x", 5)
    assert after["conditions"][0]["reason"] == "NodePoolNotFound"
    assert after["conditions"][0]["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_an_empty_unremovable_list_drops_the_field() -> None:
    listed = StatusChange(3, (), unremovable_nodes=(UnremovableNode(node="n", reason="R"),))
    first = write(listed, {}, T1)
    assert "unremovableNodes" in first
    assert "unremovableNodes" not in write(StatusChange(3, (), unremovable_nodes=()), first, T2)
