"""The NodePool controller's plan: what to add, what to retire, and in which order."""

from __future__ import annotations

import pytest

from nodepool_operator.api import InstanceRecord
from nodepool_operator.controllers.nodepool._plan import Plan, desired_nodes, plan


def records(*names: str, state: str = "running") -> list[InstanceRecord]:
    return [InstanceRecord(name=n, instance_id=f"i-{n}", state=state) for n in names]


@pytest.mark.parametrize(
    ("target", "low", "high", "want"),
    [(3, 0, 10, 3), (0, 2, 10, 2), (12, 0, 10, 10), (5, 5, 5, 5)],
)
def test_desired_nodes_clamps_target_into_min_max(
    target: int, low: int, high: int, want: int
) -> None:
    assert desired_nodes(target, low, high) == want


def test_nothing_to_do_when_live_matches_desired() -> None:
    decided = plan(records("a", "b"), 2)
    assert decided == Plan()
    assert decided.empty


def test_missing_vms_become_new_intents() -> None:
    assert plan(records("a"), 3) == Plan(add=2)


def test_creating_intents_count_as_live() -> None:
    current = [*records("a"), InstanceRecord(name="b", state="creating")]
    assert plan(current, 2).empty


def test_surplus_follows_the_removal_order_nodes_without_a_node_first() -> None:
    current = records("old", "mid", "new")
    # all registered: the removal order decides
    assert plan(current, 1, order=["mid", "old", "new"]).retire == ("mid", "old")
    assert plan(current, 2, order=["old", "mid", "new"]).retire == ("old",)
    # "new" has no Node yet: it goes first, then the best ranked
    assert plan(current, 1, order=["old", "mid"]).retire == ("new", "old")
    # nothing registered: newest first
    assert plan(current, 1).retire == ("new", "mid")


def test_intents_not_yet_created_go_before_serving_vms() -> None:
    current = [*records("a", "b"), InstanceRecord(name="c", state="creating")]
    assert plan(current, 2).retire == ("c",)


def test_gone_vms_are_retired_and_replaced() -> None:
    decided = plan(records("a", "b", "c"), 3, gone={"b"})
    assert decided == Plan(retire=("b",), add=1)


def test_gone_vms_are_retired_before_the_surplus() -> None:
    decided = plan(records("a", "b", "c"), 1, gone={"a"})
    assert decided.retire == ("a", "c")


def test_records_being_deleted_are_neither_counted_nor_chosen() -> None:
    current = [*records("a", "b"), *records("x", state="deleting")]
    assert plan(current, 2).empty
    assert plan(current, 3) == Plan(add=1)
    assert plan(current, 1).retire == ("b",)


def test_kept_records_count_but_are_not_chosen_so_the_next_candidate_goes() -> None:
    current = records("a", "b", "c")
    # "a" ranks first but its drain just timed out: "b" goes instead.
    assert plan(current, 2, order=["a", "b", "c"], keep={"a"}).retire == ("b",)
    # Every candidate kept: the surplus waits (nothing chosen, nothing added).
    assert plan(records("a", "b"), 1, order=["a", "b"], keep={"a", "b"}).empty
