"""The phase table's pure half (``bench/phases.py``): recorded times in, per-phase medians out."""

from __future__ import annotations

from typing import Any

import pytest
from bench.phases import (
    MILESTONES,
    PHASES,
    ClaimSeen,
    Launch,
    NodeSeen,
    PodSeen,
    decision_before,
    karpenter_launches,
    last_to_run,
    node_schedulable,
    nth_after,
    our_launches,
    phase_medians,
    pod_timelines,
    table,
)

from tests import factories


def _chain(start: float, gaps: list[float]) -> dict[str, float]:
    """Every milestone, in order, ``gaps[i]`` seconds after the previous one."""
    times = {MILESTONES[0]: start}
    for m, gap in zip(MILESTONES[1:], gaps, strict=True):
        times[m] = times[list(times)[-1]] + gap
    return times


def _by_phase(result: dict[str, Any], key: str) -> dict[str, Any]:
    return {f"{p['from']}>{p['to']}": p[key] for p in result["phases"]}


GAPS = [0.5, 1.0, 0.25, 3.0, 0.2, 0.8, 1.5, 0.1, 0.4]


def test_an_ordered_chain_gives_each_phase_its_own_wait() -> None:
    result = phase_medians([_chain(100.0, GAPS)])
    medians = _by_phase(result, "median_s")
    assert list(medians.values()) == GAPS
    assert set(_by_phase(result, "out_of_order").values()) == {0}
    assert set(_by_phase(result, "n").values()) == {1}
    assert result["total"] == {"median_s": round(sum(GAPS), 3), "n": 1}
    assert result["pods"] == 1


def test_medians_are_over_the_pods_per_phase() -> None:
    pods = [_chain(0.0, [g * k for g in GAPS]) for k in (1, 2, 10)]
    medians = _by_phase(phase_medians(pods), "median_s")
    assert list(medians.values()) == [round(2 * g, 3) for g in GAPS]


def test_the_last_pod_to_run_gives_its_own_path_not_the_medians() -> None:
    # a first wave of three, then a second wave whose one pod waits longer for its decision
    first = {f"w1-{i}": _chain(0.0, GAPS) for i in range(3)}
    late_gaps = [GAPS[0], 4.0, *GAPS[2:]]
    timelines = {**first, "w2-0": _chain(12.0, late_gaps), "never": {"created": 1.0}}
    last = last_to_run(timelines)
    assert last["pod"] == "w2-0"
    assert last["pods"] == 1
    assert list(_by_phase(last, "median_s").values()) == late_gaps
    # the medians over all pods show the first wave's decision, not the one that mattered
    assert _by_phase(phase_medians(timelines.values()), "median_s")["unschedulable>decided"] == 1.0
    assert last_to_run({"never": {"created": 1.0}})["pod"] is None


def test_a_node_registered_before_its_boot_ends_costs_nothing_and_is_counted_early() -> None:
    # Karpenter's kwok Node: registered and Ready right after the launch, boot done 3 s later
    times = {
        "created": 0.0,
        "unschedulable": 0.1,
        "decided": 0.5,
        "cloud_create": 0.6,
        "registered": 0.7,
        "ready": 1.5,
        "boot_done": 3.6,
        "schedulable": 3.7,
        "bound": 4.0,
        "running": 4.5,
    }
    result = phase_medians([times])
    medians, early = _by_phase(result, "median_s"), _by_phase(result, "out_of_order")
    assert medians["cloud_create>boot_done"] == 3.0  # the boot holds the pod back
    assert medians["boot_done>registered"] == 0.0
    assert medians["registered>ready"] == 0.0
    assert medians["ready>schedulable"] == pytest.approx(0.1)
    assert [k for k, v in early.items() if v] == ["boot_done>registered", "registered>ready"]
    assert early["boot_done>registered"] == 1
    assert result["total"]["median_s"] == 4.5


def test_a_missing_milestone_leaves_both_its_phases_without_that_pod() -> None:
    full = _chain(0.0, GAPS)
    gap = dict(full)
    del gap["unschedulable"]
    result = phase_medians([full, gap])
    n = _by_phase(result, "n")
    assert n["created>unschedulable"] == 1
    assert n["unschedulable>decided"] == 1
    assert {k for k, v in n.items() if v == 2} == {f"{a}>{b}" for a, b in PHASES[2:]}
    assert result["total"]["n"] == 2


def test_no_pod_gives_no_medians() -> None:
    result = phase_medians([])
    assert result["pods"] == 0
    assert {p["median_s"] for p in result["phases"]} == {None}
    assert result["total"] == {"median_s": None, "n": 0}


def test_timelines_join_a_pod_to_its_node_and_launch() -> None:
    pods = {
        "a": PodSeen(created=10.0, unschedulable=10.2, bound=20.0, running=20.5, node="n1"),
        "never-ran": PodSeen(created=10.0, unschedulable=10.2),
        "b": PodSeen(created=30.0, bound=30.1, running=30.4, node="n1"),  # n1 was there
    }
    nodes = {"n1": NodeSeen(registered=18.0, ready=18.5, schedulable=19.0)}
    launches = {"n1": Launch(decided=11.0, cloud_create=11.5, boot_done=17.5)}
    timelines = pod_timelines(pods, nodes, launches)
    assert set(timelines) == {"a", "b"}
    assert list(timelines["a"]) == list(MILESTONES)
    assert timelines["a"]["boot_done"] == 17.5
    # b's node milestones came before b existed: not part of its wait
    assert timelines["b"] == {"created": 30.0, "bound": 30.1, "running": 30.4}


def test_a_pod_on_an_unknown_node_keeps_its_own_milestones() -> None:
    pods = {"a": PodSeen(created=1.0, unschedulable=1.1, bound=2.0, running=3.0, node="gone")}
    assert pod_timelines(pods, {}, {}) == {
        "a": {"created": 1.0, "unschedulable": 1.1, "bound": 2.0, "running": 3.0}
    }


def test_the_decision_is_the_last_raise_before_the_create_else_the_first() -> None:
    targets = [(0.0, 0), (5.0, 3), (6.0, 2), (8.0, 4), (12.0, 6)]
    assert decision_before(targets, 4.9) == 5.0  # the watch saw the raise after the create
    assert decision_before(targets, 5.0) == 5.0
    assert decision_before(targets, 7.0) == 5.0  # the lowering at 6 is no decision to create
    assert decision_before(targets, 9.0) == 8.0
    assert decision_before(targets, 99.0) == 12.0
    assert decision_before([], 1.0) is None
    assert decision_before([(0.0, 3), (1.0, 1)], 2.0) is None  # no raise at all


def test_our_launches_come_from_the_cloud_records() -> None:
    vm = factories.cloud_vm("i-1", name="pool-abc", created_at=7.0, launched_at=10.0)
    launches = our_launches([vm], [(0.0, 0), (6.5, 1)])
    assert launches == {"pool-abc": Launch(decided=6.5, cloud_create=7.0, boot_done=10.0)}


def test_karpenter_launches_match_nodes_to_claims_by_provider_id() -> None:
    claims = {
        "c1": ClaimSeen(created=1.0, launched=1.2, provider_id="kwok://n-a"),
        "c2": ClaimSeen(created=2.0),  # not launched yet: no provider id
    }
    nodes = {
        "n-a": NodeSeen(registered=1.3, provider_id="kwok://n-a"),
        "other": NodeSeen(registered=5.0, provider_id="kwok://other"),
    }
    launches = karpenter_launches(claims, nodes, {"n-a": 4.2})
    assert launches == {"n-a": Launch(decided=1.0, cloud_create=1.2, boot_done=4.2)}


def _node(*, ready: bool = True, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_a_node_is_schedulable_once_ready_and_its_blocking_taints_are_gone() -> None:
    assert node_schedulable(_node())
    assert not node_schedulable(_node(ready=False))
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert not node_schedulable(_node(taints=[not_ready]))
    unregistered = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
    assert not node_schedulable(_node(taints=[unregistered]))
    assert node_schedulable(_node(taints=[{"key": "soft", "effect": "PreferNoSchedule"}]))
    cordoned = _node()
    cordoned["spec"]["unschedulable"] = True
    assert not node_schedulable(cordoned)


def test_the_table_marks_early_milestones_and_empty_phases() -> None:
    times = _chain(0.0, GAPS)
    times["registered"] = times["cloud_create"]  # before boot done
    del times["unschedulable"]
    text = table([("S15", "karpenter", phase_medians([times]))])
    header, rule, row = text.splitlines()
    assert header.count("|") == rule.count("|") == row.count("|") == len(PHASES) + 5
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["S15", "karpenter", "–", "–"]
    assert cells[2 + MILESTONES.index("registered") - 1] == "0.00 [1 early]"
    assert cells[-1] == "1"


def test_all_n_reached_is_the_nth_earliest_time_after_the_start() -> None:
    times = [105.5, None, 101.0, 103.5, 102.25]
    assert nth_after(times, 1, 100.0) == 1.0
    assert nth_after(times, 4, 100.0) == 5.5
    # fewer reached than asked (a pod never ran): no figure, not the last one reached
    assert nth_after(times, 5, 100.0) is None
    assert nth_after([], 1, 100.0) is None
