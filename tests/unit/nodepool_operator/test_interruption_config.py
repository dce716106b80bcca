"""config/interruption's template routes to the queue exactly the events the operator reads:
each rule's detail-type is one :func:`decode` knows (a sample of it decodes), every kind the
decoder acts on has a rule, the state-change rule sends the states acted on, and the queue's
policy lets EventBridge send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nodepool_operator.controllers.interruption import ACTIVE_STATES, Ignored, decode
from tests.unit.nodepool_operator.controllers.interruption.fixtures import (
    INSTANCE,
    health,
    rebalance,
    spot_warning,
    state_change,
)

TEMPLATE = (
    Path(__file__).resolve().parents[3] / "config" / "interruption" / "interruption-queue.yaml"
)


def resources(kind: str) -> dict[str, dict[str, Any]]:
    template = yaml.safe_load(TEMPLATE.read_text())
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_every_rule_targets_the_queue_and_sends_what_the_operator_decodes() -> None:
    samples = {
        "EC2 Spot Instance Interruption Warning": spot_warning(),
        "EC2 Instance Rebalance Recommendation": rebalance(),
        "AWS Health Event": health(INSTANCE),
        "EC2 Instance State-change Notification": state_change("terminated"),
    }
    rules = resources("AWS::Events::Rule")
    routed = set()
    for rule in rules.values():
        props = rule["Properties"]
        assert props["Targets"] == [{"Id": "queue", "Arn": {"Fn::GetAtt": ["Queue", "Arn"]}}]
        (detail_type,) = props["EventPattern"]["detail-type"]
        routed.add(detail_type)
        assert not isinstance(decode(samples[detail_type]), Ignored)
    assert routed == set(samples)


def test_the_state_change_rule_sends_the_states_acted_on() -> None:
    (rule,) = [
        r
        for r in resources("AWS::Events::Rule").values()
        if "State-change" in r["Properties"]["EventPattern"]["detail-type"][0]
    ]
    assert set(rule["Properties"]["EventPattern"]["detail"]["state"]) == ACTIVE_STATES


def test_eventbridge_may_send_to_the_queue() -> None:
    (policy,) = resources("AWS::SQS::QueuePolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (send,) = [s for s in statements if s["Effect"] == "Allow"]
    assert "events.amazonaws.com" in send["Principal"]["Service"]
    assert send["Action"] == "sqs:SendMessage"
