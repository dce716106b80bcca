"""Expiry against the real control plane: a node older than ``spec.disruption.expireAfter``
is replaced replacement first. Its replacement registers and is Ready before the old node
is tainted for removal, and the old node's pod leaves through the Eviction API only after
that; then the old Node goes.

Oracle: the apiserver's watch of the pool's Nodes and the Deployment's pods, ordered by
resourceVersion (one etcd: a total order of the writes), the Events on the pool and the
operator's requests (evictions accepted).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NODES, PODS, Deleted, Informer, Object
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    DISRUPTING,
    Requests,
    available,
    deployment,
    events,
    is_evicted,
    is_ready,
    pool,
    ready_nodes,
)

pytestmark = pytest.mark.integration


class Timeline:
    """The resourceVersion at which each Node was first Ready and first tainted for
    removal, and at which each pod was first deleted (and its final state)."""

    def __init__(self) -> None:
        self.ready: dict[str, int] = {}
        self.tainted: dict[str, int] = {}
        self.pod_deleted: dict[str, int] = {}
        self.pod_final: dict[str, Object] = {}
        self.pod_node: dict[str, str] = {}

    def on_node(self, event: Any) -> None:
        meta = event.obj["metadata"]
        version = int(meta["resourceVersion"])
        if is_ready(event.obj):
            self.ready.setdefault(meta["name"], version)
        taints = (event.obj.get("spec") or {}).get("taints") or ()
        if any(t.get("key") == DISRUPTING for t in taints):
            self.tainted.setdefault(meta["name"], version)

    def on_pod(self, event: Any) -> None:
        meta = event.obj["metadata"]
        if node := (event.obj.get("spec") or {}).get("nodeName"):
            self.pod_node[meta["name"]] = node
        if meta.get("deletionTimestamp") or isinstance(event, Deleted):
            self.pod_deleted.setdefault(meta["name"], int(meta["resourceVersion"]))
        if isinstance(event, Deleted):
            self.pod_final[meta["name"]] = event.obj


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("expiry")


async def test_an_expired_node_is_drained_only_after_its_replacement_is_ready(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"expiry-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 1))
    await env.start(controllers=("nodepool",))

    async def one() -> list[Object]:
        return await ready_nodes(env, name, 1, untainted=True)

    (old,) = await env.eventually(one, "the pool's node Ready", timeout=90)
    old_name = old["metadata"]["name"]
    dep = deployment(1)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {POOL_LABEL: name}
    await env.create(DEPLOYMENTS_RES, dep, namespace)

    async def up() -> bool:
        return await available(env, namespace, 1)

    await env.eventually(up, "the Deployment's pod available", timeout=90)
    seen = Timeline()
    nodes = Informer(env.client, NODES, label_selector=f"{POOL_LABEL}={name}")
    pods = Informer(env.client, PODS, namespace=namespace, label_selector="app=web")
    nodes.add_handler(seen.on_node)
    pods.add_handler(seen.on_pod)
    for informer in (nodes, pods):
        informer.start()
        await informer.wait_synced()
    try:
        (original,) = [p for p, n in seen.pod_node.items() if n == old_name]
        await env.client.patch(NODEPOOLS, name, {"spec": {"disruption": {"expireAfter": "2s"}}})

        async def retiring() -> bool:
            # The taint is written before the status that records the retirement, and a
            # spec change in between makes that pass's status stale (refused): its next pass
            # untaints. So the roll is decided only once the record says deleting.
            if old_name not in seen.tainted:
                return False
            current = await env.client.get(NODEPOOLS, name)
            records = (current.get("status") or {}).get("instances") or ()
            mine = [r for r in records if r.get("nodeName") == old_name]
            # no record left: retired and already gone
            return not mine or mine[0].get("state") == "deleting"

        await env.eventually(retiring, "the expired node's retirement recorded", timeout=90)
        # Its replacement is young but would expire too: expiry off again stops the roll.
        await env.client.patch(NODEPOOLS, name, {"spec": {"disruption": {"expireAfter": None}}})

        async def drained() -> bool:
            listed = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}")
            gone = old_name not in {n["metadata"]["name"] for n in listed["items"]}
            return gone and original in seen.pod_final

        await env.eventually(drained, "the expired node drained and gone", timeout=90)
    finally:
        for informer in (nodes, pods):
            await informer.stop()

    (replacement,) = [n for n in seen.ready if n != old_name]
    # replacement first: Ready, then the old node tainted, then its pod evicted
    assert seen.ready[replacement] < seen.tainted[old_name] < seen.pod_deleted[original]
    assert is_evicted(seen.pod_final[original])
    assert requests.evictions() >= 1
    assert any(old_name in note for note in await events(env, name, "Expired"))
    assert await events(env, name, "Expiring")
