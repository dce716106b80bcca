"""One pool per pod on the real control plane: two Autoscalers watch the same namespace, both
pools' nodes would take its pods, and only the one with the higher weight raises its pool; and a
GPU pod, which only the GPU pool's node takes.

The oracle is the apiserver: both NodePools' ``spec.targetNodes`` and ``metadata.generation``
(a raise of the loser's target would bump its generation, even if lowered again), the
Autoscalers' status, and the Events on the pods. The NodePool controller is not started: the
choice is the Autoscalers' alone, and no VM is needed to see it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NODES, PODS
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.cloud import NVIDIA_GPU
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.autoscaler._choice import SERVED_ELSEWHERE
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import (
    autoscaler_manifest,
    events_about,
    pool_manifest,
    scale_writes,
    status_of,
)

pytestmark = pytest.mark.integration

#: A label both pools give their nodes, and the only one the pods select.
SHARED = "e2e.kubeloop.dev/choice"


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("choice")


async def test_only_the_heavier_autoscaler_raises_its_pool(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    heavy, light = f"heavy-{env.run_id}", f"light-{env.run_id}"
    for pool in (heavy, light):
        await env.create(NODEPOOLS, pool_manifest(pool, labels={SHARED: env.run_id}))
    # same shape, so least waste ties: the weight decides (and would even against the name)
    await env.create(AUTOSCALERS, autoscaler_manifest(f"as-{heavy}", heavy, namespace, weight=10))
    await env.create(AUTOSCALERS, autoscaler_manifest(f"as-{light}", light, namespace))
    await env.start(controllers=("autoscaler",))
    app = factories.container("app", cpu="100m", memory="28Gi")
    for i in range(2):
        pod = factories.pod(f"p{i}", node_selector={SHARED: env.run_id}, containers=[app], grace=0)
        await env.create(PODS, pod, namespace)

    async def settled() -> dict[str, Any] | None:
        """Both have looked at both pods: the winner's later look counts its booting node."""
        won = (await status_of(env, f"as-{heavy}")).get("lastDecision", "")
        lost = await status_of(env, f"as-{light}")
        done = won.startswith("no scale up (target 1)") and "2 pods" in lost.get("lastDecision", "")
        return lost if done else None

    lost = await env.eventually(settled, "both Autoscalers to decide on both pods")
    assert lost is not None
    why = f"Autoscaler as-{heavy} scales NodePool {heavy} for it: weight 10 > 0"
    assert lost["lastDecision"] == f"no scale up (target 0); 2 pods {SERVED_ELSEWHERE} ({why})"
    pools = {p: await env.client.get(NODEPOOLS, p) for p in (heavy, light)}
    assert pools[heavy]["spec"]["targetNodes"] == 1  # two 28Gi pods, one 96Gi node
    assert pools[light]["spec"]["targetNodes"] == 0
    assert pools[light]["metadata"]["generation"] == 1  # never raised, not even for a moment
    assert scale_writes(env) == 1
    for i in range(2):
        notes = await events_about(env.client, f"p{i}", namespace, "NotTriggerScaleUp")
        assert notes == [f"pod didn't trigger scale-up: {SERVED_ELSEWHERE}: {why}"]


async def test_a_gpu_pod_gets_a_gpu_node_though_the_cpu_pool_weighs_more(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Issue 21 item 6 end to end: the GPU pool's Node registers with ``nvidia.com/gpu`` (from
    its type), kube-scheduler binds the GPU pod to it; the heavier CPU pool's Autoscaler,
    whose node cannot take the pod, never raises its pool."""
    env = operator_env
    gpu, cpu = f"gpu-{env.run_id}", f"cpu-{env.run_id}"
    await env.create(
        NODEPOOLS,
        factories.nodepool(
            gpu, instance_type="g4dn.xlarge", max_nodes=2, labels={SHARED: env.run_id}
        ),
    )
    await env.create(
        NODEPOOLS,
        factories.nodepool(
            cpu, instance_type="m5.xlarge", max_nodes=2, labels={SHARED: env.run_id}
        ),
    )
    await env.create(AUTOSCALERS, autoscaler_manifest(f"as-{gpu}", gpu, namespace))
    await env.create(AUTOSCALERS, autoscaler_manifest(f"as-{cpu}", cpu, namespace, weight=50))
    await env.start(controllers=("nodepool", "autoscaler"))
    # an extended resource cannot be overcommitted: the API wants its limit, equal
    wants = {"cpu": "1", "memory": "2Gi", NVIDIA_GPU: "1"}
    app = factories.container("app", resources={"requests": wants, "limits": {NVIDIA_GPU: "1"}})
    pod = factories.pod("train", node_selector={SHARED: env.run_id}, containers=[app], grace=0)
    await env.create(PODS, pod, namespace)

    async def bound() -> str | None:
        name = (await env.client.get(PODS, "train", namespace))["spec"].get("nodeName")
        return str(name) if name else None

    node_name = await env.eventually(bound, "the GPU pod to be scheduled", timeout=60)
    node = await env.client.get(NODES, str(node_name))
    assert node["metadata"]["labels"][POOL_LABEL] == gpu
    assert node["status"]["allocatable"][NVIDIA_GPU] == "1"
    pools = {p: await env.client.get(NODEPOOLS, p) for p in (gpu, cpu)}
    assert pools[gpu]["spec"]["targetNodes"] == 1
    assert (pools[cpu]["spec"]["targetNodes"], pools[cpu]["metadata"]["generation"]) == (0, 1)
    # if the CPU pool's Autoscaler looked before the pod was bound, it named the GPU one
    notes = await events_about(env.client, "train", namespace, "NotTriggerScaleUp")
    assert all(f"{SERVED_ELSEWHERE}: Autoscaler as-{gpu}" in note for note in notes), notes
