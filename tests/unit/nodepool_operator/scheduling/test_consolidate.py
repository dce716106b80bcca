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
    Replacement,
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


def replaced(nodes: Sequence[ScaleDownNode], replacement: Replacement) -> list[ScaleDownNode]:
    """The pool once ``replacement`` is done as planned: its new nodes up (``new-<i>``), its
    drained nodes gone, each drained pod on the node the plan gave it."""
    pods = {str(p.ref): p for n in nodes for p in n.pods}
    landing: dict[str, list[Any]] = {}
    for ref, _, to in replacement.moves:
        landing.setdefault(to.replace("new:", "new-"), []).append(pods[ref])
    kept = [
        node(n.name, *n.pods, *landing.pop(n.name, ()))
        for n in nodes
        if n.name not in replacement.drain
    ]
    return kept + [node(f"new-{i}", *landing.pop(f"new-{i}")) for i in range(replacement.new_nodes)]


#: 5 nodes of a 2000m and a 600m pod (65 %): no node's 2000m fits another's 1400m free, but the
#: pods need 4 (two 2000m to a node); two nodes traded for one new one get there.
PAIRS = spread(5, "2000m", "600m")


def test_no_drain_frees_a_node_so_two_are_traded_for_one_new_one() -> None:
    """STUCK: the drain alone frees nothing; with room to grow by one, a and b (the least
    used) go once a new node is up: their 2000m pods onto it, their 400m onto c."""
    assert consolidate(STUCK, template=TEMPLATE, search=STEPS_ONLY).replacement is None
    found = consolidate(STUCK, template=TEMPLATE, search=STEPS_ONLY, grow=1)
    assert found.free == ()
    assert found.replacement == Replacement(
        drain=("a", "b"),
        new_nodes=1,
        moves=(
            ("prod/a1", "a", "new:0"),
            ("prod/a2", "a", "c"),
            ("prod/b1", "b", "new:0"),
            ("prod/b2", "b", "c"),
        ),
    )


@pytest.mark.parametrize("layout", [STUCK, PAIRS], ids=["STUCK", "PAIRS"])
def test_a_replacement_done_as_planned_leaves_the_pool_at_its_optimum(
    layout: list[ScaleDownNode],
) -> None:
    """Every drained pod has a place, no node over its size, and the pool that results is at
    the optimum: nothing more to free, nothing to replace."""
    found = consolidate(layout, template=TEMPLATE, search=STEPS_ONLY, grow=2)
    assert found.replacement is not None
    assert found.replacement.gain == found.above == 1
    moved = sorted(ref for ref, *_ in found.replacement.moves)
    drained = set(found.replacement.drain)
    assert moved == sorted(str(p.ref) for n in layout if n.name in drained for p in n.pods)
    after = replaced(layout, found.replacement)
    assert len(after) == found.optimum
    assert all(sum(p.requests.get("cpu") for p in n.pods) <= 4000 for n in after)
    again = consolidate(after, template=TEMPLATE, search=STEPS_ONLY, grow=2)
    assert (again.optimum, again.free, again.replacement) == (found.optimum, (), None)


def test_no_replacement_where_a_drain_frees_a_node_or_the_pool_is_at_its_optimum() -> None:
    """The drain comes first (it launches nothing); at the optimum nothing is traded."""
    assert consolidate(SPREAD, template=TEMPLATE, search=STEPS_ONLY, grow=3).replacement is None
    assert consolidate(APART, template=TEMPLATE, search=STEPS_ONLY, grow=3).replacement is None


def test_a_replacement_waits_for_a_budget_and_drains_more_nodes_than_it_allows_at_once() -> None:
    """STUCK with a disruption budget of none now: nothing is traded; of one node: a and b are
    still traded for one new node (drained one after the other once it is up: a's pods onto
    the new node and c, then b's the same way)."""
    assert consolidate(STUCK, template=TEMPLATE, limit=0, grow=1).replacement is None
    one = consolidate(STUCK, template=TEMPLATE, limit=1, grow=1).replacement
    assert one is not None
    assert (one.drain, one.new_nodes) == (("a", "b"), 1)
    up = [*STUCK, node("new-0")]
    first = consolidate(up, template=TEMPLATE, limit=1, prefer=one.drain)
    assert first.free == ("a",)
    after = [n for n in up if n.name != "a"]
    moved = {ref: to for ref, _, to in first.moves}
    pods = {str(p.ref): p for p in STUCK[0].pods}
    after = [
        node(n.name, *n.pods, *(pods[r] for r, to in moved.items() if to == n.name)) for n in after
    ]
    second = consolidate(after, template=TEMPLATE, limit=1, prefer=one.drain)
    assert (second.free, second.reachable, second.optimum) == (("b",), 2, 2)


def test_a_replacement_needs_room_to_grow() -> None:
    """PAIRS at its maxNodes (``grow`` 0): nothing is traded, the pool stays one above."""
    found = consolidate(PAIRS, template=TEMPLATE, search=STEPS_ONLY, grow=0)
    assert (found.above, found.free, found.replacement) == (1, (), None)
