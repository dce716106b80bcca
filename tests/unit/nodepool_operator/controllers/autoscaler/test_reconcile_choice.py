"""Two Autoscalers watching the same namespace, each reconciled in process on the same snapshot
(the real controller, informers, observe, decide and act; writes recorded, not applied): only
the chosen one writes its pool's target; the other writes no scale, says in its status and in
one Event per pod which Autoscaler scales instead."""

from __future__ import annotations

from typing import Any

from kubeloop import Request
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.autoscaler._choice import SERVED_ELSEWHERE
from tests import factories

from .test_reconcile import SETTINGS, events, pods


def scalers(*, big_weight: int = 0, wide_weight: int = 0) -> list[dict[str, Any]]:
    """Autoscaler ``as`` of pool ``big`` (mem96.large: 12 CPUs, 96Gi) and ``bs`` of pool
    ``wide`` (r5.2xlarge: 8 CPUs, 64Gi), both watching prod."""
    objects = [
        factories.autoscaler("as", pool="big", namespaces=["prod"], weight=big_weight),
        factories.autoscaler("bs", pool="wide", namespaces=["prod"], weight=wide_weight),
        factories.nodepool("big", target=0, instance_type="mem96.large", max_nodes=10),
        factories.nodepool("wide", target=0, instance_type="r5.2xlarge", max_nodes=10),
    ]
    return objects


async def reconcile(name: str, objects: list[dict[str, Any]]) -> list[Write]:
    snapshot = Snapshot(
        objects, resources=[NODEPOOLS, AUTOSCALERS], scale_paths={NODEPOOLS: "spec.targetNodes"}
    )
    mgr = new_manager(snapshot.client)
    AutoscalerController(mgr, SETTINGS).register()
    _, writes = await reconcile_once(mgr, Request(name), controller="autoscaler")
    return writes


def scales(writes: list[Write]) -> list[tuple[str, int]]:
    return [
        (w.name, w.body["spec"]["replicas"])
        for w in writes
        if (w.verb, w.kind, w.subresource) == ("update", "NodePool", "scale")
    ]


def decision(writes: list[Write]) -> str:
    [body] = [w.body for w in writes if (w.kind, w.subresource) == ("Autoscaler", "status")]
    return str(body["status"]["lastDecision"])


async def test_least_waste_picks_the_smaller_node_and_the_other_says_so() -> None:
    # 28Gi on 64Gi leaves less unused than on 96Gi; with equal weights that decides
    objects = [*scalers(), *pods("w", 2)]
    loser, winner = await reconcile("as", objects), await reconcile("bs", objects)
    assert scales(winner) == [("wide", 1)]
    assert scales(loser) == []
    why = "Autoscaler bs scales NodePool wide for it: less waste 1.56 < 1.71"
    assert decision(loser) == f"no scale up (target 0); 2 pods {SERVED_ELSEWHERE} ({why})"
    note = f"pod didn't trigger scale-up: {SERVED_ELSEWHERE}: {why}"
    assert sorted(
        (who, reason, text) for who, reason, text in events(loser) if who.startswith("Pod")
    ) == [
        ("Pod/w-0", "NotTriggerScaleUp", note),
        ("Pod/w-1", "NotTriggerScaleUp", note),
    ]


async def test_weight_beats_least_waste() -> None:
    objects = [*scalers(big_weight=10), *pods("w", 2)]
    winner, loser = await reconcile("as", objects), await reconcile("bs", objects)
    assert scales(winner) == [("big", 1)]
    assert scales(loser) == []
    assert "Autoscaler as scales NodePool big for it: weight 10 > 0" in decision(loser)


async def test_a_pod_only_one_pool_fits_goes_to_that_pool_whatever_the_weight() -> None:
    # 80Gi fits mem96.large only: the heavier wide pool's Autoscaler is no option for it (a
    # new prefix: the views of pods are cached by uid and resourceVersion)
    objects = [*scalers(wide_weight=10), *pods("large", 1, memory="80Gi")]
    big, wide = await reconcile("as", objects), await reconcile("bs", objects)
    assert scales(big) == [("big", 1)]
    assert scales(wide) == []
    assert "Autoscaler as scales NodePool big for it: the only" in decision(wide)


async def test_a_rival_that_cannot_scale_is_no_option() -> None:
    """Heavier rivals that could not act: one whose pool does not exist, one that is idle
    behind an older Autoscaler of the same pool, one watching another namespace. ``as``
    scales as if alone."""
    objects = [
        factories.autoscaler("as", pool="big", namespaces=["prod"]),
        factories.nodepool("big", target=0, instance_type="mem96.large", max_nodes=10),
        factories.autoscaler("gone", pool="missing", namespaces=["prod"], weight=90),
        factories.autoscaler("elsewhere", pool="wide", namespaces=["dev"], weight=90),
        factories.nodepool("wide", target=0, instance_type="r5.2xlarge", max_nodes=10),
        factories.autoscaler("idle", pool="big", namespaces=["prod"], weight=90),
        *pods("alone", 2),
    ]
    # "idle" is younger than "as" (same pool): the oldest owns a pool, then the first by name
    objects[0]["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    objects[5]["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    writes = await reconcile("as", objects)
    assert scales(writes) == [("big", 1)]
    assert SERVED_ELSEWHERE not in decision(writes)
