"""The full test bed (``kube_cluster``): kube-controller-manager and kwok on the control plane.

Each test reads the outcome from the apiserver: a kwok Node turns Ready with a Lease and
loses the not-ready taint, its pods run with pod IPs and deleted pods go; a namespace
finishes deleting; owned objects are garbage-collected; a PodDisruptionBudget gets a status.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from kubeloop.envtest import KWOK_NODE_ANNOTATIONS, ControlPlane, RestError
from tests import factories

pytestmark = pytest.mark.integration
T = TypeVar("T")


def _until(probe: Callable[[], T | None], what: str, timeout: float = 90.0) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def _gone(cp: ControlPlane, path: str) -> bool:
    try:
        cp.rest().get(path)
    except RestError as err:
        return err.status == 404
    return False


def _ready(node: dict[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def test_a_kwok_node_is_ready_leased_untainted_and_runs_its_pods(
    kube_cluster: ControlPlane,
) -> None:
    cp = kube_cluster
    rest = cp.rest()
    name = f"kwok-{uuid.uuid4().hex[:6]}"
    created = cp.create_node(name, cpu="2", memory="4Gi", kwok=True)
    assert created["metadata"]["annotations"] == dict(KWOK_NODE_ANNOTATIONS)
    try:
        taints = [t["key"] for t in created["spec"].get("taints") or []]
        assert "node.kubernetes.io/not-ready" in taints, "TaintNodesByCondition is on"

        def settled() -> dict[str, Any] | None:
            node: dict[str, Any] = rest.get(f"/api/v1/nodes/{name}")
            keys = [t["key"] for t in node["spec"].get("taints") or []]
            return node if _ready(node) and "node.kubernetes.io/not-ready" not in keys else None

        node = _until(settled, "the node to be Ready and lose the not-ready taint")
        assert node["status"]["allocatable"]["cpu"] == "2", "kwok keeps the given allocatable"
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
        lease = _until(
            lambda: rest.get(
                f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
            ),
            "the node's Lease",
        )
        assert lease["spec"]["renewTime"]  # kwok renews it (its holder is kwok's own id)
        assert lease["spec"]["leaseDurationSeconds"] == cp.options.node_lease_seconds

        ns = cp.create_namespace("bed")
        pod = factories.pod("web", node_selector={"kubernetes.io/hostname": name}, image="busybox")
        rest.post(f"/api/v1/namespaces/{ns}/pods", pod)

        def running() -> dict[str, Any] | None:
            got: dict[str, Any] = rest.get(f"/api/v1/namespaces/{ns}/pods/web")
            status = got.get("status") or {}
            return got if status.get("phase") == "Running" and status.get("podIP") else None

        got = _until(running, "the pod to run on the kwok node")
        assert got["spec"]["nodeName"] == name
        assert got["status"]["podIP"].startswith("10.244.")

        rest.delete(f"/api/v1/namespaces/{ns}/pods/web")  # graceful: kwok finishes it
        _until(lambda: _gone(cp, f"/api/v1/namespaces/{ns}/pods/web"), "the pod to be gone")
        rest.delete(f"/api/v1/namespaces/{ns}")
        _until(lambda: _gone(cp, f"/api/v1/namespaces/{ns}"), "the namespace to finish deleting")
    finally:
        rest.delete(f"/api/v1/nodes/{name}")


def test_owned_objects_are_garbage_collected(kube_cluster: ControlPlane) -> None:
    rest = kube_cluster.rest()
    ns = kube_cluster.create_namespace("gc")
    owner = rest.post(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    rest.post(
        f"/api/v1/namespaces/{ns}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "child", "ownerReferences": [ref]},
        },
    )
    rest.delete(f"/api/v1/namespaces/{ns}/configmaps/owner")
    _until(
        lambda: _gone(kube_cluster, f"/api/v1/namespaces/{ns}/configmaps/child"),
        "the owned ConfigMap to be collected",
    )


def test_a_pod_disruption_budget_gets_a_status(kube_cluster: ControlPlane) -> None:
    rest = kube_cluster.rest()
    ns = kube_cluster.create_namespace("pdb")
    rest.post(
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        },
    )

    def observed() -> dict[str, Any] | None:
        pdb: dict[str, Any] = rest.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web")
        status = pdb.get("status") or {}
        return status if status.get("observedGeneration") == pdb["metadata"]["generation"] else None

    status = _until(observed, "the disruption controller to compute the PDB's status")
    assert status["disruptionsAllowed"] == 0


def test_a_silenced_node_goes_unknown_and_tainted_then_recovers(kube_cluster: ControlPlane) -> None:
    cp = kube_cluster
    rest = cp.rest()
    name = f"silent-{uuid.uuid4().hex[:6]}"
    cp.create_node(name, kwok=True)
    try:
        _until(lambda: _ready(rest.get(f"/api/v1/nodes/{name}")), "the node to be Ready")
        _until(
            lambda: _lease(cp, name),
            "kwok to create the node's Lease",
        )
        cp.silence_node(name)  # its kubelet dies

        def unknown() -> dict[str, Any] | None:
            node: dict[str, Any] = rest.get(f"/api/v1/nodes/{name}")
            conds = {c["type"]: c for c in node["status"]["conditions"]}
            keys = {t["key"] for t in node["spec"].get("taints") or []}
            ok = conds["Ready"]["status"] == "Unknown" and "node.kubernetes.io/unreachable" in keys
            return node if ok else None

        node = _until(unknown, "the node lifecycle controller to mark it Unknown", timeout=120)
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["reason"] == "NodeStatusUnknown"

        cp.revive_node(name)
        _until(lambda: _ready(rest.get(f"/api/v1/nodes/{name}")), "the node to be Ready again")
    finally:
        rest.delete(f"/api/v1/nodes/{name}")


def _lease(cp: ControlPlane, name: str) -> bool:
    try:
        cp.rest().get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
    except RestError:
        return False
    return True
