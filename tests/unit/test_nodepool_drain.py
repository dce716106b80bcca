"""Which pods hold a node up in a drain."""

from __future__ import annotations

from typing import Any

from nodepool_operator.controllers._drain import DrainResult, eviction, holds_node


def _pod(phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", **meta}, "status": {"phase": phase}}


def test_workload_pods_hold_the_node_daemonset_mirror_and_finished_ones_do_not() -> None:
    assert holds_node(_pod())
    assert holds_node(_pod("Pending"))
    assert not holds_node(_pod("Succeeded"))
    assert not holds_node(_pod("Failed"))
    ds = [{"kind": "DaemonSet", "name": "d", "controller": True}]
    assert not holds_node(_pod(ownerReferences=ds))
    rs = [{"kind": "ReplicaSet", "name": "r", "controller": True}]
    assert holds_node(_pod(ownerReferences=rs))
    assert not holds_node(_pod(annotations={"kubernetes.io/config.mirror": "x"}))


def test_a_round_is_drained_only_when_nothing_was_left_or_evicted() -> None:
    assert DrainResult().drained
    assert not DrainResult(evicted=1).drained
    assert not DrainResult(blocked=1).drained
    assert not DrainResult(terminating=1).drained


def test_eviction_names_the_pod() -> None:
    body = eviction(_pod())
    assert body["kind"] == "Eviction"
    assert body["apiVersion"] == "policy/v1"
    assert body["metadata"] == {"name": "p", "namespace": "ns"}
