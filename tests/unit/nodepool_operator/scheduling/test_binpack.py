"""Scheduling simulation, part 2: the scale-up plan (first-fit-decreasing) and its lower bound."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from nodepool_operator.scheduling import (
    Existing,
    FitReason,
    New,
    NodeState,
    NodeTemplate,
    PlanReason,
    PodRef,
    Resources,
    ScaleUpPlan,
    Taint,
    crowded_out,
    lower_bound,
    pod_view,
)
from tests import factories
from tests.unit.nodepool_operator.scheduling.plans import plan_pods

GI = 2**30


def pod(name: str, *, memory: str = "1Gi", cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    """A pending pod the scheduler found no room for."""
    namespace = spec.pop("namespace", "prod")
    return factories.pod(
        name, namespace=namespace, cpu=cpu, memory=memory, unschedulable=True, **spec
    )


def pods(prefix: str, count: int, **kwargs: Any) -> list[dict[str, Any]]:
    return [pod(f"{prefix}-{i:03d}", **kwargs) for i in range(count)]


@pytest.fixture
def mem96() -> NodeTemplate:
    return NodeTemplate.from_pool("mem96.large", cpu=16, memory="96Gi", disk="100Gi")


def per_node(plan: ScaleUpPlan) -> dict[str, list[PodRef]]:
    nodes: dict[str, list[PodRef]] = defaultdict(list)
    for placement in plan.placements:
        nodes[str(placement.node)].append(placement.pod)
    return dict(nodes)


def plan(pending: list[dict[str, Any]], template: NodeTemplate, **kwargs: Any) -> ScaleUpPlan:
    kwargs.setdefault("current_target", 0)
    kwargs.setdefault("max_nodes", 100)
    return plan_pods(pending, template=template, **kwargs)


def test_six_28gi_pods_need_two_96gi_nodes_three_each(mem96: NodeTemplate) -> None:
    result = plan(pods("w", 6, memory="28Gi"), mem96)
    assert result.new_nodes == 2
    assert result.desired_target == 2
    assert result.scale_up
    assert sorted(len(p) for p in per_node(result).values()) == [3, 3]
    assert result.unschedulable == ()
    assert lower_bound(pods("w", 6, memory="28Gi"), mem96) == 2


def test_seed_summary_line(mem96: NodeTemplate) -> None:
    pending = [*pods("w", 9, memory="16Gi"), pod("huge", memory="120Gi")]
    result = plan(pending, mem96, current_target=2, max_nodes=10)
    assert result.summary == (
        "scale up 2 -> 4: 9 pods need 2 new mem96.large nodes; 1 pod too big (memory 120Gi > 96Gi)"
    )
    (group,) = result.unschedulable
    assert group.reason is FitReason.TOO_BIG
    assert group.pods == (PodRef("prod", "huge"),)


def test_mixed_sizes_pack_largest_first() -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="64Gi")
    pending = [
        *pods("small", 4, memory="10Gi"),
        *pods("large", 2, memory="40Gi"),
        *pods("medium", 2, memory="20Gi"),
    ]
    result = plan(pending, template)
    # FFD: 40+20 | 40+20 | 4x10 -> 3 nodes, which is also ceil(160 / 64).
    assert result.new_nodes == 3 == lower_bound(pending, template)
    nodes = per_node(result)
    assert [r.name for r in nodes["new:0"]] == ["large-000", "medium-000"]
    assert [r.name for r in nodes["new:1"]] == ["large-001", "medium-001"]
    assert len(nodes["new:2"]) == 4
    assert [p.pod.name for p in result.placements[:2]] == ["large-000", "large-001"]


def test_dominant_resource_orders_cpu_heavy_before_memory_light() -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="64Gi")
    cpu_heavy = pod("cpu-heavy", cpu="12", memory="1Gi")  # 75 % of cpu
    mem_medium = pod("mem-medium", cpu="1", memory="32Gi")  # 50 % of memory
    result = plan([mem_medium, cpu_heavy], template)
    assert [p.pod.name for p in result.placements] == ["cpu-heavy", "mem-medium"]


def test_existing_free_capacity_is_used_first(mem96: NodeTemplate) -> None:
    existing = [
        NodeState("node-b", Resources(cpu=8000, memory=60 * GI, pods=50), mem96.labels),
        NodeState("node-a", Resources(cpu=8000, memory=30 * GI, pods=50), mem96.labels),
    ]
    result = plan(pods("w", 6, memory="28Gi"), mem96, existing_nodes=existing, current_target=2)
    nodes = per_node(result)
    assert len(nodes["existing:node-a"]) == 1  # tried first: name order
    assert len(nodes["existing:node-b"]) == 2
    assert len(nodes["new:0"]) == 3
    assert result.new_nodes == 1
    assert result.desired_target == 3
    assert result.summary == (
        "scale up 2 -> 3: 3 pods need 1 new mem96.large node, 3 fit existing or booting nodes"
    )


def test_pods_that_fit_existing_nodes_need_no_scale_up(mem96: NodeTemplate) -> None:
    existing = [NodeState("node-a", Resources(cpu=16000, memory=96 * GI, pods=110))]
    result = plan(pods("w", 3, memory="28Gi"), mem96, existing_nodes=existing, current_target=1)
    assert not result.scale_up
    assert result.desired_target == 1
    assert result.summary == "no scale up (target 1): 3 pods fit existing or booting nodes"


def test_existing_nodes_check_labels_and_taints(mem96: NodeTemplate) -> None:
    tainted = NodeState(
        "node-t", Resources(cpu=16000, memory=96 * GI, pods=110), taints=(Taint("x", "NoSchedule"),)
    )
    labelled = NodeState(
        "node-l", Resources(cpu=16000, memory=96 * GI, pods=110), {"disktype": "hdd"}
    )
    pending = [pod("ssd", nodeSelector={"disktype": "ssd"}), pod("plain")]
    template = NodeTemplate.from_pool("ssd", cpu=16, memory="96Gi", labels={"disktype": "ssd"})
    result = plan(pending, template, existing_nodes=[tainted, labelled])
    assert result.node_for(PodRef("prod", "ssd")) == New(0)
    assert result.node_for(PodRef("prod", "plain")) == Existing("node-l")
    assert result.node_for(PodRef("prod", "nope")) is None


def test_second_wave_while_nodes_boot_is_not_double_counted(mem96: NodeTemplate) -> None:
    # S3: 70 % of the pods arrive, the autoscaler asks for nodes; while they boot the other
    # 30 % arrive and the first wave is still pending.
    wave1 = pods("w1", 7, memory="28Gi")
    first = plan(wave1, mem96, current_target=0)
    assert first.desired_target == 3
    wave2 = pods("w2", 3, memory="28Gi")
    second = plan(wave1 + wave2, mem96, current_target=3, in_flight=3)
    assert second.new_nodes == 1  # 10 pods, 3 per node: 4 in total, not 3 + 4
    assert second.desired_target == 4
    assert sum(1 for p in second.placements if str(p.node).startswith("inflight:")) == 9
    # Without the in-flight nodes the same pods would ask for 4 more.
    assert plan(wave1 + wave2, mem96, current_target=3).new_nodes == 4
    # Once all fit on booting nodes, nothing is added.
    assert plan(wave1, mem96, current_target=3, in_flight=3).new_nodes == 0


def test_negative_in_flight_counts_as_zero(mem96: NodeTemplate) -> None:
    assert plan(pods("w", 3, memory="28Gi"), mem96, in_flight=-2).new_nodes == 1


def test_max_nodes_clamps_and_reports_the_rest(mem96: NodeTemplate) -> None:
    # S14: demand for 8 nodes, room for 5.
    pending = pods("w", 24, memory="28Gi")
    result = plan(pending, mem96, current_target=2, max_nodes=5)
    assert result.new_nodes == 3
    assert result.desired_target == 5
    (group,) = result.unschedulable
    assert group.reason is PlanReason.MAX_NODES_REACHED
    assert len(group.pods) == 24 - 9
    assert list(group.pods) == sorted(group.pods)
    assert result.summary == (
        "scale up 2 -> 5: 9 pods need 3 new mem96.large nodes; 15 pods waiting: pool at max 5 nodes"
    )


def test_max_clamp_still_fills_open_nodes_with_smaller_pods(mem96: NodeTemplate) -> None:
    pending = [*pods("big", 2, memory="60Gi"), pod("small", memory="30Gi")]
    result = plan(pending, mem96, max_nodes=1)
    assert result.node_for(PodRef("prod", "small")) == New(0)
    assert result.unschedulable[0].pods == (PodRef("prod", "big-001"),)


def test_target_above_max_is_never_lowered(mem96: NodeTemplate) -> None:
    result = plan(pods("w", 3, memory="28Gi"), mem96, current_target=7, max_nodes=5)
    assert result.desired_target == 7
    assert result.new_nodes == 0
    assert result.unschedulable[0].reason is PlanReason.MAX_NODES_REACHED


def test_noise_pods_add_no_capacity(mem96: NodeTemplate) -> None:
    # S4: never-fitting pods are reported, grouped, and do not open nodes.
    template = NodeTemplate.from_pool(
        "mem96.large", cpu=16, memory="96Gi", taints=[Taint("pool", "NoSchedule", "mem")]
    )
    tolerate = [{"key": "pool", "operator": "Exists"}]
    noise = [
        *pods("huge", 3, memory="200Gi", tolerations=tolerate),
        *pods("picky", 2, nodeSelector={"zone": "mars"}, tolerations=tolerate),
        *pods("plain", 2),
    ]
    result = plan(noise, template, current_target=4)
    assert result.new_nodes == 0
    assert [(g.reason, len(g.pods)) for g in result.unschedulable] == [
        (FitReason.TOO_BIG, 3),
        (FitReason.NODE_SELECTOR_MISMATCH, 2),
        (FitReason.UNTOLERATED_TAINT, 2),
    ]
    assert result.summary == (
        "no scale up (target 4); 3 pods too big (memory 200Gi > 96Gi); "
        "2 pods not matching node selector (zone=mars (node has no zone)); "
        "2 pods not tolerating taint (pool=mem:NoSchedule)"
    )
    fitting = pods("ok", 3, memory="28Gi", tolerations=tolerate)
    assert plan(noise + fitting, template, current_target=4).new_nodes == 1


def test_summary_limits_reason_groups(mem96: NodeTemplate) -> None:
    pending = [pod(f"big{i}", memory=f"{100 + i}Gi") for i in range(5)]
    assert plan(pending, mem96).summary.endswith("; +2 more reasons")


def test_scale_from_zero_uses_the_template_only() -> None:
    # S13: a pool at zero nodes with labels and a taint.
    template = NodeTemplate.from_pool(
        "gpu", cpu=8, memory="64Gi", labels={"accel": "gpu"}, taints=[Taint("gpu", "NoSchedule")]
    )
    wanted = pod(
        "train",
        nodeSelector={"accel": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    assert plan([wanted], template).desired_target == 1
    assert plan([pod("web")], template).desired_target == 0


def test_no_pending_pods(mem96: NodeTemplate) -> None:
    result = plan([], mem96, current_target=3)
    assert result.summary == "no scale up (target 3): no pending pods"
    assert result.desired_target == 3


def test_invalid_targets(mem96: NodeTemplate) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        plan([], mem96, max_nodes=-1)


@pytest.mark.parametrize(
    ("count", "cpu", "memory"),
    [(1000, "1", "2Gi"), (48, "500m", "32Gi"), (33, "4", "8Gi"), (7, "16", "1Gi"), (110, "0", "0")],
)
def test_ffd_meets_the_lower_bound_on_uniform_pods(
    mem96: NodeTemplate, count: int, cpu: str, memory: str
) -> None:
    pending = pods("u", count, cpu=cpu, memory=memory)
    assert plan(pending, mem96, max_nodes=10_000).new_nodes == lower_bound(pending, mem96)


def test_lower_bound_ignores_pods_that_never_fit(mem96: NodeTemplate) -> None:
    assert lower_bound([pod("huge", memory="200Gi"), pod("ok", memory="28Gi")], mem96) == 1
    assert lower_bound([], mem96) == 0


def test_output_is_deterministic(mem96: NodeTemplate) -> None:
    rng = random.Random(7)
    pending = [
        pod(f"p{i}", memory=f"{rng.choice([4, 8, 28, 28, 40, 120])}Gi", namespace=f"ns{i % 3}")
        for i in range(60)
    ]
    existing = [
        NodeState("b", Resources(cpu=4000, memory=30 * GI, pods=10)),
        NodeState("a", Resources(cpu=4000, memory=50 * GI, pods=10)),
    ]
    expected = plan(pending, mem96, existing_nodes=existing, in_flight=2, current_target=4)
    for _ in range(5):
        rng.shuffle(pending)
        rng.shuffle(existing)
        again = plan(pending, mem96, existing_nodes=existing, in_flight=2, current_target=4)
        assert again == expected


def test_identical_pods_on_many_full_nodes_stay_fast(mem96: NodeTemplate) -> None:
    # The per-class cursor keeps this near-linear; a naive first fit does 2000 x 1000 checks.
    full = [NodeState(f"n{i:04d}", Resources(cpu=100, memory=GI, pods=1)) for i in range(1000)]
    result = plan(pods("w", 2000, cpu="1", memory="2Gi"), mem96, existing_nodes=full, max_nodes=999)
    assert result.new_nodes == lower_bound(pods("w", 2000, cpu="1", memory="2Gi"), mem96)


def _random_case(rng: random.Random) -> tuple[NodeTemplate, list[dict[str, Any]], dict[str, Any]]:
    cpu_cores = rng.choice([2, 4, 8, 16, 32])
    memory_gi = rng.choice([8, 16, 32, 96, 128])
    template = NodeTemplate.from_pool(
        "t", cpu=cpu_cores, memory=f"{memory_gi}Gi", max_pods=rng.choice([4, 16, 110])
    )
    pending = [
        pod(
            f"p{i:03d}",
            cpu=f"{rng.randint(0, int(cpu_cores * 1000 * 1.1))}m",
            memory=f"{rng.randint(0, int(memory_gi * 1024 * 1.1))}Mi",
            namespace=rng.choice(["a", "b"]),
        )
        for i in range(rng.randint(0, 60))
    ]
    existing = [
        NodeState(
            f"n{i}",
            Resources(
                cpu=rng.randint(0, cpu_cores * 1000),
                memory=rng.randint(0, memory_gi) * GI,
                pods=rng.randint(0, 10),
            ),
        )
        for i in range(rng.choice([0, 0, 1, 3]))
    ]
    current = rng.randint(0, 5)
    options = {
        "existing_nodes": existing,
        "in_flight": rng.choice([0, 0, 1, 2]),
        "current_target": current,
        "max_nodes": current + rng.choice([0, 1, 3, 1000]),
    }
    return template, pending, options


@pytest.mark.parametrize("seed", range(200))
def test_random_plans_respect_capacity_and_the_lower_bound(seed: int) -> None:
    rng = random.Random(seed)
    template, pending, options = _random_case(rng)
    views = [pod_view(p) for p in pending]  # each pod read once: its requests are pod_requests
    result = plan_pods(views, template=template, **options)

    requests = {v.ref: v.requests for v in views}
    room = {f"existing:{n.name}": n.free for n in options["existing_nodes"]}
    room |= {f"inflight:{i}": template.allocatable for i in range(options["in_flight"])}
    room |= {f"new:{i}": template.allocatable for i in range(result.new_nodes)}
    for node, refs in per_node(result).items():
        used = Resources()
        for ref in refs:
            used += requests[ref]
        assert used.fits_in(room[node]), (node, used, room[node])

    # Every pod is accounted for exactly once; opened nodes are all used.
    left = [ref for group in result.unschedulable for ref in group.pods]
    assert sorted([p.pod for p in result.placements] + left) == sorted(requests)
    assert {str(p.node) for p in result.placements if str(p.node).startswith("new:")} == {
        f"new:{i}" for i in range(result.new_nodes)
    }
    assert result.desired_target == min(
        options["current_target"] + result.new_nodes, options["max_nodes"]
    )

    # A pod left over the max fits nowhere that is left: first fit tried every node.
    left_room = dict(room)
    for placement in result.placements:
        left_room[str(placement.node)] -= requests[placement.pod]
    for group in result.unschedulable:
        if group.reason is PlanReason.MAX_NODES_REACHED:
            for ref in group.pods:
                assert not any(requests[ref].fits_in(r) for r in left_room.values())

    # Pods with room in the pool's limit are never reported as over the max.
    unlimited = options["max_nodes"] - options["current_target"] >= 1000
    if unlimited:
        assert all(g.reason is not PlanReason.MAX_NODES_REACHED for g in result.unschedulable)
    if unlimited and not options["existing_nodes"] and not options["in_flight"]:
        assert result.new_nodes >= lower_bound(views, template)


def test_a_pod_is_crowded_out_only_when_room_alone_keeps_it_off_allowed_nodes() -> None:

    taken = tuple(pod_view(pod(f"p{i}", memory="28Gi")) for i in range(3))
    full = NodeState("full", Resources(cpu=16000, memory=10 * GI, pods=100), pods=taken)
    roomy = NodeState("roomy", Resources(cpu=16000, memory=64 * GI, pods=100))
    tainted = NodeState(
        "t", Resources(cpu=16000, memory=10 * GI, pods=100), taints=(Taint("x", "NoSchedule"),)
    )
    small = NodeState("small", Resources(cpu=16000, memory=10 * GI, pods=100))
    big = pod("big", memory="28Gi")
    assert crowded_out(big, [full])
    # a node too small for it even empty: the node disagrees with the template, not crowded
    assert not crowded_out(big, [small])
    # a node it is allowed on still has room: the scheduler refused it for another reason
    assert not crowded_out(big, [full, roomy])
    # not allowed anywhere (a taint): not a question of room
    assert not crowded_out(big, [tainted])
    assert crowded_out(big, [tainted, full])
    assert not crowded_out(big, [])
