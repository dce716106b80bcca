"""The interruption queue's messages decode into typed records at the boundary: each
EventBridge detail-type the rules send, the states and Health categories acted on or not,
and every malformed body refused with a message naming what is wrong."""

from __future__ import annotations

import json

import pytest

from nodepool_operator.controllers.interruption import (
    SPOT_NOTICE_SECONDS,
    Ignored,
    Rebalance,
    ScheduledChange,
    SpotInterruption,
    StateChange,
    UnreadableMessage,
    deadline_of,
    decode,
    instances_of,
)
from tests.unit.nodepool_operator.controllers.interruption.fixtures import (
    EPOCH,
    INSTANCE,
    event,
    health,
    rebalance,
    spot_warning,
    state_change,
)

RETIREMENT = 1796612400.0  # Mon, 07 Dec 2026 03:00:00 GMT


def test_a_spot_warning_gives_two_minutes() -> None:
    message = decode(spot_warning())
    assert message == SpotInterruption(INSTANCE, "terminate", EPOCH)
    assert instances_of(message) == (INSTANCE,)
    assert deadline_of(message) == EPOCH + SPOT_NOTICE_SECONDS == EPOCH + 120


@pytest.mark.parametrize("action", ["terminate", "stop", "hibernate"])
def test_every_spot_action_is_an_interruption(action: str) -> None:
    message = decode(spot_warning(action=action))
    assert isinstance(message, SpotInterruption)
    assert message.action == action


def test_a_rebalance_recommendation_names_no_instance_to_replace() -> None:
    message = decode(rebalance())
    assert message == Rebalance(INSTANCE, EPOCH)
    assert message.kind == "RebalanceRecommendation"
    assert instances_of(message) == ()


@pytest.mark.parametrize("state", ["stopping", "stopped", "shutting-down", "terminated"])
def test_a_vm_going_away_is_a_state_change_due_now(state: str) -> None:
    message = decode(state_change(state))
    assert message == StateChange(INSTANCE, state, EPOCH)
    assert deadline_of(message) == EPOCH


@pytest.mark.parametrize("state", ["pending", "running"])
def test_a_vm_starting_is_ignored(state: str) -> None:
    message = decode(state_change(state))
    assert isinstance(message, Ignored)
    assert message.kind == "StateChange"
    assert instances_of(message) == ()


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("Mon, 07 Dec 2026 03:00:00 GMT", RETIREMENT),  # as Health writes it
        ("2026-12-07T03:00:00Z", RETIREMENT),
        (None, EPOCH),  # no start: the event's own time
    ],
)
def test_a_scheduled_change_names_its_instances_and_start(
    start: str | None, expected: float
) -> None:
    message = decode(health(INSTANCE, "i-0ffff", start=start))
    assert isinstance(message, ScheduledChange)
    assert message.instance_ids == (INSTANCE, "i-0ffff")
    assert message.event_type == "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
    assert deadline_of(message) == expected


@pytest.mark.parametrize(
    ("category", "service"),
    [("issue", "EC2"), ("accountNotification", "EC2"), ("scheduledChange", "RDS")],
)
def test_health_events_other_than_ec2_scheduled_changes_are_ignored(
    category: str, service: str
) -> None:
    message = decode(health(INSTANCE, category=category, service=service))
    assert isinstance(message, Ignored)
    assert message.kind == "HealthEvent"


def test_a_scheduled_change_without_an_instance_is_ignored() -> None:
    message = decode(health("vol-0123"))
    assert isinstance(message, Ignored)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"detail": {}}), "detail-type is missing"),
        (event("EC2 Something New", "aws.ec2", {"instance-id": INSTANCE}), "unknown detail-type"),
        (event("EC2 Spot Instance Interruption Warning", "aws.ec2", {}), "detail.instance-id"),
        (
            event("EC2 Instance State-change Notification", "aws.ec2", {"instance-id": "i-1"}),
            "detail.state",
        ),
        (spot_warning(time="yesterday"), "time: 'yesterday' is not a time"),
        (json.dumps({**json.loads(spot_warning()), "detail": [1]}), "detail is not an object"),
        (health(INSTANCE, start="someday"), "detail.startTime"),
        (
            event(
                "AWS Health Event",
                "aws.health",
                {"service": "EC2", "eventTypeCategory": "scheduledChange"},
            ),
            "affectedEntities",
        ),
    ],
)
def test_a_malformed_message_is_refused_naming_what_is_wrong(body: str, says: str) -> None:
    with pytest.raises(UnreadableMessage, match=says):
        decode(body)
