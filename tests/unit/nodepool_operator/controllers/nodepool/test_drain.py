"""The drain's pure parts: the disrupting taint's patches, and the one workload-pod rule."""

from __future__ import annotations

from typing import Any

from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers.nodepool._drain import (
    DISRUPTING_TAINT,
    disrupting_since,
    has_disrupting_taint,
    taint_patch,
    untaint_patch,
)
from nodepool_operator.scheduling import is_workload

TAINT = {"key": DISRUPTING_TAINT.key, "effect": "NoSchedule"}
# 2026-12-04T23:00:00Z: the drain's start, kept on the taint for the drain timeout.
NOW = 1796425200.0
STAMPED = {**TAINT, "timeAdded": "2026-12-04T23:00:00Z"}


def node(*taints: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
    return {"metadata": {"name": "n", "resourceVersion": "7"}, "spec": spec}


def test_the_taint_is_appended_atomically_or_created_under_a_resource_version_guard() -> None:
    other = {"key": "gpu", "effect": "NoSchedule"}
    assert taint_patch(node_fields(node(other)), NOW) == [
        {"op": "add", "path": "/spec/taints/-", "value": STAMPED}
    ]
    assert taint_patch(node_fields(node()), NOW) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/spec/taints", "value": [STAMPED]},
    ]
    assert taint_patch(node_fields(node(other, TAINT))) == []
    assert disrupting_since(node_fields(node(other, STAMPED))) == NOW
    assert disrupting_since(node_fields(node(other, TAINT))) is None  # no start known
    assert disrupting_since(node_fields(node(other))) is None
    assert has_disrupting_taint(node_fields(node(other, TAINT)))
    assert not has_disrupting_taint(node_fields(node(other)))


def test_untaint_removes_only_the_disrupting_taint_testing_each_element_first() -> None:
    other = {"key": "gpu", "effect": "NoSchedule"}
    assert untaint_patch(node_fields(node(other, TAINT))) == [
        {"op": "test", "path": "/spec/taints/1", "value": TAINT},
        {"op": "remove", "path": "/spec/taints/1"},
    ]
    assert untaint_patch(node_fields(node(other))) == []


def test_daemonset_and_mirror_pods_do_not_hold_a_node() -> None:
    def pod(**meta: Any) -> dict[str, Any]:
        return {"metadata": {"name": "p", **meta}}

    assert is_workload(pod())
    assert not is_workload(pod(ownerReferences=[{"kind": "DaemonSet", "name": "d"}]))
    assert is_workload(pod(ownerReferences=[{"kind": "ReplicaSet", "name": "r"}]))
    assert not is_workload(pod(annotations={"kubernetes.io/config.mirror": "x"}))
