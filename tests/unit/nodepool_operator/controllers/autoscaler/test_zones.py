"""The Autoscaler's zone targets as a pure decision: a pool with zones (``status.zones``)
raises ``targetNodes`` and writes ``spec.zoneTargets`` in the same TargetWrite, only for the
zones its plan needs specifically (a zone spread, a required zone affinity, a bound volume's
zone); a pool without zones writes only the target, as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.autoscaler._pending import Claim, Lookup
from nodepool_operator.controllers.autoscaler.decide import Memory, TargetWrite, Why, decide
from nodepool_operator.controllers.autoscaler.observe import Observation
from nodepool_operator.scheduling import volume_zone_terms
from tests import factories
from tests.unit.nodepool_operator.controllers.autoscaler.test_decide import (
    CLOCK,
    KNOBS,
    observe,
    pending,
    pool,
    running,
    scaler,
)

ZONES = ["zone-a", "zone-b", "zone-c"]
SPREAD = [factories.zone_spread(1, app="web")]


def zoned_pool(
    zones: list[str] = ZONES, *, target: int = 0, zone_targets: dict[str, int] | None = None
) -> dict[str, Any]:
    obj = pool(target=target)
    obj["status"]["zones"] = list(zones)
    if zone_targets is not None:
        obj["spec"]["zoneTargets"] = dict(zone_targets)
    return obj


def web(count: int) -> list[dict[str, Any]]:
    """Pods of 28Gi spread over zones (DoNotSchedule, maxSkew 1)."""
    return [
        {
            **(p := pending(f"web-{i}", topologySpreadConstraints=SPREAD)),
            "metadata": {**p["metadata"], "labels": {"app": "web"}},
        }
        for i in range(count)
    ]


def zone_node(name: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {POOL_LABEL: "big", factories.ZONE_KEY: zone, "kubernetes.io/hostname": name},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "12", "memory": "96Gi", "pods": "110"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T11:00:00Z"}
            ],
        },
    }


def on_volume(obs: Observation, zone: str) -> Observation:
    """``obs`` with claim prod/data bound to a volume pinned to ``zone``."""
    volume = factories.persistent_volume("pv-data", zone=zone)
    lookup = Lookup(
        claims={("prod", "data"): Claim(phase="Bound", volume="pv-data")},
        volume_zones={"pv-data": volume_zone_terms(volume)},
    )
    return replace(obs, lookup=lookup)


DB = pending("db-0", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])


def write_of(obs: Observation) -> TargetWrite | None:
    return decide(obs, Memory(), CLOCK, KNOBS).target


ROWS: dict[str, tuple[Observation, int | None, dict[str, int] | None]] = {
    # (observation, targetNodes written, zoneTargets written: None = left as they are)
    "a spread of three over three zones: three nodes, one per zone, in one write": (
        observe(scaler(), zoned_pool(), web(3)),
        3,
        {"zone-a": 1, "zone-b": 1, "zone-c": 1},
    ),
    "a pod whose volume is in zone-b: a node there": (
        on_volume(observe(scaler(), zoned_pool(), [DB]), "zone-b"),
        1,
        {"zone-b": 1},
    ),
    "a required zone affinity: a node in that zone": (
        observe(
            scaler(), zoned_pool(), [pending("api", affinity=factories.zone_affinity("zone-c"))]
        ),
        1,
        {"zone-c": 1},
    ),
    "pods that need no zone: the target alone (the NodePool balances)": (
        observe(scaler(), zoned_pool(), [pending(f"w-{i}") for i in range(6)]),
        2,
        None,
    ),
    "a pool without zones: the target alone, as before": (
        on_volume(observe(scaler(), pool(), [DB]), "zone-b"),
        1,
        None,
    ),
    "a pool without zones cannot place a zone spread: no write": (
        observe(scaler(), pool(), web(3)),
        None,
        None,
    ),
    "a zone target still launching is kept beside the new one": (
        # zone-a has its target of 1 in flight (nothing registered); db-0 needs zone-b
        on_volume(
            observe(scaler(), zoned_pool(target=1, zone_targets={"zone-a": 1}), [DB]), "zone-b"
        ),
        2,
        {"zone-a": 1, "zone-b": 1},
    ),
    "a zone target met with nothing in flight goes with the next write": (
        observe(
            scaler(),
            zoned_pool(target=1, zone_targets={"zone-a": 1}),
            [pending(f"w-{i}", memory="60Gi") for i in range(2)],
            [zone_node("n-a", "zone-a")],
        ),
        2,
        {},
    ),
    "a zone's target counts the pool's nodes already there": (
        observe(
            scaler(),
            zoned_pool(target=1, zone_targets={"zone-b": 1}),
            [
                pending("api", affinity=factories.zone_affinity("zone-b"), memory="60Gi"),
                running("r-0", "n-b", memory="90Gi"),
            ],
            [zone_node("n-b", "zone-b")],
        ),
        2,
        {"zone-b": 2},
    ),
    "the zone targets the pool has already: the target alone": (
        # zone-c's node is launching for its target; api takes it, the other pod needs a node
        observe(
            scaler(),
            zoned_pool(target=1, zone_targets={"zone-c": 1}),
            [
                pending("api", affinity=factories.zone_affinity("zone-c"), memory="90Gi"),
                pending("small"),
            ],
        ),
        2,
        None,
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_zone_targets(row: tuple[Observation, int | None, dict[str, int] | None]) -> None:
    obs, target, zone_targets = row
    write = write_of(obs)
    if target is None:
        assert write is None
        return
    assert write is not None
    assert (write.why, write.expected, write.desired) == (Why.SCALE_UP, obs.target, target)
    assert write.zone_targets == zone_targets


def test_the_summary_says_where_the_new_nodes_go() -> None:
    write = write_of(observe(scaler(), zoned_pool(), web(3)))
    assert write is not None
    assert write.summary == (
        "scale up 0 -> 3: 3 pods need 3 new mem96.large nodes (zone-a: 1, zone-b: 1, zone-c: 1)"
    )


def test_a_zone_pod_the_launching_node_holds_writes_nothing() -> None:
    """zone-b's target of 1 is launching (target 1, nothing registered): db-0 fits it."""
    obs = on_volume(
        observe(scaler(), zoned_pool(target=1, zone_targets={"zone-b": 1}), [DB]), "zone-b"
    )
    decision = decide(obs, Memory(), CLOCK, KNOBS)
    assert decision.target is None
    assert decision.status.last_decision == (
        "no scale up (target 1): 1 pod fit existing or booting nodes"
    )
