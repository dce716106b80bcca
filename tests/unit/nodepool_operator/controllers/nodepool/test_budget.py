"""Disruption budgets: the pure decision of how many more nodes may be disrupted now."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.api import Budget, InvalidField, parse_nodepool
from nodepool_operator.controllers.nodepool._budget import allowed_disruptions, budget_nodes
from nodepool_operator.controllers.nodepool.records import decode_node


@pytest.mark.parametrize(
    ("nodes", "pool", "want"),
    [
        ("10%", 0, 0),
        ("10%", 1, 1),  # rounded up, as Karpenter: a pool with nodes gets at least one
        ("10%", 5, 1),
        ("10%", 10, 1),
        ("10%", 11, 2),
        ("10%", 19, 2),
        ("25%", 8, 2),
        ("0%", 50, 0),
        ("100%", 7, 7),
        ("3", 2, 3),
        ("0", 9, 0),
    ],
)
def test_budget_nodes_rounds_percentages_up(nodes: str, pool: int, want: int) -> None:
    assert budget_nodes(nodes, pool) == want


@pytest.mark.parametrize(
    ("budgets", "pool", "disrupting", "reason", "want"),
    [
        ([Budget()], 5, 0, "Underutilized", 1),  # the default: 10%
        ([Budget()], 5, 1, "Underutilized", 0),  # one under way uses it
        ([Budget(nodes="1")], 5, 3, "Empty", 0),  # never negative
        ([Budget(nodes="3")], 10, 1, "Empty", 2),
        ([Budget(nodes="0")], 10, 0, "Empty", 0),  # 0 blocks
        ([Budget(nodes="50%"), Budget(nodes="2")], 10, 0, "Empty", 2),  # tightest wins
        # A budget with reasons applies to those only.
        ([Budget(nodes="0", reasons=["Drifted"])], 10, 0, "Drifted", 0),
        ([Budget(nodes="0", reasons=["Drifted"])], 10, 2, "Empty", 8),  # none applies
        ([Budget(nodes="0", reasons=["Drifted"]), Budget(nodes="4")], 10, 1, "Empty", 3),
        ([Budget(nodes="0", reasons=["Empty", "Drifted"]), Budget(nodes="4")], 10, 1, "Empty", 0),
        ([], 6, 2, "Underutilized", 4),  # no budgets: only the pool bounds it
    ],
)
def test_allowed_disruptions(
    budgets: list[Budget], pool: int, disrupting: int, reason: str, want: int
) -> None:
    assert allowed_disruptions(budgets, pool, disrupting, reason, None) == want


def _node(*, taints: list[dict[str, str]] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"taints": taints or []}}


def test_disrupting_is_read_from_the_node() -> None:
    tainted = [{"key": "kubeloop.dev/disrupting", "effect": "NoSchedule"}]
    assert decode_node(_node(taints=tainted)).disrupting
    assert decode_node(_node(deleting=True)).disrupting
    assert not decode_node(_node(taints=[{"key": "other", "effect": "NoSchedule"}])).disrupting
    assert not decode_node({"metadata": {"name": "n"}}).disrupting


def _pool(disruption: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"instanceType": "m5.large", "disruption": disruption},
    }


def test_default_budget_is_ten_percent() -> None:
    pool = parse_nodepool(_pool({}))
    assert pool.spec.disruption.budgets == [Budget(nodes="10%")]
    assert parse_nodepool(_pool({"budgets": []})).spec.disruption.budgets == []


@pytest.mark.parametrize(
    "budget",
    [{"nodes": "10"}, {"nodes": "0"}, {"nodes": "100%"}, {"nodes": "5%", "reasons": ["Empty"]}],
)
def test_budget_accepted(budget: dict[str, Any]) -> None:
    parse_nodepool(_pool({"budgets": [budget]}))


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"nodes": "101%"}, "budgets[0].nodes"),
        ({"nodes": "-1"}, "budgets[0].nodes"),
        ({"nodes": "ten"}, "budgets[0].nodes"),
        ({"nodes": "1", "reasons": ["Bored"]}, "budgets[0].reasons"),
        ({"nodes": "1", "schedule": "@daily", "duration": "1h"}, "budgets[0]"),
    ],
)
def test_budget_refused_naming_the_field(budget: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidField) as err:
        parse_nodepool(_pool({"budgets": [budget]}))
    assert field in str(err.value.path)
