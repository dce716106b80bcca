"""A Node being retired: drained or not, before and after each round of its drain."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodepool_operator.controllers.nodepool import _retire
from nodepool_operator.controllers.nodepool._drain import DrainStatus
from nodepool_operator.controllers.nodepool._retire import Verdict
from nodepool_operator.controllers.nodepool.records import PoolNode
from tests.unit.nodepool_operator.controllers.nodepool.tables import NOW, node


@pytest.mark.parametrize(
    ("the_node", "alive", "want"),
    [
        (node("a"), True, "drain"),
        (node("a", ready=False), True, "drain"),  # repaired: drained, for at most drainTimeout
        (node("a", ready=False, deleting=True), True, "remove"),  # deleted while unreachable
        (node("a", deleting=True), True, "drain"),  # kubectl delete node: drained
        (node("a"), False, "remove"),  # VM gone: nothing would finish
        (None, True, "remove"),
    ],
)
def test_termination(the_node: PoolNode | None, alive: bool, want: str) -> None:
    assert _retire.termination(the_node, alive) == want


@pytest.mark.parametrize(
    ("the_node", "want"),
    [
        (node("a"), "taint"),
        (node("a", tainted=True), "drain"),
        (node("a", timed_out_at=NOW - 10), "give_up"),  # given up already, record lost
        (node("a", timed_out_at=NOW - 10, deleting=True), "taint"),  # not a scale-down
    ],
)
def test_before_drain(the_node: PoolNode, want: str) -> None:
    assert _retire.before_drain(the_node, NOW) == want


TIMEOUT = timedelta(minutes=10)
PENDING = DrainStatus(done=False, retry_after=1.0, message="1 pod(s) on n-a")


@pytest.mark.parametrize(
    ("the_node", "status", "want"),
    [
        (node("a", tainted=True), DrainStatus(done=True), Verdict.DONE),
        (node("a", tainted=True, disrupting_since=NOW - 60), PENDING, Verdict.WAIT),
        (node("a", tainted=True, disrupting_since=NOW - 601), PENDING, Verdict.GIVE_UP),
        # a repair (not Ready) past drainTimeout goes on without the pods left
        (node("a", ready=False, disrupting_since=NOW - 601), PENDING, Verdict.FORCE),
        (node("a", ready=False, disrupting_since=NOW - 60), PENDING, Verdict.WAIT),
        # deleted by someone, Ready: its pods' holds apply however long it takes
        (node("a", deleting=True, disrupting_since=NOW - 601), PENDING, Verdict.WAIT),
        # no start known: never cut short on a guess
        (node("a", tainted=True), PENDING, Verdict.WAIT),
    ],
)
def test_after_drain_the_drain_deadline(
    the_node: PoolNode, status: DrainStatus, want: Verdict
) -> None:
    assert _retire.after_drain(the_node, status, TIMEOUT, NOW) is want
