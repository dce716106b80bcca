"""One pool per pod (issue 21 item 7): which of several Autoscalers watching a pending pod's
namespace scales for it, as a pure function of what each of them observes. A table of the
choice (weight, then least waste, then name; pools that cannot take the pod or cannot grow are
no option), the same answer whichever Autoscaler asks, and decide's use of it: the loser writes
no target, sets the pod aside naming the winner, and tells each pod once."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from nodepool_operator.api import InvalidField, parse_autoscaler, parse_nodepool
from nodepool_operator.controllers.autoscaler._choice import (
    SERVED_ELSEWHERE,
    Option,
    option,
    served_elsewhere,
    waste,
    winner,
)
from nodepool_operator.controllers.autoscaler._report import Subject
from nodepool_operator.controllers.autoscaler.decide import Clock, Knobs, Memory, decide
from nodepool_operator.controllers.autoscaler.observe import Observation, snapshot
from nodepool_operator.scheduling import NodeTemplate, PodView, pod_view
from tests import factories

SMALL = NodeTemplate.from_pool("small", cpu=4, memory="16Gi")
BIG = NodeTemplate.from_pool("big", cpu=16, memory="64Gi")
TAINTED = NodeTemplate.from_pool("gpu", cpu=16, memory="64Gi", taints=[factories.taint("gpu")])
CLOCK = Clock(10_000.0, datetime(2026, 1, 1, 12, 0, tzinfo=UTC))


def opt(
    name: str,
    template: NodeTemplate = SMALL,
    *,
    weight: int = 0,
    namespaces: tuple[str, ...] = ("prod",),
    can_grow: bool = True,
) -> Option:
    return Option(name, f"pool-{name}", weight, frozenset(namespaces), template, can_grow)


def pod(cpu: str = "1", memory: str = "2Gi", namespace: str = "prod") -> PodView:
    return pod_view(
        factories.pod("web", namespace=namespace, cpu=cpu, memory=memory, unschedulable=True)
    )


@pytest.mark.parametrize(
    ("options", "the_pod", "expected", "why"),
    [
        pytest.param([opt("a")], pod(), "a", "the only", id="alone"),
        pytest.param(
            [opt("a", BIG), opt("b", SMALL, weight=10)], pod(), "b", "weight 10 > 0", id="weight"
        ),
        pytest.param(
            [opt("a", SMALL, weight=5), opt("b", BIG, weight=50)],
            pod(),
            "b",
            "weight 50 > 5",
            id="weight-beats-waste",
        ),
        # 1 of 4 CPUs and 2 of 16Gi leave 0.75 + 0.875; on the big node 0.9375 + 0.96875
        pytest.param(
            [opt("a", BIG), opt("b", SMALL)], pod(), "b", "less waste 1.62 < 1.91", id="least-waste"
        ),
        pytest.param([opt("b"), opt("a")], pod(), "a", "first by name before b", id="tie-by-name"),
        pytest.param(
            [opt("a", SMALL, weight=10), opt("b", BIG)],
            pod(cpu="8"),
            "b",
            "the only",
            id="too-big-for-the-heavier",
        ),
        pytest.param(
            [opt("a", SMALL, weight=10, can_grow=False), opt("b", BIG)],
            pod(),
            "b",
            "the only",
            id="full-pool-is-no-option",
        ),
        pytest.param(
            [opt("a", TAINTED, weight=10), opt("b", BIG)],
            pod(),
            "b",
            "the only",
            id="taint-not-tolerated",
        ),
        pytest.param(
            [opt("a", weight=10, namespaces=("dev",)), opt("b", BIG)],
            pod(),
            "b",
            "the only",
            id="other-namespace",
        ),
        pytest.param([opt("a", SMALL)], pod(cpu="8"), None, "", id="none-fits"),
    ],
)
def test_winner(options: list[Option], the_pod: PodView, expected: str | None, why: str) -> None:
    won = winner(the_pod, options)
    if expected is None:
        assert won is None
        return
    assert won is not None
    assert won.option.name == expected
    assert why in won.why


def test_every_autoscaler_reaches_the_same_answer() -> None:
    """Each Autoscaler sees itself as ``own`` and the others as rivals, in any order: exactly
    one keeps each pod, and the others set it aside naming that one."""
    options = [opt("a", BIG), opt("b", SMALL), opt("c", SMALL, weight=1, namespaces=("dev",))]
    # the small pod: b (less waste); 8 CPUs: a (only its node fits); in dev: c, the only one
    # watching dev; 64 CPUs: nobody's node fits, so each keeps it and its plan says TooBig
    cases = [(pod(), ["b"]), (pod(cpu="8"), ["a"]), (pod(namespace="dev"), ["c"])]
    cases.append((pod(cpu="64"), ["a", "b"]))
    for order in itertools.permutations(options):
        for the_pod, keepers in cases:
            kept = []
            for own in order:
                if the_pod.ref.namespace not in own.namespaces:
                    continue
                rivals = [o for o in order if o is not own]
                if not served_elsewhere([the_pod], own, rivals):
                    kept.append(own.name)
            assert sorted(kept) == keepers, (order, the_pod.requests)


def test_option_can_grow() -> None:
    """A pool at its maximum with every node registered cannot take a pod the scheduler could
    not place; one below its maximum, or with nodes on the way, can."""
    scaler = parse_autoscaler(factories.autoscaler("a", pool="p", namespaces=["prod"], maxNodes=3))
    at_three = parse_nodepool(factories.nodepool("p", target=3, max_nodes=10))
    assert not option(scaler, at_three, SMALL, registered=3).can_grow
    assert option(scaler, at_three, SMALL, registered=2).can_grow
    at_two = parse_nodepool(factories.nodepool("p", target=2, max_nodes=10))
    assert option(scaler, at_two, SMALL, registered=2).can_grow
    assert option(scaler, at_two, SMALL, registered=2).weight == 0


def test_waste() -> None:
    assert waste(pod(cpu="4", memory="16Gi"), SMALL) == 0
    assert waste(pod(cpu="2", memory="8Gi"), SMALL) == 1


# --- decide, with a rival in the observation ---------------------------------------------


def observation(*, weight: int, rival_weight: int, **pods: dict[str, Any]) -> Observation:
    scaler = factories.autoscaler("as", pool="big", namespaces=["prod"], weight=weight)
    scaler["metadata"]["generation"] = 1
    pool = factories.nodepool("big", target=0, instance_type="mem96.large", max_nodes=10)
    rival = opt("other", BIG, weight=rival_weight)
    obs = snapshot(
        scaler,
        parse_autoscaler(scaler),
        pool,
        pods=list(pods.values()),
        nodes=[],
        pods_on=lambda _: [],
        first_seen=lambda _: 0.0,
        rivals=[rival],
    )
    assert isinstance(obs, Observation)
    return obs


def test_the_loser_writes_no_target_and_says_who_scales() -> None:
    web = factories.pod("web", namespace="prod", memory="28Gi", uid="uid-web", unschedulable=True)
    obs = observation(weight=0, rival_weight=10, web=web)
    first = decide(obs, Memory(), CLOCK, Knobs())
    assert first.target is None
    assert first.plan.placements == ()
    detail = "Autoscaler other scales NodePool pool-other for it: weight 10 > 0"
    assert (
        first.status.last_decision == f"no scale up (target 0); 1 pod {SERVED_ELSEWHERE} ({detail})"
    )
    pod_notes = [n for n in first.events if n.subject is Subject.POD]
    assert [(n.key, n.note) for n in pod_notes] == [
        ("uid-web", f"pod didn't trigger scale-up: {SERVED_ELSEWHERE}: {detail}")
    ]
    # the next look tells nobody again
    later = decide(obs, first.memory, replace(CLOCK, mono=CLOCK.mono + 30), Knobs())
    assert later.target is None
    assert later.events == ()


def test_the_winner_scales_as_if_alone() -> None:
    web = factories.pod("web", namespace="prod", memory="28Gi", uid="uid-web", unschedulable=True)
    decision = decide(observation(weight=10, rival_weight=0, web=web), Memory(), CLOCK, Knobs())
    assert decision.target is not None
    assert (decision.target.expected, decision.target.desired) == (0, 1)
    assert not any(SERVED_ELSEWHERE in n.note for n in decision.events)


@pytest.mark.parametrize("weight", [-1, 101, "high"])
def test_a_bad_weight_names_the_field(weight: object) -> None:
    with pytest.raises(InvalidField, match=r"spec\.weight"):
        parse_autoscaler(factories.autoscaler("a", namespaces=["prod"], weight=weight))


def test_a_pool_with_zones_takes_a_pod_that_needs_one_of_them() -> None:
    """Templates have no zone; a pool's zones (status.zones) make a zone-pinned pod fit it,
    so exactly one Autoscaler scales for it, and none for a zone no pool launches into."""
    pinned = pod_view(
        factories.pod("db", namespace="prod", cpu="1", affinity=factories.zone_affinity("zone-b"))
    )
    west = replace(opt("a", BIG), zones=("zone-a",))
    both = replace(opt("b", SMALL), zones=("zone-a", "zone-b"))
    won = winner(pinned, [west, both])
    assert won is not None
    assert (won.option.name, won.why) == ("b", "the only Autoscaler whose pool can take it")
    assert winner(pinned, [opt("a", BIG), opt("b", SMALL)]) is None
