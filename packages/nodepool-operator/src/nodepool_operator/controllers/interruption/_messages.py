"""The interruption queue's messages, decoded at the boundary into typed records. Pure.

EventBridge rules (config/interruption/) put four kinds of event on the queue, each SQS
message's body one event as EventBridge writes it (``version``, ``id``, ``detail-type``,
``source``, ``time``, ``resources``, ``detail``):

- ``EC2 Spot Instance Interruption Warning`` (``aws.ec2``): ``detail.instance-id`` goes in
  two minutes (``detail.instance-action``: terminate, stop or hibernate);
- ``EC2 Instance Rebalance Recommendation`` (``aws.ec2``): ``detail.instance-id`` is at an
  elevated risk of interruption, no deadline;
- ``AWS Health Event`` (``aws.health``), ``detail.service`` EC2 and
  ``detail.eventTypeCategory`` scheduledChange: each ``detail.affectedEntities[].entityValue``
  (an instance id) is retired, rebooted or stopped from ``detail.startTime``
  (RFC 1123, as Health writes it; RFC 3339 read too);
- ``EC2 Instance State-change Notification`` (``aws.ec2``): ``detail.instance-id`` is now
  ``detail.state``; stopping, stopped, shutting-down and terminated mean it is going.

:func:`decode` returns one record, :class:`Ignored` for a well-formed event that asks
nothing of the operator (another Health category, a VM starting), and raises
:class:`UnreadableMessage` for anything else, so the caller logs it once and deletes it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ACTIVE_STATES",
    "SPOT_NOTICE_SECONDS",
    "Ignored",
    "Message",
    "Rebalance",
    "ScheduledChange",
    "SpotInterruption",
    "StateChange",
    "UnreadableMessage",
    "decode",
]

#: EC2's notice before it takes a spot VM back.
SPOT_NOTICE_SECONDS: Final = 120.0
#: The states of a state-change notification that mean the VM is going.
ACTIVE_STATES: Final = frozenset({"stopping", "stopped", "shutting-down", "terminated"})

_SPOT: Final = "EC2 Spot Instance Interruption Warning"
_REBALANCE: Final = "EC2 Instance Rebalance Recommendation"
_HEALTH: Final = "AWS Health Event"
_STATE: Final = "EC2 Instance State-change Notification"


class UnreadableMessage(ValueError):
    """A message that is not one of the events the queue's rules send (or is malformed)."""


@dataclass(frozen=True, slots=True)
class SpotInterruption:
    instance_id: str
    action: str
    """terminate, stop or hibernate."""
    time: float
    kind: str = "SpotInterruption"

    @property
    def deadline(self) -> float:
        return self.time + SPOT_NOTICE_SECONDS


@dataclass(frozen=True, slots=True)
class Rebalance:
    instance_id: str
    time: float
    kind: str = "RebalanceRecommendation"


@dataclass(frozen=True, slots=True)
class ScheduledChange:
    instance_ids: tuple[str, ...]
    event_type: str
    """Health's eventTypeCode, e.g. AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED."""
    start: float
    """When the change starts: the VMs should be gone by then."""
    kind: str = "ScheduledChange"


@dataclass(frozen=True, slots=True)
class StateChange:
    instance_id: str
    state: str
    time: float
    kind: str = "StateChange"


@dataclass(frozen=True, slots=True)
class Ignored:
    """A well-formed event the operator has nothing to do for."""

    kind: str
    why: str


Message = SpotInterruption | Rebalance | ScheduledChange | StateChange | Ignored


def decode(body: str) -> Message:
    """The record of one message's body.

    Raises:
        UnreadableMessage: not JSON, not an EventBridge event, an unknown detail-type, or
            a field it needs missing or of the wrong type (the message says which).
    """
    try:
        event = json.loads(body)
    except ValueError as err:
        raise UnreadableMessage(f"not JSON: {err}") from err
    if not isinstance(event, dict):
        raise UnreadableMessage("not a JSON object")
    detail_type = _string(event, "detail-type")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise UnreadableMessage(f"{detail_type}: detail is not an object")
    time = _time(_string(event, "time"), "time")
    if detail_type == _SPOT:
        action = detail.get("instance-action")
        return SpotInterruption(
            _string(detail, "instance-id", "detail."),
            str(action) if isinstance(action, str) else "terminate",
            time,
        )
    if detail_type == _REBALANCE:
        return Rebalance(_string(detail, "instance-id", "detail."), time)
    if detail_type == _STATE:
        instance_id = _string(detail, "instance-id", "detail.")
        state = _string(detail, "state", "detail.")
        if state not in ACTIVE_STATES:
            return Ignored("StateChange", f"{instance_id} is {state}")
        return StateChange(instance_id, state, time)
    if detail_type == _HEALTH:
        return _health(detail, time)
    raise UnreadableMessage(f"unknown detail-type {detail_type!r}")


def _health(detail: dict[str, Any], time: float) -> Message:
    service = detail.get("service")
    category = detail.get("eventTypeCategory")
    if service != "EC2" or category != "scheduledChange":
        return Ignored("HealthEvent", f"service {service!r}, category {category!r}")
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise UnreadableMessage("AWS Health Event: detail.affectedEntities is not a list")
    ids = tuple(
        str(e["entityValue"])
        for e in entities
        if isinstance(e, dict) and str(e.get("entityValue", "")).startswith("i-")
    )
    if not ids:
        return Ignored("ScheduledChange", "no instance among the affected entities")
    start = detail.get("startTime")
    when = _time(start, "detail.startTime") if isinstance(start, str) and start else time
    event_type = detail.get("eventTypeCode")
    return ScheduledChange(ids, str(event_type or ""), when)


def _string(obj: dict[str, Any], key: str, where: str = "") -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise UnreadableMessage(f"{where}{key} is missing or not a string")
    return value


def _time(text: str, field: str) -> float:
    """Seconds since the epoch of an RFC 3339 time (EventBridge's ``time``) or an RFC 1123
    one (Health's ``startTime``: ``Sat, 05 Jun 2021 15:10:09 GMT``)."""
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError) as err:
        raise UnreadableMessage(f"{field}: {text!r} is not a time") from err
