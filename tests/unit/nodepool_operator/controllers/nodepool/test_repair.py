"""The repair decision (which unhealthy nodes are replaced now, which are held), table-driven."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers.nodepool._repair import (
    Unhealthy,
    decide_repair,
    unhealthy_since,
)

NOW = 10_000.0
TOL = 60.0


def _sick(node: str, ago: float, *, repairing: bool = False) -> Unhealthy:
    return Unhealthy(f"r-{node}", node, NOW - ago, "Ready=Unknown", repairing=repairing)


@pytest.mark.parametrize(
    ("case", "unhealthy", "pool", "replaced", "held"),
    [
        ("toleration not reached", [_sick("a", 30)], 10, [], []),
        ("one due, under the threshold", [_sick("a", 90)], 10, ["a"], []),
        ("two due: the longest unhealthy first", [_sick("a", 70), _sick("b", 90)], 10, ["b"], []),
        ("at the threshold exactly", [_sick("a", 90), _sick("b", 90)], 10, ["a"], []),
        (
            "over the threshold",
            [_sick("a", 90), _sick("b", 90), _sick("c", 10)],
            10,
            [],
            ["a", "b"],
        ),
        ("a third of the pool", [_sick(n, 90) for n in "abcd"], 12, [], list("abcd")),
        (
            "one being repaired: none more",
            [_sick("a", 90, repairing=True), _sick("b", 90)],
            10,
            [],
            [],
        ),
        ("the repaired one gone: the next", [_sick("b", 90)], 10, ["b"], []),
        ("healthy pool", [], 10, [], []),
    ],
)
def test_decide_repair(
    case: str, unhealthy: list[Unhealthy], pool: int, replaced: list[str], held: list[str]
) -> None:
    decided = decide_repair(
        unhealthy, pool_nodes=pool, toleration=TOL, max_unhealthy_percent=20, now=NOW
    )
    assert [u.node for u in decided.replace] == replaced, case
    assert sorted(decided.held) == held, case
    assert bool(decided.message) == bool(held), case


def test_the_held_message_counts_and_names() -> None:
    sick = [_sick(n, 90) for n in ("n1", "n2", "n3", "n4")]
    decided = decide_repair(sick, pool_nodes=10, toleration=TOL, max_unhealthy_percent=20, now=NOW)
    assert decided.message == (
        "4 of 10 nodes unhealthy (40%) > maxUnhealthyPercent 20%: not replacing n1, n2, n3, n4"
    )


def test_the_wait_is_until_the_next_toleration_ends() -> None:
    decided = decide_repair(
        [_sick("a", 50), _sick("b", 20)],
        pool_nodes=10,
        toleration=TOL,
        max_unhealthy_percent=50,
        now=NOW,
    )
    assert decided.replace == ()
    assert decided.wait == pytest.approx(10.0)


def test_a_zero_percent_threshold_never_repairs() -> None:
    decided = decide_repair(
        [_sick("a", 90)], pool_nodes=100, toleration=TOL, max_unhealthy_percent=0, now=NOW
    )
    assert decided.replace == ()
    assert decided.held == ("a",)


def _node(*conditions: tuple[str, str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": "n"},
        "status": {
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": at} for t, s, at in conditions
            ]
        },
    }


@pytest.mark.parametrize(
    ("conditions", "types", "expected"),
    [
        ([("Ready", "True", "2026-01-01T00:00:00Z")], (), None),
        ([("Ready", "Unknown", "2026-01-01T00:00:10Z")], (), (1767225610.0, "Ready=Unknown")),
        ([("Ready", "False", "2026-01-01T00:00:10Z")], (), (1767225610.0, "Ready=False")),
        ([("Ready", "False", "")], (), None),  # not since when: not judged
        (
            [
                ("Ready", "True", "2026-01-01T00:00:00Z"),
                ("KernelDeadlock", "True", "2026-01-01T00:00:05Z"),
            ],
            ("KernelDeadlock",),
            (1767225605.0, "KernelDeadlock=True"),
        ),
        (
            [
                ("Ready", "True", "2026-01-01T00:00:00Z"),
                ("KernelDeadlock", "True", "2026-01-01T00:00:05Z"),
            ],
            (),
            None,  # not a listed condition
        ),
        (
            [
                ("Ready", "True", "2026-01-01T00:00:00Z"),
                ("KernelDeadlock", "False", "2026-01-01T00:00:05Z"),
            ],
            ("KernelDeadlock",),
            None,
        ),
    ],
)
def test_unhealthy_since(
    conditions: list[tuple[str, str, str]],
    types: tuple[str, ...],
    expected: tuple[float, str] | None,
) -> None:
    assert unhealthy_since(_node(*conditions), types) == expected
