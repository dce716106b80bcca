"""Scale-down blockers against the real control plane: a bare pod, a pod annotated
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` and one annotated
``karpenter.sh/do-not-disrupt: "true"`` each keep their node, while the unneeded nodes without
blockers are still removed; a blocker that turns up after a node was chosen moves the
scale-down on to the next candidate.

Oracles are the apiserver's objects (Nodes, pods by uid and deletionTimestamp, the Autoscaler's
status, Events) and every request the operator's client sent with the answer it got (no
eviction or delete of a blocked pod).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeloop import NODES, PODS, NotFound, Object
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    DISRUPTING,
    KARPENTER_DO_NOT_DISRUPT,
    PDBS,
    SAFE_TO_EVICT,
    Requests,
    nodes_of,
    pod,
    pool,
    settled_nodes,
)
from tests.e2e.test_autoscaler import Timeline, autoscaler_manifest, events_about

pytestmark = pytest.mark.integration


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("blockers")


async def _start(
    env: OperatorEnv, prefix: str, target: int, controllers: tuple[str, ...]
) -> tuple[Requests, str, list[str]]:
    """A pool of ``target`` settled nodes under the operator, with a request observer on."""
    requests = Requests()
    env.client.add_observer(requests)
    name = f"{prefix}-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, target))
    await env.start(controllers=controllers)
    return requests, name, await settled_nodes(env, name, target)


async def _cordon_all_but(env: OperatorEnv, nodes: list[str], keep: str) -> None:
    """Only ``keep`` takes new pods: so an unpinned pod (one the simulation may move
    elsewhere) lands on the node the test wants it on."""
    for name in nodes:
        await env.client.patch(NODES, name, {"spec": {"unschedulable": name != keep}})


async def _running_on(env: OperatorEnv, namespace: str, selector: str, node: str) -> Object:
    async def running() -> Object | None:
        pods = (await env.client.list(PODS, namespace, label_selector=selector))["items"]
        for found in pods:
            status = found.get("status", {})
            if found["spec"].get("nodeName") == node and status.get("phase") == "Running":
                return dict(found)
        return None

    found = await env.eventually(running, f"a pod {selector} running on {node}", timeout=90)
    assert found is not None
    return found


def _pinned_deployment(name: str, pool_name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return factories.deployment(
        name,
        1,
        annotations=annotations,
        node_selector={POOL_LABEL: pool_name},
        container_name="web",
    )


async def _unchanged(env: OperatorEnv, namespace: str, before: Object) -> bool:
    """The very same pod (same uid), not being deleted."""
    current = await env.client.get(PODS, before["metadata"]["name"], namespace)
    return bool(
        current["metadata"]["uid"] == before["metadata"]["uid"]
        and not current["metadata"].get("deletionTimestamp")
    )


async def test_blocked_nodes_stay_and_the_unneeded_ones_without_blockers_go(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Five nodes, each far below half used: a bare pod on A, a safe-to-evict "false" pod on
    B, a karpenter.sh/do-not-disrupt pod on C (both owned by Deployments), nothing on D, and
    on E a bare pod annotated safe-to-evict "true" (the override). Without blockers all of
    A, B, C could go (their pods fit elsewhere); with them only D and E go, and A, B and C are
    reported with their pods and reasons."""
    env = operator_env
    requests, name, nodes = await _start(env, "blk", 5, ("nodepool", "autoscaler"))
    a, b, c, d, e = nodes

    await _cordon_all_but(env, [a, b, c, d, e], a)
    await env.create(PODS, pod("bare", name), namespace)
    bare = await _running_on(env, namespace, "", a)
    await _cordon_all_but(env, [a, b, c, d, e], b)
    await env.create(
        DEPLOYMENTS_RES, _pinned_deployment("unsafe", name, {SAFE_TO_EVICT: "false"}), namespace
    )
    unsafe = await _running_on(env, namespace, "app=unsafe", b)
    await _cordon_all_but(env, [a, b, c, d, e], c)
    await env.create(
        DEPLOYMENTS_RES,
        _pinned_deployment("karp", name, {KARPENTER_DO_NOT_DISRUPT: "true"}),
        namespace,
    )
    karp = await _running_on(env, namespace, "app=karp", c)
    await _cordon_all_but(env, [a, b, c, d, e], e)
    await env.create(PODS, pod("overridden", name, annotations={SAFE_TO_EVICT: "true"}), namespace)
    await _running_on(env, namespace, "", e)
    for node_name in (a, b, c, d, e):
        await env.client.patch(NODES, node_name, {"spec": {"unschedulable": None}})
    await settled_nodes(env, name, 5)

    timeline = await Timeline.watch(env.client, name, namespace)
    scaler = f"as-{env.run_id}"
    try:
        await env.create(
            AUTOSCALERS,
            autoscaler_manifest(
                scaler,
                name,
                namespace,
                frequency="1s",
                scaleDownEnabled=True,
                scaleDownUnneededTime="2s",
            ),
        )

        async def removed() -> bool:
            return sorted(n["metadata"]["name"] for n in await nodes_of(env, name)) == [a, b, c]

        await env.eventually(removed, "D and E removed, A, B and C kept", timeout=120)

        async def reported() -> list[dict[str, Any]]:
            status = (await env.client.get(AUTOSCALERS, scaler)).get("status") or {}
            entries = status.get("unremovableNodes") or []
            return entries if {u["node"] for u in entries} == {a, b, c} else []

        entries = await env.eventually(reported, "A, B and C listed as unremovable")
        by_node = {u["node"]: (u["reason"], u.get("pod")) for u in entries}
        assert by_node == {
            a: ("NotReplicated", f"{namespace}/bare"),
            b: ("NotSafeToEvictAnnotation", f"{namespace}/{unsafe['metadata']['name']}"),
            c: ("DoNotDisruptAnnotation", f"{namespace}/{karp['metadata']['name']}"),
        }
        for node, why in (
            (a, "has no controller"),
            (b, SAFE_TO_EVICT),
            (c, KARPENTER_DO_NOT_DISRUPT),
        ):
            notes = await events_about(env.client, node, "default", "ScaleDownBlocked")
            assert notes, f"a ScaleDownBlocked Event on {node}"
            assert why in notes[0]

        # More passes of the Autoscaler change nothing: the blocked nodes are never unneeded.
        await asyncio.sleep(3 * 2.0)
        assert sorted(n["metadata"]["name"] for n in await nodes_of(env, name)) == [a, b, c]
        # Lowered once or twice (D and E may come due in one pass or two), never below 3.
        assert timeline.values[0] == 5
        assert timeline.values[-1] == 3
        assert min(timeline.values) == 3
        for before in (bare, unsafe, karp):
            assert await _unchanged(env, namespace, before), before["metadata"]["name"]
        # The only eviction is the overridden bare pod's; nothing was deleted, nothing refused.
        assert requests.evictions() == 1
        assert requests.evictions(refused=True) == 0
        assert requests.pod_deletes() == 0
        for kept in await nodes_of(env, name):
            assert not any(t["key"] == DISRUPTING for t in kept["spec"].get("taints") or ())
    finally:
        await timeline.stop()


async def test_a_blocker_found_after_the_choice_moves_the_scale_down_to_the_next_node(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """X (least used) is chosen and its drain is held by a PodDisruptionBudget (Y's pod is
    under one that allows nothing yet too, so X is chosen by use alone); then Y's budget is
    relaxed and X's pod is annotated karpenter.sh/do-not-disrupt. Y can go instead (its pod
    fits on X): X is kept and untainted, Y is drained and removed, X's pod is never
    evicted."""
    env = operator_env
    requests, name, nodes = await _start(env, "next", 2, ("nodepool",))
    x, y = nodes

    await _cordon_all_but(env, [x, y], x)
    await env.create(DEPLOYMENTS_RES, _pinned_deployment("held", name, {}), namespace)
    held = await _running_on(env, namespace, "app=held", x)
    budget = factories.pdb("held", max_unavailable=0)
    await env.create(PDBS, budget, namespace)
    await _cordon_all_but(env, [x, y], y)
    moves = _pinned_deployment("moves", name, {})
    moves["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "300m"
    await env.create(DEPLOYMENTS_RES, moves, namespace)
    moved = await _running_on(env, namespace, "app=moves", y)
    await env.create(PDBS, factories.pdb("moves", max_unavailable=0), namespace)
    for node_name in (x, y):
        await env.client.patch(NODES, node_name, {"spec": {"unschedulable": None}})
    await settled_nodes(env, name, 2)

    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

    async def refused() -> bool:
        return requests.evictions(refused=True) >= 1

    await env.eventually(refused, "the PDB to refuse X's eviction (429)")
    node = await env.client.get(NODES, x)
    assert any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
    await env.client.patch(PDBS, "moves", {"spec": {"maxUnavailable": 1}}, namespace)
    await env.client.patch(
        PODS,
        held["metadata"]["name"],
        {"metadata": {"annotations": {KARPENTER_DO_NOT_DISRUPT: "true"}}},
        namespace,
    )

    async def swapped() -> bool:
        return [n["metadata"]["name"] for n in await nodes_of(env, name)] == [x]

    await env.eventually(swapped, "Y removed instead of X", timeout=120)
    node = await env.client.get(NODES, x)
    assert not any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
    notes = await events_about(env.client, x, "default", "ScaleDownBlocked")
    assert notes
    assert KARPENTER_DO_NOT_DISRUPT in notes[0]
    assert "another node is removed instead" in notes[0]
    assert await _unchanged(env, namespace, held)
    assert requests.evictions() == 1  # Y's pod, once
    assert requests.pod_deletes() == 0
    assert len(env.cloud.snapshot().live) == 1
    await _running_on(env, namespace, "app=moves", x)  # its replacement landed on X
    with pytest.raises(NotFound):  # the evicted pod itself is gone
        await env.client.get(PODS, moved["metadata"]["name"], namespace)


async def test_a_bare_pod_holds_a_node_removed_by_hand_until_it_ends(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """targetNodes lowered by hand with a bare pod on the only node: the node is chosen (there
    is no other) and tainted, but the pod is never evicted; the pool says why in its Ready
    condition and on the Node. Once the pod ends, the node goes."""
    env = operator_env
    requests, name, nodes = await _start(env, "hand", 1, ("nodepool",))
    (only,) = nodes
    await env.create(PODS, pod("bare", name), namespace)
    bare = await _running_on(env, namespace, "", only)

    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 0}})

    async def held() -> dict[str, Any] | None:
        status = (await env.client.get(NODEPOOLS, name)).get("status") or {}
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions", []) if c["type"] == "Ready"), {}
        )
        return ready if ready.get("reason") == "DisruptionBlocked" else None

    ready = await env.eventually(held, "Ready=False, reason DisruptionBlocked")
    assert ready is not None
    assert f"pod {namespace}/bare has no controller" in ready["message"]
    notes = await events_about(env.client, only, "default", "DisruptionBlocked")
    assert notes
    assert f"pod {namespace}/bare has no controller" in notes[0]
    node = await env.client.get(NODES, only)
    assert any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
    assert await _unchanged(env, namespace, bare)
    assert requests.evictions() == 0
    assert requests.evictions(refused=True) == 0
    assert len(env.cloud.snapshot().live) == 1

    # The pod ends (its owner, here the test, deletes it): nothing holds the node any more.
    await env.client.delete(PODS, "bare", namespace, grace_period_seconds=0)

    async def gone() -> bool:
        return not await nodes_of(env, name) and not env.cloud.snapshot().live

    await env.eventually(gone, "the node and its VM to be removed", timeout=60)
    assert requests.evictions() == 0
    assert requests.pod_deletes() == 1  # the test's own: the operator made none
