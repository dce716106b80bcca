"""Repair that cannot run away: a third of a pool's kubelets die at once (a zone's network
impairment) and, with the threshold at 20 %, no node is replaced and the pool's
RepairBlocked condition names them; with the threshold raised above their share they are
drained (evictions through the Eviction API) and replaced one at a time.

Oracles: the apiserver's objects (the pool's condition, the Nodes, as the test's own watch
saw them: never two pool nodes tainted for disruption at once), the Events, the cloud's
records, and the operator's requests (evictions accepted).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from kubeloop import (
    NODES,
    PODS,
    Added,
    Deleted,
    Event,
    Informer,
    NotFound,
    Object,
    Updated,
    remove_finalizer,
)
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import DISRUPTING, Requests
from tests.e2e.test_node_lifecycle import ONLY_NODEPOOL, _events, _nodes, _pool, _wait_converged

pytestmark = pytest.mark.integration

SIZE = 6
SILENCED = 2  # a third of the pool


class Disrupting:
    """The pool's Nodes tainted for disruption (and not yet deleted), as a watch saw them;
    the most seen at once."""

    def __init__(self) -> None:
        self.now: set[str] = set()
        self.most = 0

    def on_event(self, event: Event) -> None:
        if not isinstance(event, Added | Updated | Deleted):
            return
        name = event.obj["metadata"]["name"]
        taints = (event.obj.get("spec") or {}).get("taints") or []
        tainted = any(t.get("key") == DISRUPTING for t in taints)
        if isinstance(event, Deleted) or not tainted:
            self.now.discard(name)
        elif not event.obj["metadata"].get("deletionTimestamp"):
            self.now.add(name)
        self.most = max(self.most, len(self.now))


def _condition(pool: Object, kind: str) -> dict[str, Any] | None:
    for cond in (pool.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


#: Keeps the evicted pod terminating, as a pod on an unreachable node stays (kwok, which
#: still serves the silenced node's pods, would otherwise finish its deletion at once).
HOLD = "kubeloop.dev/test-hold"


def _evictable_pod(node: str) -> dict[str, Any]:
    """A pod bound to ``node`` that nothing holds (no PDB; voluntary blockers do not apply to
    a repair) and that tolerates the unreachable taint, so only the drain removes it."""
    return factories.pod(
        f"on-{node}",
        namespace="default",
        finalizers=[HOLD],
        node=node,
        tolerations=[{"operator": "Exists"}],
        container_name="app",
        image="registry.k8s.io/pause:3.9",
    )


async def test_a_third_of_the_pool_unhealthy_is_held_then_repaired_one_at_a_time(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    requests = Requests()
    env.client.add_observer(requests)
    name = f"zone-{env.run_id}"
    disruption = {
        "drainTimeout": "2s",
        "repair": {"toleration": "2s", "maxUnhealthyPercent": 20},
    }
    await env.create(NODEPOOLS, _pool(name, SIZE, maxNodes=10, disruption=disruption))
    await _wait_converged(env, name, SIZE)
    nodes = sorted(n["metadata"]["name"] for n in await _nodes(env, name))
    silenced = nodes[:SILENCED]
    await env.create(PODS, _evictable_pod(silenced[0]), "default")

    watched = Disrupting()
    informer = Informer(env.client, NODES, label_selector=f"{POOL_LABEL}={name}")
    informer.add_handler(watched.on_event)
    informer.start()
    await informer.wait_synced()
    try:
        assert env.kubelets is not None
        for node in silenced:
            await env.kubelets.kill(node)

        async def held() -> dict[str, Any] | None:
            cond = _condition(await env.client.get(NODEPOOLS, name), "RepairBlocked")
            return cond if cond is not None and cond["status"] == "True" else None

        cond = await env.eventually(held, "the pool to hold the repair back", timeout=120)
        assert cond is not None
        assert cond["reason"] == "TooManyUnhealthy"
        assert (
            f"{SILENCED} of {SIZE} nodes unhealthy (33%) > maxUnhealthyPercent 20%"
            in (cond["message"])
        )
        assert all(node in cond["message"] for node in silenced)
        await asyncio.sleep(3)  # more passes (the toleration is 2s): still none replaced
        assert await _events(env.client, name, "NodeRepair") == []
        assert len(env.cloud.snapshot().instances) == SIZE
        assert sorted(n["metadata"]["name"] for n in await _nodes(env, name)) == nodes
        assert watched.most == 0
        assert requests.evictions() == 0

        # Above their share now: they are repaired, drained first, one at a time.
        patch = {"spec": {"disruption": {"repair": {"maxUnhealthyPercent": 50}}}}
        await env.client.patch(NODEPOOLS, name, patch)

        async def replaced() -> bool:
            left = {n["metadata"]["name"] for n in await _nodes(env, name)}
            return not left & set(silenced)

        await env.eventually(replaced, "both silent nodes to be replaced", timeout=120)
        pool = await _wait_converged(env, name, SIZE)
    finally:
        await informer.stop()
        with contextlib.suppress(NotFound):
            pod = await env.client.get(PODS, f"on-{silenced[0]}", "default")
            await remove_finalizer(env.client, PODS, pod, HOLD)

    notes = await _events(env.client, name, "NodeRepair")
    assert len(notes) == SILENCED
    assert all(any(node in note for note in notes) for node in silenced)
    assert watched.most == 1, "never two nodes drained for repair at once"
    assert requests.evictions() >= 1, "the pod on the first silent node was evicted"
    # the evicted pod never finishes terminating: the drain stops at drainTimeout
    timed_out = await _events(env.client, name, "RepairDrainTimedOut")
    assert any(silenced[0] in note for note in timed_out)
    snapshot = env.cloud.snapshot()
    assert len(snapshot.instances) == SIZE + SILENCED, "exactly one replacement each"
    assert len(snapshot.live) == SIZE
    cond = _condition(pool, "RepairBlocked")
    assert cond is not None
    assert cond["status"] == "False"
