"""Scheduling simulation, consolidation: a pool spread over more nodes than its pods need, and
which nodes a drain frees (:func:`~nodepool_operator.scheduling.consolidate`), as a table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from nodepool_operator.scheduling import (
    NodeState,
    NodeTemplate,
    Resources,
    ScaleDownNode,
    SearchBudget,
    Unremovable,
    consolidate,
    node_blocker,
    place_on,
    pod_view,
    removal_order,
)
from tests import factories

GI = 2**30
NODE = Resources(cpu=4000, memory=16 * GI, pods=110)
TEMPLATE = NodeTemplate("m5.xlarge", NODE)
#: A clock that cannot bind: the same answer on any machine.
STEPS_ONLY = SearchBudget(max_steps=10_000, max_seconds=60.0)
WEB = {"app": "web"}


def pod(name: str, cpu: str, **extra: Any) -> Any:
    """A ReplicaSet's pod of ``cpu`` (a workload pod a drain may move)."""
    owner = factories.owner_reference("ReplicaSet", "rs", controller=True)
    return pod_view(factories.pod(name, namespace="prod", cpu=cpu, owner=owner, **extra))


def spread_pod(name: str, cpu: str) -> Any:
    """A pod of ``app=web`` that refuses to share a node with another (hostname
    anti-affinity)."""
    term = {"labelSelector": {"matchLabels": WEB}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod(name, cpu, labels=WEB, affinity=affinity)


def node(name: str, *pods: Any) -> ScaleDownNode:
    return ScaleDownNode(name, NODE, {"kubernetes.io/hostname": name}, (), tuple(pods))


def spread(count: int, *sizes: str) -> list[ScaleDownNode]:
    """``count`` nodes, each holding one pod of each of ``sizes`` (as LeastAllocated lays a
    mixed burst over nodes that were there)."""
    return [
        node(f"n{i}", *(pod(f"p{i}-{j}", cpu) for j, cpu in enumerate(sizes))) for i in range(count)
    ]


def blockers(nodes: Sequence[ScaleDownNode]) -> dict[str, Unremovable]:
    """The default blockers of a scale-down (a bare pod, local storage, ...), by node."""
    found = {n.name: node_blocker(n.name, n.pods, voluntary=True) for n in nodes}
    return {name: why for name, why in found.items() if why is not None}


@dataclass(frozen=True)
class Row:
    nodes: list[ScaleDownNode]
    optimum: int
    reachable: int
    free: tuple[str, ...]
    limit: int | None = None
    held: frozenset[str] = frozenset()
    prefer: frozenset[str] = frozenset()
    blocked: Mapping[str, Unremovable] = field(default_factory=dict)


#: 4 nodes, each 1600m + 800m of 4000m (60 %: above the scale-down's threshold): the pods need
#: 3 (two hold 1600m, 1600m, 800m; one the two 800m left).
SPREAD = spread(4, "1600m", "800m")
#: n0, the least used, runs a pod no controller owns: it stays, another goes.
BARE = [
    node("n0", pod("p0", "1000m"), pod_view(factories.pod("bare", namespace="prod", cpu="1"))),
    *spread(4, "1600m", "800m")[1:],
]
#: n0 runs a pod annotated do-not-disrupt.
HOLD = [
    node("n0", pod("p0", "1200m", annotations={"kubeloop.dev/do-not-disrupt": "true"})),
    *spread(4, "1600m", "800m")[1:],
]
#: 6 nodes of two 1200m pods: 3 to a node, the pods need 4.
SIX = spread(6, "1200m", "1200m")
#: Each node runs an ``app=web`` pod that refuses another on its node: 4 nodes whatever the
#: layout, though the cpu would fit on 3.
APART = [node(f"n{i}", spread_pod(f"w{i}", "1600m"), pod(f"s{i}", "800m")) for i in range(4)]
#: One 1600m pod and one 400m pod of app=web on each of 3 nodes, plus one node holding a
#: web pod that refuses the others (anti-affinity): the pods fit on 2 nodes (the three 400m
#: beside one 1600m, the loner beside two), but only if pods on the nodes that stay move too;
#: a drain frees one node.
LONER = [
    *(node(f"n{i}", pod(f"p{i}", "1600m"), pod(f"q{i}", "400m", labels=WEB)) for i in range(3)),
    node("n3", spread_pod("w", "800m")),
]

#: No node's pods fit on the others (each has a 2000m pod, and no node 2000m free), though
#: the pods fit on 2 (2000m twice; 2000m + 1200m + 400m + 400m): that needs a pod moved
#: between nodes that stay, or a node replaced, which a drain does not do.
STUCK = [
    node("a", pod("a1", "2000m"), pod("a2", "400m")),
    node("b", pod("b1", "2000m"), pod("b2", "400m")),
    node("c", pod("c1", "2000m"), pod("c2", "1200m")),
]

ROWS = {
    "a burst spread over 4 nodes at 60 %: one goes, its pods fit on the others": Row(
        SPREAD, optimum=3, reachable=3, free=("n0",)
    ),
    "at the optimum: nothing": Row(spread(2, "1600m", "1600m"), optimum=2, reachable=2, free=()),
    "6 nodes whose pods need 4: two go together": Row(
        SIX, optimum=4, reachable=4, free=("n0", "n1")
    ),
    "a disruption budget of 1: one at a time": Row(
        SIX, optimum=4, reachable=5, free=("n0",), limit=1
    ),
    "a budget that allows none: nothing": Row(SIX, optimum=4, reachable=6, free=(), limit=0),
    "a bare pod keeps its node; another goes": Row(
        BARE, optimum=3, reachable=3, free=("n1",), blocked=blockers(BARE)
    ),
    "a do-not-disrupt pod keeps its node, whatever the caller's blockers": Row(
        HOLD, optimum=3, reachable=3, free=("n1",)
    ),
    "a node a PodDisruptionBudget holds now stays": Row(
        SPREAD, optimum=3, reachable=3, free=("n1",), held=frozenset({"n0"})
    ),
    "a node named before is kept in the choice": Row(
        SPREAD, optimum=3, reachable=3, free=("n2",), prefer=frozenset({"n2"})
    ),
    "no node's pods fit on the others: the optimum is 2, a drain reaches none of it": Row(
        STUCK, optimum=2, reachable=3, free=()
    ),
    "anti-affinity between the big pods: 4 nodes are the optimum": Row(
        APART, optimum=4, reachable=4, free=()
    ),
    "the optimum needs pods moved between nodes that stay: a drain reaches one above": Row(
        # n3 (the least used) cannot go: its pod refuses every node's web pod; n0 can, its
        # 400m web pod going anywhere but n3
        LONER,
        optimum=2,
        reachable=3,
        free=("n0",),
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_consolidate(row: Row) -> None:
    found = consolidate(
        row.nodes,
        template=TEMPLATE,
        blockers=row.blocked,
        held=row.held,
        prefer=row.prefer,
        limit=row.limit,
        search=STEPS_ONLY,
    )
    assert (found.optimum, found.reachable, found.free) == (row.optimum, row.reachable, row.free)
    assert found.nodes == len(row.nodes)
    # every pod of a freed node has a place, on a node that stays
    freed = set(found.free)
    moved = [(pod, source) for pod, source, _ in found.moves]
    expected = [
        (str(p.ref), n.name) for n in row.nodes if n.name in freed for p in n.pods if p.workload
    ]
    assert sorted(moved) == sorted(expected)
    assert not {to for *_, to in found.moves} & freed


def test_the_threshold_rule_frees_none_of_the_spread_nodes() -> None:
    """What consolidation adds: at 60 % each, no node is below the scale-down's threshold,
    and at any threshold the nodes are picked one at a time, which frees one here too."""
    assert not [d for d in removal_order(SPREAD) if d.removable]
    found = consolidate(SPREAD, template=TEMPLATE, search=STEPS_ONLY)
    assert found.above == 1
    # the moves: n0's 1600m onto one node, its 800m onto another
    assert sorted(to for *_, to in found.moves) == ["n1", "n2"]


def test_three_nodes_at_40_percent_the_threshold_rule_frees_one_already() -> None:
    """What the scale-down did before consolidation, on a spread it can see: each node below
    half used; the first one's pods fit on the two others, which are then too full to go."""
    order = removal_order(spread(3, "1000m", "600m"))
    assert [d.node for d in order if d.removable] == ["n0"]


def test_the_moves_land_where_the_simulation_says_with_their_requests() -> None:
    found = consolidate(SIX, template=TEMPLATE, search=STEPS_ONLY)
    load = {n.name: sum(p.requests.get("cpu") for p in n.pods) for n in SIX}
    cpu = {str(p.ref): p.requests.get("cpu") for n in SIX for p in n.pods}
    for pod, _, to in found.moves:
        load[to] += cpu[pod]
    assert all(load[name] <= 4000 for name in load if name not in found.free)


def test_pods_pinned_to_their_node_give_no_optimum_and_no_consolidation() -> None:
    """A pod that selects its node by name fits no template node: the optimum is unknown,
    and nothing is freed."""
    pinned = [
        node(f"n{i}", pod(f"p{i}", "1000m", node_selector={"kubernetes.io/hostname": f"n{i}"}))
        for i in range(3)
    ]
    found = consolidate(pinned, template=TEMPLATE, search=STEPS_ONLY)
    assert (found.optimum, found.free) == (3, ())


def test_the_exact_search_places_what_first_fit_cannot() -> None:
    """Two nodes of 3900m free; pods 1500m, 1500m and four of 1200m: first-fit-decreasing
    puts both 1500m on one node and strands the last 1200m; the exact search finds 1500m +
    1200m + 1200m on each."""
    stay = [NodeState(name, Resources(cpu=3900, memory=8 * GI, pods=100)) for name in "ab"]
    pods = [pod("x", "1500m"), pod("y", "1500m"), *(pod(f"s{i}", "1200m") for i in range(4))]
    assert place_on(pods, stay, NODE, search=None) is None
    placed = place_on(pods, stay, NODE, search=STEPS_ONLY)
    assert placed is not None
    states, where = placed
    assert {s.free.get("cpu") for s in states.values()} == {0}
    assert len(where) == 6


def test_the_nodepool_controllers_order_takes_the_nodes_a_consolidation_named() -> None:
    """The NodePool controller ranks by :func:`removal_order` (threshold 1, the named nodes
    preferred): the nodes a consolidation frees come first and can go, together."""
    found = consolidate(SIX, template=TEMPLATE, search=STEPS_ONLY)
    order = removal_order(SIX, threshold=1.0, prefer=set(found.free))
    assert [d.node for d in order[:2]] == list(found.free)
    assert all(d.removable for d in order[:2])
