"""Autoscaler: what it reports (lastDecision, Event notes) and when it scales down."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nodepool_operator.controllers._capacity import PoolNodes
from nodepool_operator.controllers.autoscaler._pending import Blocked, Blocker
from nodepool_operator.controllers.autoscaler._texts import (
    DECISION_MAX,
    NotTriggered,
    decision_text,
    next_unneeded_due,
    not_triggered,
    scale_down_target,
    scale_down_text,
    set_aside,
    track_unneeded,
)
from nodepool_operator.scheduling import NodeTemplate, PodRef, ScaleUpPlan
from tests.unit.nodepool_operator.scheduling.plans import plan_pods


def pod(name: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"memory": memory}}}],
            **spec,
        },
    }


TEMPLATE = NodeTemplate.from_pool("mem96.large", cpu=12, memory="96Gi")
SECRET = Blocked(Blocker.MISSING_SECRET, 'secret "db" not found')


def described(plan: ScaleUpPlan, aside: tuple[NotTriggered, ...], **kw: Any) -> str:
    """``decision_text`` of ``plan``, as the decision hands it over."""
    planned = bool(plan.placements or plan.unschedulable)
    return decision_text(plan.summary, plan.current_target, aside, planned=planned, **kw)


def test_set_aside_groups_pods_by_reason_and_detail() -> None:
    groups = set_aside(
        [
            (PodRef("prod", "b"), SECRET),
            (PodRef("prod", "a"), SECRET),
            (PodRef("prod", "c"), Blocked(Blocker.UNBOUND_PVC, "pvc")),
        ]
    )
    assert groups == (
        NotTriggered(
            "MissingSecret", 'secret "db" not found', (PodRef("prod", "a"), PodRef("prod", "b"))
        ),
        NotTriggered("UnboundPVC", "pvc", (PodRef("prod", "c"),)),
    )


def test_notes_name_a_few_pods_and_count_the_rest() -> None:
    group = NotTriggered(
        "TooBig", "memory 120Gi > 96Gi", tuple(PodRef("prod", f"p{i}") for i in range(5))
    )
    assert (
        group.note == "TooBig: 5 pods (memory 120Gi > 96Gi): prod/p0, prod/p1, prod/p2 and 2 more"
    )
    assert group.pod_note == "pod didn't trigger scale-up: TooBig: memory 120Gi > 96Gi"


def test_decision_describes_the_plan_and_the_pods_set_aside() -> None:
    plan = plan_pods(
        [pod("fits", "28Gi"), pod("huge", "120Gi")],
        template=TEMPLATE,
        current_target=0,
        max_nodes=10,
    )
    aside = set_aside([(PodRef("prod", "s"), SECRET)])
    text = described(plan, aside)
    assert text.startswith("scale up 0 -> 1: 1 pod needs 1 new mem96.large node")
    assert "1 pod too big (memory 120Gi > 96Gi)" in text
    assert text.endswith('1 pod MissingSecret (secret "db" not found)')
    groups = not_triggered(plan, aside)
    assert [g.reason for g in groups] == ["TooBig", "MissingSecret"]


def test_decision_with_only_pods_set_aside_does_not_claim_nothing_is_pending() -> None:
    plan = plan_pods([], template=TEMPLATE, current_target=2, max_nodes=10)
    assert described(plan, ()) == "no scale up (target 2): no pending pods"
    aside = set_aside([(PodRef("prod", "s"), SECRET)])
    assert (
        described(plan, aside)
        == 'no scale up (target 2); 1 pod MissingSecret (secret "db" not found)'
    )


def test_pods_waiting_for_the_scheduler_are_named_not_hidden() -> None:
    plan = plan_pods([], template=TEMPLATE, current_target=2, max_nodes=10)
    assert described(plan, (), settling=2) == (
        "no scale up (target 2); 2 pods waiting for the scheduler on new Ready nodes"
    )


def test_a_scale_down_replaces_the_head_and_keeps_the_groups() -> None:
    plan = plan_pods([pod("huge", "120Gi")], template=TEMPLATE, current_target=3, max_nodes=10)
    head = scale_down_text(3, 1, timedelta(minutes=10))
    assert described(plan, (), head=head) == (
        "scale down 3 -> 1: nodes unneeded for 10m; 1 pod too big (memory 120Gi > 96Gi)"
    )


def test_decision_is_bounded() -> None:
    plan = plan_pods([], template=TEMPLATE, current_target=0, max_nodes=10)
    aside = tuple(NotTriggered(f"R{i}", "x" * 400, (PodRef("prod", "p"),)) for i in range(6))
    text = described(plan, aside)
    assert len(text) <= DECISION_MAX
    assert text.endswith("...")


def nodes(registered: int, ready: int, empty: tuple[str, ...]) -> PoolNodes:
    return PoolNodes(registered=registered, ready=ready, room=(), empty=empty)


def test_scale_down_after_the_unneeded_time_not_below_min() -> None:
    since = {"n1": 0.0, "n2": 0.0, "n3": 50.0}
    common: dict[str, Any] = {
        "unneeded_since": since,
        "unneeded_seconds": 60.0,
        "pods_need_room": False,
    }
    settled = nodes(4, 4, ("n1", "n2", "n3"))
    assert scale_down_target(target=4, min_nodes=0, nodes=settled, now=30.0, **common) is None
    assert scale_down_target(target=4, min_nodes=0, nodes=settled, now=60.0, **common) == 2
    assert scale_down_target(target=4, min_nodes=3, nodes=settled, now=60.0, **common) == 3
    assert scale_down_target(target=4, min_nodes=0, nodes=settled, now=110.0, **common) == 1
    assert scale_down_target(target=4, min_nodes=4, nodes=settled, now=110.0, **common) is None


def test_no_scale_down_while_pods_need_room_or_the_pool_is_not_settled() -> None:
    common: dict[str, Any] = {
        "target": 2,
        "min_nodes": 0,
        "unneeded_since": {"n1": 0.0},
        "now": 100.0,
        "unneeded_seconds": 10.0,
    }
    settled = nodes(2, 2, ("n1",))
    assert scale_down_target(nodes=settled, pods_need_room=False, **common) == 1
    assert scale_down_target(nodes=settled, pods_need_room=True, **common) is None
    booting = nodes(2, 1, ("n1",))
    assert scale_down_target(nodes=booting, pods_need_room=False, **common) is None
    shrinking = nodes(3, 3, ("n1",))
    assert scale_down_target(nodes=shrinking, pods_need_room=False, **common) is None
    draining = PoolNodes(registered=2, ready=2, room=(), empty=("n1",), leaving=1)
    assert scale_down_target(nodes=draining, pods_need_room=False, **common) is None


def test_unneeded_time_restarts_when_a_node_is_needed_again() -> None:
    since = track_unneeded({}, ["n1", "n2"], now=10.0)
    since = track_unneeded(since, ["n1"], now=20.0)
    since = track_unneeded(since, ["n1", "n2"], now=30.0)
    assert since == {"n1": 10.0, "n2": 30.0}
    assert next_unneeded_due(since, now=35.0, unneeded_seconds=60.0) == 35.0
    assert next_unneeded_due({}, now=35.0, unneeded_seconds=60.0) is None
