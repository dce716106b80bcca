"""EventBridge events as the interruption queue's rules deliver them (one per SQS message
body), in the shapes AWS documents for each detail-type; our own values."""

from __future__ import annotations

import json
from typing import Any

INSTANCE = "i-0a1b2c3d4e5f60718"
TIME = "2026-12-05T08:00:00Z"
EPOCH = 1796457600.0  # TIME


def event(detail_type: str, source: str, detail: dict[str, Any], **envelope: Any) -> str:
    body = {
        "version": "0",
        "id": "5d2f8c1e-7a3b-4c9d-8e1f-0a2b3c4d5e6f",
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": TIME,
        "region": "eu-west-1",
        "resources": [f"arn:aws:ec2:eu-west-1:123456789012:instance/{INSTANCE}"],
        "detail": detail,
        **envelope,
    }
    return json.dumps(body)


def spot_warning(instance: str = INSTANCE, action: str = "terminate", **envelope: Any) -> str:
    detail = {"instance-id": instance, "instance-action": action}
    return event("EC2 Spot Instance Interruption Warning", "aws.ec2", detail, **envelope)


def rebalance(instance: str = INSTANCE) -> str:
    return event("EC2 Instance Rebalance Recommendation", "aws.ec2", {"instance-id": instance})


def state_change(state: str, instance: str = INSTANCE) -> str:
    detail = {"instance-id": instance, "state": state}
    return event("EC2 Instance State-change Notification", "aws.ec2", detail)


def health(
    *instances: str,
    category: str = "scheduledChange",
    service: str = "EC2",
    start: str | None = "Mon, 07 Dec 2026 03:00:00 GMT",
) -> str:
    detail: dict[str, Any] = {
        "eventArn": "arn:aws:health:eu-west-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",
        "service": service,
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": category,
        "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
        "affectedEntities": [{"entityValue": i, "tags": {"team": "a"}} for i in instances],
    }
    if start is not None:
        detail["startTime"] = start
    return event("AWS Health Event", "aws.health", detail, resources=list(instances))
