"""The Autoscaler's simulation matches the nodes, against the real apiserver and kube-scheduler.

Each test checks a verdict against what the real parts did: the pool's targetNodes in etcd (and
every value it took, from a watch), the Nodes the scheduler bound the pods to, the cloud's
records, and the Events and status the operator wrote. No assertion depends on how fast
anything ran; timeouts are generous bounds only.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NODES, PODS, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import (
    BOTH,
    Timeline,
    autoscaler_manifest,
    events_about,
    names,
    pod_manifest,
    pods_in,
    pool_manifest,
    scale_writes,
    status_of,
    target_of,
)

pytestmark = pytest.mark.integration

DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("sim")


async def pool_nodes(env: OperatorEnv, pool: str) -> list[dict[str, Any]]:
    return list((await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"])


async def pod_events(env: OperatorEnv, namespace: str, pod: str) -> list[str]:
    return await events_about(env.client, pod, namespace, "NotTriggerScaleUp")


async def test_a_pod_that_fits_the_vm_but_not_the_vm_minus_daemonsets_is_reported(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))  # 96Gi nodes
    # A DaemonSet that lands on this pool's nodes only, taking 8Gi of each.
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": f"agent-{env.run_id}"},
        "spec": {
            "selector": {"matchLabels": {"app": f"agent-{env.run_id}"}},
            "template": {
                "metadata": {"labels": {"app": f"agent-{env.run_id}"}},
                "spec": {
                    "nodeSelector": {POOL_LABEL: pool},
                    "containers": [
                        {
                            "name": "agent",
                            "image": "registry.invalid/agent:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "8Gi"}},
                        }
                    ],
                },
            },
        },
    }
    await env.create(DAEMONSETS, daemonset, namespace)
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, frequency="1s"))
    await env.start(controllers=BOTH)
    await env.create(PODS, pod_manifest("vm-sized", pool, "90Gi"), namespace)

    async def reported() -> list[str]:
        return [n for n in await pod_events(env, namespace, "vm-sized") if "after DaemonSets" in n]

    notes = await env.eventually(reported, "the 90Gi pod to be reported as too big")
    assert "TooBig: memory 90Gi > 88Gi after DaemonSets" in notes[0]
    assert "after DaemonSets" in (await status_of(env, scaler))["lastDecision"]
    assert await target_of(env, pool) == 0
    assert scale_writes(env) == 0
    assert env.cloud.calls().get("create", 0) == 0

    # One that fits next to the DaemonSet does scale, by one node. (The 90Gi pod goes first:
    # with no DaemonSet controller here to fill the new node's 8Gi, the scheduler could put
    # the 90Gi pod on it.)
    await env.client.delete(PODS, "vm-sized", namespace)
    await env.create(PODS, pod_manifest("fits", pool, "80Gi"), namespace)

    async def bound() -> bool:
        pods = {p["metadata"]["name"]: p for p in await pods_in(env, namespace)}
        return bool(pods["fits"]["spec"].get("nodeName"))

    await env.eventually(bound, "the 80Gi pod to be scheduled", timeout=90)
    assert await target_of(env, pool) == 1
    assert scale_writes(env) == 1


async def test_a_pool_that_sets_the_arch_label_registers_nodes_with_it(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """The template and the Node come from one source: a pool whose spec.labels say arm64 has
    arm64 Nodes, so an arm64 pod lands and an amd64 pod is reported, never scaled for."""
    env = operator_env
    pool, scaler = names(env)
    arch = "kubernetes.io/arch"
    await env.create(NODEPOOLS, pool_manifest(pool, labels={arch: "arm64"}))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, frequency="1s"))
        await env.start(controllers=BOTH)
        await env.create(PODS, pod_manifest("arm", pool, selector={arch: "arm64"}), namespace)
        await env.create(PODS, pod_manifest("amd", pool, selector={arch: "amd64"}), namespace)

        async def settled() -> bool:
            pods = {p["metadata"]["name"]: p for p in await pods_in(env, namespace)}
            landed = bool(pods["arm"]["spec"].get("nodeName"))
            return landed and bool(await pod_events(env, namespace, "amd"))

        await env.eventually(settled, "arm64 pod bound, amd64 pod reported", timeout=90)
        (node,) = await pool_nodes(env, pool)
        assert node["metadata"]["labels"][arch] == "arm64"
        note = (await pod_events(env, namespace, "amd"))[0]
        assert "NodeSelectorMismatch" in note
        assert "kubernetes.io/arch=amd64 (node has kubernetes.io/arch=arm64)" in note
        assert timeline.values == [0, 1]
        assert scale_writes(env) == 1
    finally:
        await timeline.stop()


async def test_hostname_anti_affinity_needing_five_nodes_gets_five_in_one_decision(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
        await env.start(controllers=BOTH)
        anti = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}
                ]
            }
        }
        for i in range(5):
            pod = pod_manifest(f"web-{i}", pool, "1Gi", affinity=anti)
            pod["metadata"]["labels"] = {"app": "web"}
            await env.create(PODS, pod, namespace)

        async def all_bound() -> list[str] | None:
            nodes = [p["spec"].get("nodeName") for p in await pods_in(env, namespace)]
            return nodes if len(nodes) == 5 and all(nodes) else None

        nodes = await env.eventually(all_bound, "5 anti-affine pods bound", timeout=90)
        assert nodes is not None
        assert len(set(nodes)) == 5
        assert timeline.values == [0, 5]  # one decision, not one node per boot cycle
        assert scale_writes(env) == 1
        assert env.cloud.calls().get("create") == 5
    finally:
        await timeline.stop()


async def test_a_quota_failure_stops_counting_in_flight_at_once_not_after_the_provision_timeout(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """The pool says the cloud refuses (Degraded=QuotaExceeded for its generation): the
    Autoscaler stops counting the requested nodes at once, long before the provision timeout
    (an hour here) would have, names the refusal and backs off."""
    env = operator_env
    pool, scaler = names(env)
    env.cloud.set_quota(0)  # every create is refused
    await env.create(NODEPOOLS, pool_manifest(pool))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, frequency="1s"))
        await env.start(
            controllers=BOTH, max_node_provision_seconds=3600.0, scale_up_backoff_seconds=3600.0
        )
        for i in range(2):
            await env.create(PODS, pod_manifest(f"p{i}", pool, "60Gi"), namespace)

        async def timed_out() -> list[str]:
            return await events_about(env.client, scaler, "default", "ProvisionTimedOut")

        notes = await env.eventually(timed_out, "the provision timeout Event", timeout=60)
        assert "2 requested node(s) are refused by the cloud (QuotaExceeded" in notes[0]
        assert "target 2 -> 0" in notes[0]
        assert await events_about(env.client, pool, "default", "ProvisionTimedOut")

        async def cleared() -> dict[str, Any] | None:
            obj = await env.client.get(NODEPOOLS, pool)
            records = (obj.get("status") or {}).get("instances") or []
            return obj if obj["spec"]["targetNodes"] == 0 and not records else None

        # The phantom nodes are gone: the target is back at the registered count, and the
        # pool's intents for them were retired without a VM ever being made.
        await env.eventually(cleared, "target back to 0 and no instance records", timeout=60)
        assert timeline.values == [0, 2, 0]
        assert env.cloud.snapshot().live == ()
        status = await status_of(env, scaler)
        (cond,) = [c for c in status["conditions"] if c["type"] == "Provisioning"]
        assert cond["status"] == "False"
        assert cond["reason"] == "ProvisionTimedOut"
        assert "backed off" in status["lastDecision"]
    finally:
        await timeline.stop()


async def test_a_pod_the_new_node_did_not_take_is_reported_not_scaled_for_again(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """The simulation and the scheduler disagree: the pod's own scheduler (a stand-in named in
    ``spec.schedulerName``, played by this test) calls it Unschedulable and never binds it, so the
    node planned for it comes up Ready and stays empty. One node is added for it, then it is
    reported, and no more. (A start-up taint added after registration would race the real
    scheduler; this disagreement cannot.)"""
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool, maxNodes=5))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, frequency="1s"))
        await env.start(controllers=BOTH, pod_landing_grace_seconds=2.0)
        stranded = pod_manifest("stranded", pool, "8Gi")
        stranded["spec"]["schedulerName"] = "e2e-stubborn-scheduler"
        await env.create(PODS, stranded, namespace)
        refused = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/0 nodes are available: the stand-in scheduler binds nothing",
        }
        await env.client.patch(
            PODS, "stranded", {"status": {"conditions": [refused]}}, namespace, subresource="status"
        )

        async def reported() -> list[str]:
            notes = await pod_events(env, namespace, "stranded")
            return [n for n in notes if "NotTakenByNewNode" in n]

        await env.eventually(reported, "the pod reported as not taken", timeout=90)
        (pod,) = await pods_in(env, namespace)
        assert not pod["spec"].get("nodeName")
        ready = [
            n
            for n in (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
        ]
        assert len(ready) == 1  # the node planned for it came up, and it did not take it
        assert timeline.values == [0, 1]
        assert scale_writes(env) == 1
        assert "NotTakenByNewNode" in (await status_of(env, scaler))["lastDecision"]
    finally:
        await timeline.stop()
