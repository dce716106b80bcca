"""The Autoscaler plans per zone, end to end: real apiserver, kube-scheduler and
kube-controller-manager (the Deployment's and the StatefulSet's pods, the StatefulSet's claim,
its binding), the Autoscaler in-process.

The pool says which zones it can launch into (``status.zones``, seeded here as the NodePool
controller would write it from its node class's subnets). A 3-replica Deployment spread over
zones (``DoNotSchedule``) and a StatefulSet's pod whose claim (from its volumeClaimTemplates)
is bound to a volume pinned to one zone are Unschedulable; the Autoscaler's one write raises
``targetNodes`` and sets ``zoneTargets`` to what the plan needs per zone, both read back from
the apiserver with the write's field manager.

Only the Autoscaler runs: its write is the subject. :func:`raise_for_zones` leaves the pool,
the pods and the write in place for a test that also runs the NodePool controller (its zone
choice) and checks where the nodes land.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import pytest

from kubeloop import PERSISTENTVOLUMECLAIMS, PODS, Event, Informer, NotFound, Resource
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.autoscaler._references import PERSISTENTVOLUMES
from nodepool_operator.scheduling import classify
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import (
    autoscaler_manifest,
    events_about,
    metric,
    names,
    pod_manifest,
    pool_manifest,
    scale_writes,
    status_of,
)

pytestmark = pytest.mark.integration

DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
ZONES = ["zone-a", "zone-b", "zone-c"]
#: What the plan needs: a node per zone for the spread, and one more in zone-b for the pod on
#: its volume (40 of the node's 64 cpus leave no room for a 30-cpu web pod beside it).
TARGET, ZONE_TARGETS = 4, {"zone-a": 1, "zone-b": 2, "zone-c": 1}


@dataclass
class Writes:
    """Each distinct (targetNodes, zoneTargets) of the pool, as the apiserver served it."""

    seen: list[tuple[int, dict[str, int]]]

    def __call__(self, event: Event) -> None:
        spec = event.obj["spec"]
        now = (int(spec.get("targetNodes", 0)), dict(spec.get("zoneTargets") or {}))
        if not self.seen or self.seen[-1] != now:
            self.seen.append(now)


def web(pool: str, namespace: str) -> dict[str, Any]:
    """Three 30-cpu replicas, at most one apart per zone."""
    deployment = factories.deployment(
        "web", 3, namespace=namespace, cpu="30", node_selector={POOL_LABEL: pool}, grace=0
    )
    spread = factories.zone_spread(1, app="web")
    deployment["spec"]["template"]["spec"]["topologySpreadConstraints"] = [spread]
    return deployment


async def zonal_stateful_set(
    env: OperatorEnv, namespace: str, pool: str, zone: str, container: dict[str, Any]
) -> None:
    """StatefulSet ``db`` of one pod (``db-0``, on ``pool``'s nodes, ``container`` merged
    into its one container) whose claim ``data-db-0`` (from its volumeClaimTemplates) the
    volume binder has bound to a volume pinned to ``zone``; returns once the claim is Bound."""
    volume = f"pv-{env.run_id}"
    await env.create(
        PERSISTENTVOLUMES,
        factories.persistent_volume(volume, zone=zone, claim="data-db-0", namespace=namespace),
    )
    db = pod_manifest("db", pool, "1Gi", container=container)
    await env.create(
        STATEFULSETS,
        factories.stateful_set(
            "db", namespace=namespace, pod_spec=db["spec"], claims={"data": "1Gi"}
        ),
        namespace,
    )

    async def bound() -> bool:
        with contextlib.suppress(NotFound):
            claim = await env.client.get(PERSISTENTVOLUMECLAIMS, "data-db-0", namespace)
            return bool(claim.get("status", {}).get("phase") == "Bound")
        return False

    await env.eventually(bound, "the StatefulSet's claim bound to its volume", timeout=60)


async def raise_for_zones(env: OperatorEnv, namespace: str) -> tuple[str, str]:
    """The pool (zones seeded), the Deployment and the StatefulSet's pod, all Unschedulable before
    the Autoscaler starts (one pass sees them all); returns the pool's and Autoscaler's names."""
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))
    seeded = await env.client.get(NODEPOOLS, pool)
    seeded["status"] = {**seeded.get("status", {}), "zones": ZONES}
    await env.client.update_status(NODEPOOLS, seeded)
    db = {"resources": {"requests": {"cpu": "40", "memory": "1Gi"}}}
    await zonal_stateful_set(env, namespace, pool, "zone-b", db)
    await env.create(DEPLOYMENTS, web(pool, namespace), namespace)

    async def all_unschedulable() -> bool:
        pods = (await env.client.list(PODS, namespace))["items"]
        return len(pods) == 4 and all(classify(p).candidate for p in pods)

    await env.eventually(all_unschedulable, "four Unschedulable pods", timeout=90)
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
    return pool, scaler


async def test_a_zone_spread_and_a_zonal_volume_raise_the_pool_once_with_zone_targets(
    operator_env: OperatorEnv, kube_control_plane: Any
) -> None:
    env = operator_env
    namespace = kube_control_plane.create_namespace("zones")
    pool, scaler = names(env)
    writes = Writes([])
    informer = Informer(env.client, NODEPOOLS, field_selector=f"metadata.name={pool}")
    informer.add_handler(writes)
    informer.start()
    await informer.wait_synced()
    try:
        await raise_for_zones(env, namespace)
        await env.start(controllers=("autoscaler",), kubelets=False)

        # the raise, then a later pass (the pool's change brings one at once) that asks for
        # nothing more
        async def settled() -> bool:
            after = await status_of(env, scaler)
            return bool(after.get("lastDecision", "").startswith("no scale up (target 4)"))

        await env.eventually(settled, "the raise and a pass after it", timeout=60)
        triggered = await events_about(env.client, scaler, "default", "TriggeredScaleUp")
        assert triggered == [
            f"NodePool {pool}: scale up 0 -> 4: 4 pods need 4 new mem96.large nodes "
            "(zone-a: 1, zone-b: 2, zone-c: 1)"
        ]
        obj = await env.client.get(NODEPOOLS, pool)
        assert obj["spec"]["targetNodes"] == TARGET
        assert obj["spec"]["zoneTargets"] == ZONE_TARGETS

        # one write, both fields in it: the pool went from (0, none) to (4, targets) at once
        async def watched() -> bool:
            return writes.seen[-1] == (TARGET, ZONE_TARGETS)

        await env.eventually(watched, "the watch to bring the write")
        assert writes.seen == [(0, {}), (TARGET, ZONE_TARGETS)]
        assert scale_writes(env) == 0
        updates = metric(
            env, "kubeloop_api_writes_total", controller="autoscaler", resource=NODEPOOLS.key
        )
        assert updates == 1
        managers = {
            m["manager"]
            for m in obj["metadata"]["managedFields"]
            if "f:zoneTargets" in m.get("fieldsV1", {}).get("f:spec", {})
        }
        assert managers == {"kubeloop-autoscaler"}
    finally:
        await informer.stop()
