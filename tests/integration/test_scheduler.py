"""kube-scheduler against kubelet-less Nodes: the signal the autoscaler lives on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubeloop.envtest import ControlPlane, ControlPlaneOptions, RestClient
from kubeloop.testing import NodeFactory
from tests import factories

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
    return factories.pod(
        name,
        node_selector={"test.kubeloop.dev/pool": pool},
        container_name="app",
        requests=requests,
    )


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


@pytest.fixture(scope="module")
def packing_control_plane() -> Iterator[ControlPlane]:
    """A second control plane whose kube-scheduler scores ``MostAllocated``."""
    with ControlPlane(ControlPlaneOptions(scheduler=True, scheduler_scoring="MostAllocated")) as cp:
        yield cp


@pytest.mark.parametrize(
    ("scoring", "same_node"), [("LeastAllocated", False), ("MostAllocated", True)]
)
def test_the_scoring_decides_where_the_second_pod_goes(
    request: pytest.FixtureRequest, scoring: str, same_node: bool
) -> None:
    """Two empty, equal nodes; a pod binds to one; a second, equal pod follows.

    The pods ask for the same share of CPU and memory, so NodeResourcesBalancedAllocation scores
    both nodes alike and only NodeResourcesFit's strategy separates them: LeastAllocated sends
    the second pod to the empty node, MostAllocated next to the first (what the autoscaler's
    plan assumes). The oracle is kube-scheduler's binding, read back from the apiserver.
    """
    fixture = "kube_control_plane" if scoring == "LeastAllocated" else "packing_control_plane"
    cp: ControlPlane = request.getfixturevalue(fixture)
    rest = cp.rest()
    namespace = cp.create_namespace("scoring")
    pool = uuid.uuid4().hex[:8]
    nodes = [f"scoring-{pool}-{i}" for i in range(2)]
    for name in nodes:
        cp.create_node(name, cpu="8", memory="32Gi", labels={"test.kubeloop.dev/pool": pool})
    try:
        bound: list[str] = []
        for pod in ("first", "second"):
            rest.post(
                f"/api/v1/namespaces/{namespace}/pods",
                _pod(pod, pool, {"cpu": "2", "memory": "8Gi"}),
            )
            path = f"/api/v1/namespaces/{namespace}/pods/{pod}"

            def node_name(path: str = path) -> str | None:
                name: str | None = rest.get(path)["spec"].get("nodeName")
                return name

            bound.append(_wait(node_name, f"{pod} bound"))
    finally:
        for name in nodes:
            rest.delete(f"/api/v1/nodes/{name}")
    assert set(bound) <= set(nodes)
    assert (bound[0] == bound[1]) is same_node, bound
