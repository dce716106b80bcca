"""Scheduling simulation, part 3: the exact search after FFD finds the fewest new nodes.

The oracle for random instances is an exhaustive enumeration written here (every way to split
the pods into nodes), independent of the planner's branch-and-bound.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from nodepool_operator.scheduling import (
    NodeState,
    NodeTemplate,
    PlanReason,
    Resources,
    ScaleUpPlan,
    SearchBudget,
    plan_scale_up,
)

GI = 2**30


def pod(name: str, memory: str, cpu: str = "100m") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        },
    }


def node_loads(plan: ScaleUpPlan, pods: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """CPU millicores and memory GiB per planned node, from the pods' own requests."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    loads: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for placement in plan.placements:
        requests = by_name[placement.pod.name]["spec"]["containers"][0]["resources"]["requests"]
        loads[placement.node][0] += int(requests["cpu"].removesuffix("m"))
        loads[placement.node][1] += int(requests["memory"].removesuffix("Gi"))
    return {node: (cpu, mem) for node, (cpu, mem) in loads.items()}


def assert_valid(plan: ScaleUpPlan, pods: list[dict[str, Any]], cpu_m: int, mem_gi: int) -> None:
    assert len(plan.placements) == len(pods)
    assert len({p.pod for p in plan.placements}) == len(pods)
    loads = node_loads(plan, pods)
    assert all(cpu <= cpu_m and mem <= mem_gi for cpu, mem in loads.values()), loads
    assert len([n for n in loads if n.startswith("new:")]) == plan.new_nodes


# The classic instance where first-fit-decreasing opens a node too many: 5, 4, 4, 3, 2, 2 on
# nodes of 10 go 5+4 | 4+3+2 | 2 with FFD, while 5+3+2 | 4+4+2 fills two nodes exactly.
CLASSIC = [("a", "5Gi"), ("b", "4Gi"), ("c", "4Gi"), ("d", "3Gi"), ("e", "2Gi"), ("f", "2Gi")]


@pytest.fixture
def ten_gi() -> NodeTemplate:
    return NodeTemplate.from_pool("mem10", cpu=16, memory="10Gi", disk="100Gi")


def test_classic_instance_needs_one_node_fewer_than_ffd(ten_gi: NodeTemplate) -> None:
    pods = [pod(n, m) for n, m in CLASSIC]
    ffd = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=10, search=None)
    exact = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=10)
    assert ffd.new_nodes == 3
    assert exact.new_nodes == 2
    assert exact.desired_target == 2
    assert_valid(exact, pods, 16_000, 10)
    assert sorted(node_loads(exact, pods).values()) == [(300, 10), (300, 10)]


def test_two_resource_instance_ffd_misses(ten_gi: NodeTemplate) -> None:
    # On a 4 CPU / 10Gi node, CPU 7.9 of 8 and memory 19 of 20 fit two nodes only as
    # 2000m/6Gi + 1900m/3Gi | 2000m/2Gi + 1200m/2Gi + 800m/6Gi; FFD (largest share first)
    # pairs the two 6Gi pods' neighbours wrongly and opens a third.
    template = NodeTemplate.from_pool("mix", cpu=4, memory="10Gi", disk="100Gi")
    pods = [
        pod("a", "6Gi", "800m"),
        pod("b", "3Gi", "1900m"),
        pod("c", "2Gi", "1200m"),
        pod("d", "6Gi", "2000m"),
        pod("e", "2Gi", "2000m"),
    ]
    ffd = plan_scale_up(pods, template=template, current_target=0, max_nodes=10, search=None)
    exact = plan_scale_up(pods, template=template, current_target=0, max_nodes=10)
    assert (ffd.new_nodes, exact.new_nodes) == (3, 2)
    assert_valid(exact, pods, 4000, 10)


def test_max_nodes_reached_by_ffd_but_not_by_the_optimum(ten_gi: NodeTemplate) -> None:
    pods = [pod(n, m) for n, m in CLASSIC]
    ffd = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=2, search=None)
    exact = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=2)
    assert [g.reason for g in ffd.unschedulable] == [PlanReason.MAX_NODES_REACHED]
    assert exact.unschedulable == ()
    assert (exact.new_nodes, exact.desired_target) == (2, 2)


def test_ready_and_booting_nodes_cost_nothing(ten_gi: NodeTemplate) -> None:
    # A ready node with 5Gi free and one booting node hold 15 of the 20Gi: one new node is
    # the fewest, and the plan must not put more than 5Gi on the ready node.
    pods = [pod(n, m) for n, m in CLASSIC]
    ready = NodeState("ready-a", Resources(cpu=16_000, memory=5 * GI, pods=100))
    exact = plan_scale_up(
        pods, template=ten_gi, existing_nodes=[ready], in_flight=1, current_target=2, max_nodes=9
    )
    ffd = plan_scale_up(
        pods,
        template=ten_gi,
        existing_nodes=[ready],
        in_flight=1,
        current_target=2,
        max_nodes=9,
        search=None,
    )
    assert exact.new_nodes == 1
    assert ffd.new_nodes >= exact.new_nodes
    loads = node_loads(exact, pods)
    assert loads["existing:ready-a"][1] <= 5
    assert all(mem <= 10 for _, mem in loads.values())


@pytest.mark.parametrize(
    "budget",
    [SearchBudget(max_steps=1), SearchBudget(max_pods=5)],
    ids=["one-step", "too-many-pods"],
)
def test_out_of_budget_falls_back_to_ffd(ten_gi: NodeTemplate, budget: SearchBudget) -> None:
    pods = [pod(n, m) for n, m in CLASSIC]  # the full search needs 2 nodes (test above)
    ffd = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=100, search=None)
    plan = plan_scale_up(pods, template=ten_gi, current_target=0, max_nodes=100, search=budget)
    assert plan.new_nodes == ffd.new_nodes == 3
    assert plan.placements == ffd.placements


def test_budget_rejects_negative_values() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        SearchBudget(max_steps=-1)


def brute_force_fewest(items: list[tuple[int, int]], cap: tuple[int, int]) -> int:
    """Fewest bins by trying every bin for every item (the oracle, exhaustive)."""
    best = len(items)
    bins: list[list[int]] = []

    def go(k: int) -> None:
        nonlocal best
        if len(bins) >= best:
            return
        if k == len(items):
            best = len(bins)
            return
        cpu, mem = items[k]
        for b in bins:
            if b[0] + cpu <= cap[0] and b[1] + mem <= cap[1]:
                b[0] += cpu
                b[1] += mem
                go(k + 1)
                b[0] -= cpu
                b[1] -= mem
        bins.append([cpu, mem])
        go(k + 1)
        bins.pop()

    go(0)
    return best


@pytest.mark.parametrize("seed", range(60))
def test_random_instances_optimal_and_never_worse_than_ffd(seed: int) -> None:
    rng = random.Random(seed)
    cap = (8000, 16)  # millicores, GiB
    template = NodeTemplate.from_pool("n", cpu=8, memory="16Gi", disk="100Gi")
    items = [(rng.randint(1, 45) * 100, rng.randint(1, 10)) for _ in range(rng.randint(3, 9))]
    pods = [pod(f"p{i}", f"{mem}Gi", f"{cpu}m") for i, (cpu, mem) in enumerate(items)]
    ffd = plan_scale_up(pods, template=template, current_target=0, max_nodes=50, search=None)
    plan = plan_scale_up(pods, template=template, current_target=0, max_nodes=50)
    assert_valid(plan, pods, *cap)
    assert plan.new_nodes <= ffd.new_nodes
    assert plan.new_nodes == brute_force_fewest(items, cap)
