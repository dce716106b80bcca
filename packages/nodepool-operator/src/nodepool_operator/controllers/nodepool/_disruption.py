"""How many of the pool's Nodes are being disrupted, and how many more may be now
(``spec.disruption.budgets``, :mod:`._budget`): ``status.disruption`` and the cut of a
scale-down's removals to what the budgets allow."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from nodepool_operator.api import DisruptionStatus, InstanceRecord, NodePool
from nodepool_operator.controllers.nodepool._budget import VOLUNTARY_REASONS, allowed_disruptions
from nodepool_operator.controllers.nodepool._instances import node_of
from nodepool_operator.controllers.nodepool._intent import DELETING
from nodepool_operator.controllers.nodepool._plan import Plan
from nodepool_operator.controllers.nodepool.records import PoolNode

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["disrupting", "disruption_status", "within_budget"]


def disrupting(
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> int:
    """The pool's Nodes being disrupted, as the cluster says (taint, deletionTimestamp) or as
    this pass decided (a record marked deleting whose Node is not tainted yet)."""
    chosen = {
        node.name
        for r in records
        if r.state == DELETING and (node := node_of(r, by_instance)) is not None
    }
    return sum(1 for name, n in nodes.items() if n.disrupting or name in chosen)


def disruption_status(
    pool: NodePool,
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> DisruptionStatus:
    """``status.disruption``: Nodes being disrupted, and how many more may start now for any
    reason (the least over the reasons a budget can name)."""
    count = disrupting(records, nodes, by_instance)
    budgets = pool.spec.disruption.budgets
    allowed = min(
        allowed_disruptions(budgets, len(nodes), count, reason, None)
        for reason in VOLUNTARY_REASONS
    )
    return DisruptionStatus(disrupting=count, allowed=allowed)


def within_budget(
    obs: Observation,
    records: Sequence[InstanceRecord],
    decided: Plan,
    leaving: Collection[str],
    empty: Collection[str],
) -> tuple[Plan, tuple[str, ...]]:
    """``decided`` with its voluntary removals of registered Nodes cut to what
    ``spec.disruption.budgets`` allows now (:mod:`._budget`), the Nodes already being
    disrupted counted from the cluster (taint or deletionTimestamp), so a restart changes
    nothing. A VM with no Node yet and what is leaving anyway (VM gone, Node deleted, not
    Ready) are not budgeted; the surplus held back goes on a later pass. Also the held."""
    by_instance = obs.by_instance()
    budgets = obs.pool.spec.disruption.budgets
    count, pool_nodes = disrupting(records, obs.nodes, by_instance), len(obs.nodes)
    by_name = {r.name: r for r in records}
    retire: list[str] = []
    held: list[str] = []
    for name in decided.retire:
        if name in leaving or node_of(by_name[name], by_instance) is None:
            retire.append(name)
            continue
        reason = "Empty" if name in empty else "Underutilized"
        if allowed_disruptions(budgets, pool_nodes, count, reason, None) > 0:
            retire.append(name)
            count += 1
        else:
            held.append(name)
    return replace(decided, retire=tuple(retire)), tuple(held)
