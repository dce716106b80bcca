"""Autoscaler: which events wake which Autoscalers."""

from __future__ import annotations

from typing import Any

from kubeloop import Added, Deleted, Request, Store, Updated
from nodepool_operator.controllers._indexes import NODE_POOL, node_pool
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.autoscaler._watch import (
    BY_NAMESPACE,
    BY_POOL,
    Routes,
    autoscaler_namespaces,
    autoscaler_pool,
    node_changed,
    pod_moved,
)


def autoscaler(name: str, pool: str, *namespaces: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodePoolRef": {"name": pool}, "namespaces": list(namespaces)},
    }


def pod(name: str, ns: str = "prod", node: str = "", phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def node(
    name: str, pool: str | None = "big", ready: str = "True", beat: str = "t0"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {POOL_LABEL: pool} if pool else {}},
        "spec": {},
        "status": {
            "allocatable": {"memory": "96Gi"},
            "conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": beat}],
        },
    }


def routes() -> Routes:
    scalers = Store()
    scalers.add_index(BY_NAMESPACE, autoscaler_namespaces)
    scalers.add_index(BY_POOL, autoscaler_pool)
    scalers.put(autoscaler("a", "big", "prod", "dev"))
    scalers.put(autoscaler("b", "big", "dev"))
    scalers.put(autoscaler("c", "small", "prod"))
    scalers.put({"metadata": {"name": "broken"}, "spec": {"namespaces": "prod"}})
    nodes = Store()
    nodes.add_index(NODE_POOL, node_pool)
    nodes.put(node("n1", "big"))
    nodes.put(node("other", None))
    return Routes(scalers, nodes)


def test_pods_route_to_autoscalers_watching_their_namespace() -> None:
    r = routes()
    assert r.for_pod(pod("p", "prod")) == [Request("a"), Request("c")]
    assert r.for_pod(pod("p", "dev")) == [Request("a"), Request("b")]
    assert r.for_pod(pod("p", "elsewhere")) == []


def test_bound_pods_also_route_to_autoscalers_of_their_nodes_pool() -> None:
    r = routes()
    assert r.for_pod(pod("p", "elsewhere", node="n1")) == [Request("a"), Request("b")]
    assert r.for_pod(pod("p", "elsewhere", node="other")) == []
    assert r.for_pod(pod("p", "elsewhere", node="unknown")) == []


def test_nodes_and_pools_route_to_the_autoscalers_of_the_pool() -> None:
    r = routes()
    assert r.for_node(node("n2", "big")) == [Request("a"), Request("b")]
    assert r.for_node(node("n3", None)) == []
    assert r.for_pool({"metadata": {"name": "small"}}) == [Request("c")]


def test_pod_predicate_passes_waiting_pods_and_pods_leaving_nodes_only() -> None:
    assert pod_moved(Added(pod("p")))
    assert not pod_moved(Added(pod("p", node="n1", phase="Running")))
    # binding
    assert pod_moved(Updated(pod("p"), pod("p", node="n1")))
    # status churn of a bound pod
    assert not pod_moved(
        Updated(pod("p", node="n1", phase="Running"), pod("p", node="n1", phase="Running"))
    )
    # finishing frees room
    assert pod_moved(
        Updated(pod("p", node="n1", phase="Running"), pod("p", node="n1", phase="Succeeded"))
    )
    terminating = pod("p", node="n1", phase="Running")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert pod_moved(Updated(pod("p", node="n1", phase="Running"), terminating))
    assert pod_moved(Deleted(pod("p", node="n1", phase="Running")))


def test_node_predicate_ignores_heartbeats_and_other_nodes() -> None:
    assert node_changed(Added(node("n1")))
    assert not node_changed(Added(node("n1", None)))
    assert not node_changed(Updated(node("n1", beat="t0"), node("n1", beat="t1")))
    assert node_changed(Updated(node("n1", ready="False"), node("n1", ready="True")))
    assert not node_changed(Updated(node("x", None, ready="False"), node("x", None, ready="True")))
    # leaving the pool counts
    assert node_changed(Updated(node("n1", "big"), node("n1", None)))
