"""Reserved new nodes end to end: with ``spec.reserveNewNodes`` the scheduler (default
``LeastAllocated`` scoring, which spreads) places every pod on the node the Autoscaler's plan
chose for it, so a plan with no room to spare holds: one raise, each node as planned, and
the reservation lifted once its pods are bound. The oracle is the apiserver: the pool's
targetNodes history, where each pod is bound, the Nodes' taints, the cloud's creates."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from typing import Any

import pytest

from kubeloop import NODES, PODS
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers._reserve import RESERVED_KEY
from nodepool_operator.controllers._scope import POOL_LABEL
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import (
    BOTH,
    Timeline,
    autoscaler_manifest,
    names,
    pod_manifest,
    pods_in,
    pool_manifest,
)

pytestmark = pytest.mark.integration

#: S2 in small: three of each on a node fill its memory to 93 of 96 GiB.
BIG = {"cpu": "3500m", "memory": "28Gi"}
SMALL = {"cpu": "900m", "memory": "3100Mi"}


def mixed_burst(pool: str, first: str = "big") -> list[dict[str, Any]]:
    """Six big and six small pods for ``pool``, the ``first`` kind created first."""
    kinds = (("big", BIG), ("small", SMALL))
    return [
        pod_manifest(f"{kind}-{i}", pool, container={"resources": {"requests": requests}})
        for kind, requests in sorted(kinds, key=lambda k: k[0] != first)
        for i in range(6)
    ]


async def all_bound(env: OperatorEnv, namespace: str) -> list[dict[str, Any]]:
    """The namespace's 12 pods once every one is bound (empty until then)."""
    got = await pods_in(env, namespace)
    return got if len(got) == 12 and all(p["spec"].get("nodeName") for p in got) else []


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("reserve")


async def test_reserved_nodes_take_exactly_the_pods_planned_for_them(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    env.cloud = SimulatedCloud(env.settings.cloud_state, boot_seconds=2.0)
    await env.create(NODEPOOLS, pool_manifest(pool, cpu="16", reserveNewNodes=True))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
        await env.start(controllers=BOTH)
        pods = mixed_burst(pool)
        await asyncio.gather(*(env.create(PODS, pod, namespace) for pod in pods))
        bound = await env.eventually(
            functools.partial(all_bound, env, namespace), "all 12 pods to be bound", timeout=120
        )
        per_node = Counter(
            (p["spec"]["nodeName"], p["metadata"]["name"].split("-")[0]) for p in bound
        )
        nodes = {n for n, _ in per_node}
        assert len(nodes) == 2
        assert all(per_node[(n, kind)] == 3 for n in nodes for kind in ("big", "small"))
        # each pod tolerates exactly the node it is bound to: it went where it was planned
        for p in bound:
            reserved = [
                t["value"] for t in p["spec"]["tolerations"] if t.get("key") == RESERVED_KEY
            ]
            assert reserved == [p["spec"]["nodeName"]], p["metadata"]["name"]
        assert timeline.values == [0, 2]  # one raise, and it held
        assert env.cloud.calls().get("create") == 2

        async def opened() -> bool:
            items = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}")
            return all(
                all(t.get("key") != RESERVED_KEY for t in n["spec"].get("taints") or ())
                for n in items["items"]
            )

        await env.eventually(opened, "the reservations to be lifted", timeout=60)
    finally:
        await timeline.stop()


async def test_without_an_autoscaler_the_nodepool_controller_opens_reserved_nodes(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Nothing plans for the pool, so nothing lifts its reservations: the NodePool
    controller's backstop opens each Node a few landing graces after it became Ready."""
    env = operator_env
    pool, _ = names(env)
    env.cloud = SimulatedCloud(env.settings.cloud_state, boot_seconds=0.5)
    await env.create(NODEPOOLS, pool_manifest(pool, targetNodes=1, reserveNewNodes=True))
    await env.start(controllers=("nodepool",), pod_landing_grace_seconds=1.0)
    await env.create(PODS, pod_manifest("plain", pool), namespace)

    async def node_taints() -> list[list[str]]:
        items = (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
        return [[t["key"] for t in n["spec"].get("taints") or ()] for n in items]

    async def reserved() -> bool:
        return any(RESERVED_KEY in keys for keys in await node_taints())

    await env.eventually(reserved, "the new Node to register reserved", timeout=60)

    async def bound() -> str:
        return str((await env.client.get(PODS, "plain", namespace))["spec"].get("nodeName", ""))

    await env.eventually(bound, "the untolerating pod to land once the node opens", timeout=90)
    assert all(RESERVED_KEY not in keys for keys in await node_taints())
