"""A pool being deleted: the plan over its Nodes and the outcome after it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from nodepool_operator.controllers.nodepool import _deletion
from nodepool_operator.controllers.nodepool.observe import Deleted
from nodepool_operator.controllers.nodepool.records import PoolNode
from tests.unit.nodepool_operator.controllers.nodepool.tables import NOW, node

GRACE = timedelta(minutes=5)


def deleted(
    *nodes: PoolNode, alive: Sequence[str] = (), ids: Sequence[str] = (), ago: float = 10
) -> Deleted:
    return Deleted(
        name="p",
        uid="u-1",
        generation=2,
        deleted_at=NOW - ago,
        grace=GRACE,
        nodes=nodes,
        alive=frozenset(alive),
        ids=frozenset(ids or alive),
    )


def test_deletion_taints_every_drainable_node_before_draining_any() -> None:
    seen = deleted(
        node("a"),
        node("b", tainted=True),
        node("c", ready=False),
        node("d"),
        alive=["i-a", "i-b", "i-c"],
    )
    plan = _deletion.plan_deletion(seen, NOW)
    assert not plan.expired
    assert plan.taint == ("n-a",)  # b has it; c is not Ready; d's VM is gone
    assert [(n.name, step) for n, step in plan.steps] == [
        ("n-a", "drain"),
        ("n-b", "drain"),
        ("n-c", "remove"),
        ("n-d", "remove"),
    ]


def test_deletion_past_the_grace_period_forces_and_taints_nothing() -> None:
    seen = deleted(node("a"), node("b", ready=False), alive=["i-a", "i-b"], ago=301)
    plan = _deletion.plan_deletion(seen, NOW)
    assert plan.expired
    assert plan.taint == ()
    assert [step for _, step in plan.steps] == ["force", "remove"]


def test_deletion_outcome_while_draining_keeps_that_vm_and_requeues() -> None:
    seen = deleted(node("a"), node("b"), alive=["i-a", "i-b"], ids=["i-a", "i-b", "i-x"])
    plan = _deletion.plan_deletion(seen, NOW)
    outcome = _deletion.deletion_outcome(
        seen, plan, {"n-a": ("i-a", "node n-a: pods terminating")}, [1.0], {}
    )
    assert outcome.terminate == ("i-b", "i-x")
    assert outcome.condition is not None
    assert outcome.condition[1] == "True"
    assert outcome.requeue_after == 1.0
    assert outcome.events == ()


def test_deletion_outcome_past_grace_reports_the_pods_left_then_deletes() -> None:
    seen = deleted(node("a"), alive=["i-a"], ago=301)
    plan = _deletion.plan_deletion(seen, NOW)
    outcome = _deletion.deletion_outcome(seen, plan, {}, [], {"n-a": 2})
    assert outcome.requeue_after is None
    assert outcome.terminate == ("i-a",)
    assert [e.reason for e in outcome.events] == ["TerminationGracePeriodExpired", "Deleted"]
    assert outcome.condition is not None
    assert "2 pod(s) not evicted" in outcome.condition[3]


def test_deletion_outcome_when_done_is_deleted_alone() -> None:
    seen = deleted(node("a"), alive=["i-a"])
    outcome = _deletion.deletion_outcome(seen, _deletion.plan_deletion(seen, NOW), {}, [], {})
    assert outcome.condition is None
    assert outcome.requeue_after is None
    assert [(e.reason, e.note) for e in outcome.events] == [
        ("Deleted", "deleted 1 node(s) and 1 VM(s)")
    ]
