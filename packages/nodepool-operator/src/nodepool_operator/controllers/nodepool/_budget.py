"""Disruption budgets: how many more of a pool's nodes a voluntary disruption may take now
(the NodePool controller cuts its removals to it, the Autoscaler names no more nodes for a
consolidation at once).

Karpenter's rules (NodePool ``spec.disruption.budgets``): a budget is a count or a
percentage of the pool's nodes, the percentage rounded *up* (10% of 5 nodes is 1, of 0 nodes
0); a budget with reasons applies only to those, one without to every reason; the tightest
budget that applies wins, and when none applies the disruption is unbounded. The nodes
already being disrupted are subtracted, and they are counted from the cluster (the
``kubeloop.dev/disrupting`` taint, a deletionTimestamp), never from the operator's memory, so
the bound holds across a restart. Pure: the controller passes what it read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from nodepool_operator.api import Budget

__all__ = ["VOLUNTARY_REASONS", "allowed_disruptions", "budget_nodes"]

#: The reasons a budget may name; the pool's status reports the least allowed over them.
VOLUNTARY_REASONS: Final = ("Underutilized", "Empty", "Drifted")


def budget_nodes(nodes: str, pool_nodes: int) -> int:
    """The node count ``nodes`` ("3" or "10%") stands for in a pool of ``pool_nodes``."""
    if nodes.endswith("%"):
        return math.ceil(int(nodes[:-1]) * pool_nodes / 100)
    return int(nodes)


def allowed_disruptions(
    budgets: Sequence[Budget],
    pool_nodes: int,
    disrupting: int,
    reason: str,
    now: datetime | None = None,
) -> int:
    """How many more nodes may start a voluntary disruption for ``reason`` now.

    ``pool_nodes``: the pool's Nodes, those being disrupted included; ``disrupting``: how
    many of them are (:attr:`.records.PoolNode.disrupting`). ``now`` is for schedule windows, which
    admission refuses for now, so every budget is active. Never negative; ``pool_nodes``
    when no budget applies (no bound but the pool itself)."""
    del now  # budgets carry no schedule yet (refused at admission)
    applying = [b for b in budgets if not b.reasons or reason in b.reasons]
    if not applying:
        return max(0, pool_nodes - disrupting)
    limit = min(budget_nodes(b.nodes, pool_nodes) for b in applying)
    return max(0, limit - disrupting)
