"""The rest of a pass: garbage VMs and Nodes, the reservation backstop."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers.nodepool import _upkeep
from nodepool_operator.controllers.nodepool.records import PoolNode
from tests.unit.nodepool_operator.controllers.nodepool.tables import NOW, node, rec, vm


def test_garbage_unknown_vms_past_grace_and_nodes_whose_vm_is_gone() -> None:
    records = [rec("a"), rec("b", "creating", vm=False)]
    listed = [vm("a"), vm("old", age=120), vm("young", age=10), vm("b")]
    nodes = {"n-a": node("a"), "n-gone": node("gone"), "n-old": node("old")}
    found = _upkeep.garbage(records, listed, set(), nodes, NOW, grace=60)
    assert [v.name for v in found.vms] == ["old"]  # b's id is not back yet: its name guards it
    assert found.wait == 50
    assert found.nodes == ("n-gone",)  # n-old's VM is alive (until it is collected)


@pytest.mark.parametrize(
    ("the_node", "want"),
    [
        (node("a"), None),
        (node("a", reserved=True, ready=False), None),
        (node("a", reserved=True, ready_since=NOW - 30), 4 * 30.0 - 30),
        (node("a", reserved=True, ready_since=NOW - 500), 4 * 30.0 - 500),
    ],
)
def test_backstop_due(the_node: PoolNode, want: float | None) -> None:
    assert _upkeep.backstop_due(the_node, NOW, landing_grace=30.0) == want
