"""How many of the pool's Nodes are being disrupted (``status.disruption``)."""

from __future__ import annotations

from nodepool_operator.controllers.nodepool import _disruption
from tests.unit.nodepool_operator.controllers.nodepool.tables import node, pool, rec


def test_disruption_status_counts_taints_deletions_and_this_pass_s_choices() -> None:
    the_pool = pool(3)
    records = [rec("a", "deleting"), rec("b"), rec("c")]
    nodes = {"n-a": node("a"), "n-b": node("b", tainted=True), "n-c": node("c")}
    by_instance = {n.instance_id: n for n in nodes.values()}
    status = _disruption.disruption_status(the_pool, records, nodes, by_instance)
    assert status.disrupting == 2  # b by its taint, a by this pass's record
    assert status.allowed == 0  # the default budget, 10% of 3, rounds up to 1
