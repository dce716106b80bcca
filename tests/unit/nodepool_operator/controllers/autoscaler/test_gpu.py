"""GPUs (issue 21 item 6), pure: an NVIDIA type's GPUs are ``nvidia.com/gpu`` in the pool's node
template and in the Node its VM registers, from the one function both are built from; a pod
asking for a GPU scales a GPU pool by as many nodes as its GPUs need, and a CPU pool reports
it does not fit; of two Autoscalers watching its namespace, the GPU pool's scales for it
whatever the CPU pool's weight."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodepool_operator.api import parse_autoscaler, parse_nodepool
from nodepool_operator.cloud import CATALOGUE, NVIDIA_GPU
from nodepool_operator.controllers._capacity import pool_template
from nodepool_operator.controllers._node_manifest import node_bootstrap
from nodepool_operator.controllers.autoscaler._choice import SERVED_ELSEWHERE, option
from nodepool_operator.controllers.autoscaler._report import Subject
from nodepool_operator.controllers.autoscaler.decide import Clock, Decision, Knobs, Memory, decide
from nodepool_operator.controllers.autoscaler.observe import Observation, snapshot
from nodepool_operator.scheduling import Resources
from tests import factories

CLOCK = Clock(10_000.0, datetime(2026, 1, 1, 12, 0, tzinfo=UTC))


def gpu_pod(name: str, gpus: int = 1, memory: str = "4Gi") -> dict[str, Any]:
    return factories.pod(
        name,
        namespace="prod",
        uid=f"uid-{name}",
        requests={"cpu": "1", "memory": memory, NVIDIA_GPU: str(gpus)},
        unschedulable=True,
    )


@pytest.mark.parametrize(
    ("instance_type", "gpus"),
    [("g4dn.xlarge", 1), ("g5.xlarge", 1), ("g4dn.12xlarge", 4), ("m5.xlarge", 0)],
)
def test_the_template_and_the_node_carry_the_types_gpus(instance_type: str, gpus: int) -> None:
    pool = parse_nodepool(factories.nodepool("gpu", instance_type=instance_type))
    template = pool_template(pool)
    assert dict(template.allocatable.extended) == ({NVIDIA_GPU: gpus} if gpus else {})
    known = next(t for t in CATALOGUE if t.name == instance_type)
    node = node_bootstrap(pool, "gpu-0", instance_type, known)
    assert node.capacity.get(NVIDIA_GPU) == (str(gpus) if gpus else None)
    # the Node the VM registers offers what the template promised
    assert Resources.from_resource_list(node.capacity) == template.allocatable


def observation(instance_type: str, *pods: dict[str, Any]) -> Observation:
    scaler = factories.autoscaler("as", pool="pool", namespaces=["prod"])
    pool = factories.nodepool("pool", target=0, instance_type=instance_type, max_nodes=10)
    obs = snapshot(
        scaler,
        parse_autoscaler(scaler),
        pool,
        pods=pods,
        nodes=[],
        pods_on=lambda _: [],
        first_seen=lambda _: 0.0,
    )
    assert isinstance(obs, Observation)
    return obs


def decided(instance_type: str, *pods: dict[str, Any]) -> Decision:
    return decide(observation(instance_type, *pods), Memory(), CLOCK, Knobs())


@pytest.mark.parametrize(
    ("instance_type", "nodes"),
    [("g4dn.xlarge", 3), ("g4dn.12xlarge", 1)],
)
def test_gpu_pods_scale_a_gpu_pool_by_the_gpus_they_need(instance_type: str, nodes: int) -> None:
    decision = decided(instance_type, *(gpu_pod(f"train-{i}") for i in range(3)))
    assert decision.target is not None
    assert (decision.target.expected, decision.target.desired) == (0, nodes)


def test_a_pod_asking_for_more_gpus_than_a_node_has_is_too_big() -> None:
    decision = decided("g4dn.xlarge", gpu_pod("big", gpus=2))
    assert decision.target is None
    assert (
        decision.status.last_decision
        == "no scale up (target 0); 1 pod too big (nvidia.com/gpu 2 > 1)"
    )


def test_a_cpu_pool_reports_a_gpu_pod_as_not_fitting() -> None:
    decision = decided("m5.xlarge", gpu_pod("train"))
    assert decision.target is None
    notes = [(n.subject, n.note) for n in decision.events]
    assert (Subject.POD, "pod didn't trigger scale-up: TooBig: nvidia.com/gpu 1 > 0") in notes


def test_of_a_cpu_and_a_gpu_autoscaler_the_gpu_one_scales_for_a_gpu_pod() -> None:
    """The CPU pool's Autoscaler is heavier, but its node cannot take the pod: it is no
    option, so the GPU pool's Autoscaler scales and the CPU one says so."""
    gpu_scaler = parse_autoscaler(factories.autoscaler("gpu", pool="gpu", namespaces=["prod"]))
    gpu_pool = parse_nodepool(factories.nodepool("gpu", instance_type="g4dn.xlarge"))
    rival = option(gpu_scaler, gpu_pool, pool_template(gpu_pool), registered=0)
    scaler = factories.autoscaler("cpu", pool="pool", namespaces=["prod"], weight=50)
    pool = factories.nodepool("pool", target=0, instance_type="m5.xlarge", max_nodes=10)
    obs = snapshot(
        scaler,
        parse_autoscaler(scaler),
        pool,
        pods=[
            gpu_pod("train"),
            factories.pod("web", namespace="prod", cpu="1", unschedulable=True),
        ],
        nodes=[],
        pods_on=lambda _: [],
        first_seen=lambda _: 0.0,
        rivals=[rival],
    )
    assert isinstance(obs, Observation)
    decision = decide(obs, Memory(), CLOCK, Knobs())
    # the CPU pod is the CPU pool's (weight 50 > 0); the GPU pod the GPU pool's
    assert decision.target is not None
    assert [str(p.pod) for p in decision.plan.placements] == ["prod/web"]
    why = "Autoscaler gpu scales NodePool gpu for it: the only Autoscaler whose pool can take it"
    assert f"1 pod {SERVED_ELSEWHERE} ({why})" in (decision.status.last_decision or "")
