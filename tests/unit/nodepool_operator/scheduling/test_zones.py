"""Scheduling simulation, zones: a pool that launches into several zones (its NodePool's
``status.zones``) plans each new node in a zone, honouring zone spreads, required zone
affinity and the zones of bound volumes, and balancing the rest; a pool without zones plans
exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.scheduling import (
    FitReason,
    New,
    NodeState,
    NodeTemplate,
    Resources,
    pod_view,
)
from nodepool_operator.scheduling._pods import volume_zone_terms, with_volume_zones
from tests import factories
from tests.unit.nodepool_operator.scheduling.plans import plan_pods

ZONE = factories.ZONE_KEY
HOST = "kubernetes.io/hostname"
LEGACY = "failure-domain.beta.kubernetes.io/zone"
ZONES = ("zone-a", "zone-b", "zone-c")


def pod(name: str, *, cpu: str = "1", labels: dict[str, str] | None = None, **spec: Any) -> Any:
    return factories.pod(name, namespace="prod", labels=labels or {}, cpu=cpu, **spec)


def spread_pods(count: int, max_skew: int = 1) -> list[Any]:
    spread = [factories.zone_spread(max_skew, app="web")]
    return [
        pod(f"web-{i}", labels={"app": "web"}, topologySpreadConstraints=spread)
        for i in range(count)
    ]


def on_volume(name: str, zone: str, *, key: str = ZONE, cpu: str = "1") -> Any:
    """The view of a pod whose bound volume is pinned to ``zone``."""
    volume = factories.persistent_volume(f"pv-{name}", zone=zone, key=key)
    return with_volume_zones(pod_view(pod(name, cpu=cpu)), [volume_zone_terms(volume)])


def node(name: str, zone: str, *pods: Any, cpu: int = 4) -> NodeState:
    views = tuple(pod_view(p) for p in pods)
    free = Resources(cpu=cpu * 1000, memory=16 * 2**30, pods=110)
    for view in views:
        free -= view.requests
    return NodeState(name, free, {ZONE: zone, "kubernetes.io/hostname": name}, pods=views)


@pytest.fixture
def template() -> NodeTemplate:
    return NodeTemplate.from_pool("m4", cpu=4, memory="16Gi")


def zones_of(plan: Any) -> dict[str, str]:
    """Each placed pod's zone: the new node's zone, by pod name."""
    return {
        p.pod.name: plan.new_zones[p.node.index] for p in plan.placements if isinstance(p.node, New)
    }


def test_a_zone_spread_of_three_pods_gets_one_new_node_per_zone_in_one_plan(
    template: NodeTemplate,
) -> None:
    plan = plan_pods(spread_pods(3), template=template, current_target=0, max_nodes=10, zones=ZONES)
    assert plan.new_nodes == 3
    assert sorted(plan.new_zones) == list(ZONES)
    assert sorted(zones_of(plan).values()) == list(ZONES)
    assert plan.zone_targets == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    assert plan.desired_target == 3


def test_the_same_pods_fill_one_node_without_a_spread(template: NodeTemplate) -> None:
    pods = [pod(f"web-{i}", labels={"app": "web"}) for i in range(3)]
    plan = plan_pods(pods, template=template, current_target=0, max_nodes=10, zones=ZONES)
    assert plan.new_nodes == 1
    assert plan.zone_targets == {}


def test_a_spread_counts_the_pods_on_existing_nodes(template: NodeTemplate) -> None:
    """Two web pods run in zone-a: the spread needs the next ones in b and c first."""
    web = {"app": "web"}
    existing = [node("a1", "zone-a", pod("old-0", labels=web), pod("old-1", labels=web))]
    plan = plan_pods(
        spread_pods(4),
        template=template,
        existing_nodes=existing,
        current_target=1,
        max_nodes=10,
        zones=ZONES,
    )
    # a:2 -> b and c take two each (skew 0 at the end); zone-a's room is not usable
    assert sorted(zones_of(plan).values()) == ["zone-b", "zone-b", "zone-c", "zone-c"]
    assert plan.new_nodes == 2
    assert plan.zone_targets == {"zone-b": 1, "zone-c": 1}


def test_a_spread_with_max_skew_two_packs_two_per_zone(template: NodeTemplate) -> None:
    plan = plan_pods(
        spread_pods(4, max_skew=2), template=template, current_target=0, max_nodes=10, zones=ZONES
    )
    assert plan.new_nodes == 2  # a:2 then b gets the third (skew 2 against c's 0 would be 3)
    assert sorted(zones_of(plan).values()) == ["zone-a", "zone-a", "zone-b", "zone-b"]


def test_a_pod_whose_volume_is_in_zone_b_gets_a_new_node_in_zone_b(
    template: NodeTemplate,
) -> None:
    plan = plan_scale(on_volume("db-0", "zone-b"), template)
    assert plan.new_zones == ("zone-b",)
    assert plan.zone_targets == {"zone-b": 1}


def test_the_legacy_zone_key_of_a_volume_reads_as_the_zone(template: NodeTemplate) -> None:
    plan = plan_scale(on_volume("db-0", "zone-c", key=LEGACY), template)
    assert plan.new_zones == ("zone-c",)


def test_a_volume_pod_does_not_take_room_in_another_zone(template: NodeTemplate) -> None:
    plan = plan_scale(on_volume("db-0", "zone-b"), template, existing_nodes=[node("a1", "zone-a")])
    assert plan.new_zones == ("zone-b",)
    assert plan.zone_targets == {"zone-b": 1}


def test_a_volume_in_a_zone_the_pool_cannot_launch_into_says_why(
    template: NodeTemplate,
) -> None:
    plan = plan_scale(on_volume("db-0", "zone-x"), template)
    assert plan.new_nodes == 0
    (group,) = plan.unschedulable
    assert group.reason is FitReason.VOLUME_ZONE_CONFLICT
    assert group.detail == f"volume: {ZONE} In [zone-x]"


def test_required_zone_affinity_picks_the_zone(template: NodeTemplate) -> None:
    pinned = pod("api-0", affinity=factories.zone_affinity("zone-c"))
    plan = plan_pods([pinned], template=template, current_target=0, max_nodes=10, zones=ZONES)
    assert plan.new_zones == ("zone-c",)
    assert plan.zone_targets == {"zone-c": 1}


def test_a_zone_target_counts_the_pools_nodes_already_there(template: NodeTemplate) -> None:
    """zone-c has one full node: the target asks for two nodes there."""
    full = node("c1", "zone-c", pod("big", cpu="4"))
    pinned = pod("api-0", node_selector={ZONE: "zone-c"})
    plan = plan_pods(
        [pinned],
        template=template,
        existing_nodes=[full],
        current_target=1,
        max_nodes=10,
        zones=ZONES,
    )
    assert plan.new_zones == ("zone-c",)
    assert plan.zone_targets == {"zone-c": 2}


def test_nodes_nothing_asks_a_zone_of_are_balanced_across_zones(
    template: NodeTemplate,
) -> None:
    """Existing: two nodes in a, one in b. Four full-node pods go to c, b, c, a..."""
    existing = [
        node("a1", "zone-a", pod("x", cpu="4")),
        node("a2", "zone-a", pod("y", cpu="4")),
        node("b1", "zone-b", pod("z", cpu="4")),
    ]
    pods = [pod(f"big-{i}", cpu="4") for i in range(4)]
    plan = plan_pods(
        pods,
        template=template,
        existing_nodes=existing,
        current_target=3,
        max_nodes=10,
        zones=ZONES,
    )
    assert plan.new_zones == ("zone-c", "zone-b", "zone-c", "zone-a")
    assert plan.zone_targets == {}  # no pod needs a zone: the NodePool balances by itself


def test_booting_nodes_are_placed_as_the_zone_targets_send_them(
    template: NodeTemplate,
) -> None:
    """A node in flight for a zone-b target takes the next zone-b pod: no new node."""
    plan = plan_scale(
        on_volume("db-1", "zone-b", cpu="1"),
        template,
        in_flight=1,
        current_target=1,
        zone_targets={"zone-b": 1},
    )
    assert plan.new_nodes == 0
    assert plan.zone_targets == {"zone-b": 1}


def test_a_booting_node_in_another_zone_does_not_hold_a_zone_pod(
    template: NodeTemplate,
) -> None:
    plan = plan_scale(
        on_volume("db-1", "zone-b"),
        template,
        in_flight=1,
        current_target=1,
        zone_targets={"zone-a": 1},
    )
    assert plan.new_zones == ("zone-b",)
    assert plan.zone_targets == {"zone-b": 1}


@pytest.mark.parametrize("zones", [(), ("zone-a",), ZONES])
def test_pods_that_need_no_zone_are_planned_as_without_zones(
    template: NodeTemplate, zones: tuple[str, ...]
) -> None:
    """The same pods (plain, and one per hostname) with and without zones: the same
    placements and node count; only the new nodes' zones are added."""
    anti = {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": HOST}
    solo = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}}
    pods = [
        *(pod(f"solo-{i}", labels={"app": "solo"}, affinity=solo) for i in range(3)),
        *(pod(f"w-{i}", cpu="1500m") for i in range(5)),
    ]
    before = plan_pods(pods, template=template, current_target=0, max_nodes=10)
    after = plan_pods(pods, template=template, current_target=0, max_nodes=10, zones=zones)
    assert after.placements == before.placements
    assert after.new_nodes == before.new_nodes == 3
    assert after.unschedulable == before.unschedulable == ()
    assert after.zone_targets == {}
    expected = {(): (), ("zone-a",): ("zone-a",) * 3, ZONES: ZONES}
    assert after.new_zones == expected[zones]


def test_a_spread_over_zones_on_a_pool_without_zones_stays_unplanned(
    template: NodeTemplate,
) -> None:
    """Today's behaviour: a template with no zone label is in no zone domain."""
    plan = plan_pods(spread_pods(1), template=template, current_target=0, max_nodes=10)
    assert plan.new_nodes == 0
    assert plan.unschedulable[0].reason is FitReason.TOPOLOGY_SPREAD_VIOLATION


def plan_scale(view: Any, template: NodeTemplate, **options: Any) -> Any:
    options.setdefault("current_target", 0)
    options.setdefault("max_nodes", 10)
    return plan_pods([view], template=template, zones=ZONES, **options)
