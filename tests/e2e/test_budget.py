"""Disruption budgets against the real control plane: no more of a pool's Nodes are tainted
for removal (``kubeloop.dev/disrupting``) or being deleted at once than the budget allows.

The oracle is the apiserver's watch of the pool's Nodes: every event updates the set of Nodes
being disrupted, and the largest that set ever was is the concurrency the budget must bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NODES, PODS, Deleted, Informer, Invalid, Manager, Object
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import DO_NOT_DISRUPT, nodes_of, pod

pytestmark = pytest.mark.integration

DISRUPTING = "kubeloop.dev/disrupting"


class Disrupted:
    """A watch on the pool's Nodes: which are being disrupted now, the most ever at once,
    and every Node that was ever disrupted."""

    def __init__(self, env: OperatorEnv, pool_name: str) -> None:
        self.now: set[str] = set()
        self.ever: set[str] = set()
        self.most = 0
        self._informer = Informer(env.client, NODES, label_selector=f"{POOL_LABEL}={pool_name}")
        self._informer.add_handler(self._node)

    async def start(self) -> None:
        self._informer.start()
        await self._informer.wait_synced()

    async def stop(self) -> None:
        await self._informer.stop()

    def _node(self, event: Any) -> None:
        node: Object = event.obj
        name = node["metadata"]["name"]
        taints = node.get("spec", {}).get("taints") or []
        disrupted = bool(node["metadata"].get("deletionTimestamp")) or any(
            t.get("key") == DISRUPTING for t in taints
        )
        if disrupted and not isinstance(event, Deleted):
            self.now.add(name)
            self.ever.add(name)
        else:
            self.now.discard(name)
        self.most = max(self.most, len(self.now))


def passes(mgr: Manager) -> float:
    """The NodePool controller's reconciles so far, whatever their result."""
    metric = mgr.metrics.registry.get("controller_runtime_reconcile_total")
    assert metric is not None
    results = ("success", "error", "requeue", "requeue_after")
    child: Any
    total = 0.0
    for result in results:
        child = metric.labels(controller="nodepool", result=result)
        total += float(child.value)
    return total


def budgeted_pool(name: str, target: int, budgets: list[dict[str, Any]]) -> dict[str, Any]:
    return factories.nodepool(name, target=target, max_nodes=6, disruption={"budgets": budgets})


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("budget")


async def test_a_budget_of_one_removes_five_nodes_one_at_a_time(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    name = f"budget-{env.run_id}"
    await env.create(NODEPOOLS, budgeted_pool(name, 6, [{"nodes": "1"}]))
    await env.start(controllers=("nodepool",))

    async def six_nodes() -> bool:
        return len(await nodes_of(env, name)) == 6

    await env.eventually(six_nodes, "six nodes")
    watch = Disrupted(env, name)
    await watch.start()
    try:
        await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

        async def one_left() -> bool:
            return len(await nodes_of(env, name)) == 1 and not watch.now

        await env.eventually(one_left, "five nodes removed", timeout=120)
    finally:
        await watch.stop()
    assert len(watch.ever) == 5
    assert watch.most == 1
    status = (await env.client.get(NODEPOOLS, name))["status"]
    assert status["disruption"] == {"disrupting": 0, "allowed": 1}


async def test_the_budget_holds_across_an_operator_restart(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """One Node's drain is held by a do-not-disrupt pod while the operator restarts: the
    new operator counts that Node from its taint and starts no other removal."""
    env = operator_env
    name = f"restart-{env.run_id}"
    await env.create(NODEPOOLS, budgeted_pool(name, 3, [{"nodes": "1"}]))
    await env.start(controllers=("nodepool",))

    async def three_nodes() -> bool:
        return len(await nodes_of(env, name)) == 3

    await env.eventually(three_nodes, "three nodes")
    # One pod held by do-not-disrupt on every node: each node's drain blocks until released.
    held = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", DO_NOT_DISRUPT: "true"}
    for node in await nodes_of(env, name):
        node_name = node["metadata"]["name"]
        manifest = pod(f"held-{node_name}", name, annotations=dict(held))
        manifest["spec"]["nodeName"] = node_name
        await env.create(PODS, manifest, namespace)
    watch = Disrupted(env, name)
    await watch.start()
    try:
        await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

        async def one_disrupting() -> bool:
            return len(watch.now) == 1

        await env.eventually(one_disrupting, "one node tainted for removal")

        async def reported() -> Any:
            status = (await env.client.get(NODEPOOLS, name)).get("status") or {}
            return status.get("disruption") == {"disrupting": 1, "allowed": 0}

        await env.eventually(reported, "status.disruption to report the drain")
        await env.stop()
        mgr = await env.start(controllers=("nodepool",))
        before = passes(mgr)

        async def looked_again() -> bool:
            # the new operator has made two passes over the pool since its start
            return passes(mgr) >= before + 2

        await env.eventually(looked_again, "the restarted operator's passes")
        status = (await env.client.get(NODEPOOLS, name))["status"]
        assert status["disruption"] == {"disrupting": 1, "allowed": 0}
        assert watch.most == 1
        # release every hold: the removals go on, still one at a time
        for pod_name in [f"held-{n['metadata']['name']}" for n in await nodes_of(env, name)]:
            patch = {"metadata": {"annotations": {DO_NOT_DISRUPT: None}}}
            await env.client.patch(PODS, pod_name, patch, namespace)

        async def one_left() -> bool:
            return len(await nodes_of(env, name)) == 1 and not watch.now

        await env.eventually(one_left, "two nodes removed", timeout=120)
    finally:
        await watch.stop()
    assert len(watch.ever) == 2
    assert watch.most == 1


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        ({"nodes": "1", "schedule": "@daily", "duration": "1h"}, "not supported yet"),
        ({"nodes": "150%"}, "spec.disruption.budgets[0].nodes"),
        ({"nodes": "1", "reasons": ["Bored"]}, "spec.disruption.budgets[0].reasons[0]"),
    ],
)
async def test_the_apiserver_refuses_a_bad_budget_naming_it(
    operator_env: OperatorEnv, budget: dict[str, Any], said: str
) -> None:
    env = operator_env
    with pytest.raises(Invalid) as refused:
        await env.create(NODEPOOLS, budgeted_pool(f"bad-{env.run_id}", 0, [budget]))
    assert said in str(refused.value)
