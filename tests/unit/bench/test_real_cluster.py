"""The Karpenter benchmark's cluster as a real one is set (``bench/_real_cluster.py``)."""

from __future__ import annotations

from bench._real_cluster import SYSTEM_TAINT, real_cluster_timing, system_node
from bench.phases import node_schedulable

from kubeloop.envtest import KWOK_NODE_ANNOTATIONS, ControlPlaneOptions
from nodepool_operator.controllers import POOL_LABEL


def test_node_lifecycle_timing_is_upstream_defaults() -> None:
    options = real_cluster_timing(ControlPlaneOptions(controller_manager=True))
    assert (options.node_monitor_period_seconds, options.node_monitor_grace_seconds) == (5, 50)
    assert options.node_lease_seconds == 40  # the kubelet's nodeLeaseDurationSeconds


def test_the_control_plane_keeps_its_test_timing_unless_told() -> None:
    options = ControlPlaneOptions()
    assert (options.node_monitor_period_seconds, options.node_monitor_grace_seconds) == (2, 30)


def test_the_system_node_is_run_by_kwok_and_takes_no_workload() -> None:
    node = system_node()
    assert node["metadata"]["annotations"] == dict(KWOK_NODE_ANNOTATIONS)
    assert node["spec"]["taints"] == [SYSTEM_TAINT]
    ready = {
        **node,
        "status": {**node["status"], "conditions": [{"type": "Ready", "status": "True"}]},
    }
    # Ready, yet never schedulable for a pod without the add-ons' toleration
    assert not node_schedulable(ready)
    assert POOL_LABEL not in node["metadata"]["labels"]  # in no pool: neither side counts it
