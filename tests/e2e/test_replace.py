"""Consolidation by replacement: a spread no drain can fix (each node's big pod needs more room
than any other node has) ends at the optimum once the Autoscaler trades two nodes for one new
one, under kube-scheduler scoring ``MostAllocated``, which puts each moved pod where the plan
did (the small pods beside the nodes that stay, the big ones on the new node).

The bed is a cluster of its own (the session's scores ``LeastAllocated``; what that profile
does to a replacement is in ``test_drain.py``). The layout is made by hand, each node's pods
created while the other nodes are cordoned, since ``MostAllocated`` would never spread them.
The oracle is the apiserver (the pool's targetNodes history, its Nodes, where each pod runs,
the Events) and the operator client's requests (evictions, no pod deleted)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from kubeloop import NODES, PODS, PatchType
from kubeloop.envtest import ControlPlane
from kubeloop.testing.plugin import CLUSTER_OPTIONS
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests import factories
from tests.e2e.conftest import CRD_DIR, OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    Requests,
    events,
    nodes_of,
    pool,
    settled_nodes,
)
from tests.e2e.test_autoscaler import Timeline
from tests.e2e.test_drain import scale_down_quickly

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube_control_plane() -> Iterator[ControlPlane]:
    """The full test bed, its kube-scheduler scoring ``MostAllocated``."""
    with ControlPlane(replace(CLUSTER_OPTIONS, scheduler_scoring="MostAllocated")) as cp:
        yield cp


@pytest.fixture(scope="module")
def operator_crds(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))


async def running(env: OperatorEnv, namespace: str) -> dict[str, str]:
    """Each pod's node, when every pod of the namespace runs and none is going; else none."""
    pods = (await env.client.list(PODS, namespace))["items"]
    if any(
        p["status"].get("phase") != "Running" or p["metadata"].get("deletionTimestamp")
        for p in pods
    ):
        return {}
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}


async def cordon(env: OperatorEnv, nodes: list[str], on: bool) -> None:
    for name in nodes:
        patch = {"spec": {"unschedulable": True if on else None}}
        await env.client.patch(NODES, name, patch, patch_type=PatchType.MERGE)


async def test_two_nodes_no_drain_frees_are_traded_for_one_new_one_and_end_at_the_optimum(
    operator_env: OperatorEnv, kube_control_plane: ControlPlane
) -> None:
    """Three m5.large nodes (2000m allocatable), each running a 950m and a 200m pod: no
    node's 950m fits another's 850m free, but the pods fit on two (950m + 950m; 950m and
    the three 200m). The Autoscaler raises the target 3 -> 4, and once the new node is Ready
    drains the two nodes it named, one at a time (the default budget, 10 % of 4 nodes): the
    pool ends at two nodes with all six pods running, four evictions and no pod deleted."""
    env = operator_env
    namespace = kube_control_plane.create_namespace("replace")
    requests = Requests()
    env.client.add_observer(requests)
    name = f"replace-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 3))
    await env.start(controllers=("nodepool", "autoscaler"))
    names = await settled_nodes(env, name, 3)
    for i, node in enumerate(names):
        others = [n for n in names if n != node]
        await cordon(env, others, True)
        for app, cpu in (("big", "950m"), ("small", "200m")):
            manifest = factories.deployment(
                f"{app}-{i}", 1, cpu=cpu, node_selector={POOL_LABEL: name}
            )
            await env.create(DEPLOYMENTS_RES, manifest, namespace)

        async def placed(node: str = node, count: int = 2 * (i + 1)) -> dict[str, str]:
            found = await running(env, namespace)
            return found if len(found) == count else {}

        layout = await env.eventually(placed, f"{node}'s two pods running", timeout=90)
        assert sorted(n for n in layout.values() if n == node) == [node, node]
        await cordon(env, others, False)
    timeline = await Timeline.watch(env.client, name, namespace)
    try:
        await scale_down_quickly(env, name, namespace)

        async def at_optimum() -> dict[str, str]:
            found = await running(env, namespace)
            nodes = {n["metadata"]["name"] for n in await nodes_of(env, name)}
            if len(nodes) != 2 or len(found) != 6 or not set(found.values()) <= nodes:
                return {}
            return found

        after = await env.eventually(at_optimum, "6 pods running on 2 nodes", timeout=180)

        async def said() -> list[str]:
            return [n for n in await events(env, name, "TriggeredScaleUp") if "to replace" in n]

        try:
            (note,) = await env.eventually(said, "the replacement's Event on the pool")
        except AssertionError as e:
            seen = {r: await events(env, name, r) for r in ("TriggeredScaleUp", "ScaleDown")}
            raise AssertionError(f"{e}; timeline {timeline.values}; events {seen}") from None
        assert "to replace 2 nodes" in note, note
        assert "with 1 new node" in note, note
    finally:
        await timeline.stop()
    assert timeline.values == [3, 4, 3, 2]
    assert len(env.cloud.snapshot().live) == 2
    assert requests.evictions() == 4  # the pods of the two drained nodes, nothing else
    assert requests.pod_deletes() == 0
    assert len(set(after.values()) - set(names)) == 1  # one of the two is the new node
