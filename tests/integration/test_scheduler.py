"""kube-scheduler against kubelet-less Nodes: the signal the autoscaler lives on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kubeloop.envtest import ControlPlane, RestClient
from kubeloop.testing import NodeFactory

pytestmark = pytest.mark.integration


def _wait(fn: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = fn()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _pod(name: str, pool: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"test.kubeloop.dev/pool": pool},
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": requests},
                }
            ],
        },
    }


def _scheduled_condition(rest: RestClient, ns: str, name: str) -> dict[str, Any] | None:
    pod = rest.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None


@pytest.mark.parametrize(
    ("resource", "small", "big", "pod_request"),
    [
        ("cpu", {"cpu": "1"}, {"cpu": "8"}, {"cpu": "2"}),
        ("memory", {"memory": "4Gi"}, {"memory": "96Gi"}, {"memory": "28Gi"}),
    ],
)
def test_unschedulable_then_bound_when_a_node_fits(
    kube_control_plane: ControlPlane,
    kube_namespace: str,
    kube_nodes: NodeFactory,
    resource: str,
    small: dict[str, str],
    big: dict[str, str],
    pod_request: dict[str, str],
) -> None:
    rest = kube_control_plane.rest()
    pool = uuid.uuid4().hex[:8]
    kube_nodes(labels={"test.kubeloop.dev/pool": pool}, **small)
    rest.post(f"/api/v1/namespaces/{kube_namespace}/pods", _pod("p", pool, pod_request))

    cond = _wait(
        lambda: (
            (c := _scheduled_condition(rest, kube_namespace, "p")) and c["status"] == "False" and c
        ),
        "PodScheduled=False",
    )
    assert cond["reason"] == "Unschedulable"
    assert f"Insufficient {resource}" in cond["message"]
    assert not rest.get(f"/api/v1/namespaces/{kube_namespace}/pods/p")["spec"].get("nodeName")

    fitting = kube_nodes(labels={"test.kubeloop.dev/pool": pool}, **big)
    node_name = _wait(
        lambda: rest.get(f"/api/v1/namespaces/{kube_namespace}/pods/p")["spec"].get("nodeName"),
        "the pod to be bound",
    )
    assert node_name == fitting["metadata"]["name"]
    cond = _scheduled_condition(rest, kube_namespace, "p")
    assert cond is not None
    assert cond["status"] == "True"
