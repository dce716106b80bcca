"""The demo's second act, on what its watches hold."""

from __future__ import annotations

from typing import Any

from nodepool_operator.demo import _scaledown as act
from nodepool_operator.demo._workload import DEMO_LABEL, Role


def _node(name: str, *, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": cordoned}}


def _pod(name: str, node: str, ns: str = "prod", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "labels": {DEMO_LABEL: str(Role.FITS)}},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "podIP": "10.244.0.1" if phase == "Running" else None},
    }


def test_the_victim_is_the_node_with_the_fewest_demo_pods() -> None:
    nodes = [_node("a"), _node("b"), _node("c")]
    pods = [_pod("p1", "a"), _pod("p2", "a"), _pod("p3", "b"), _pod("p4", "c"), _pod("p5", "c")]
    assert act.victim_node(nodes, pods) == "b"
    assert act.pods_on("b", pods) == [("prod", "p3")]
    assert act.victim_node([], pods) is None


def test_running_counts_fitting_pods_with_an_ip() -> None:
    assert act.running([_pod("a", "n"), _pod("b", "n", phase="Pending")]) == 1


def test_a_drain_is_pdb_blocked_while_a_covered_pod_stays_on_a_cordoned_node() -> None:
    pods = [_pod("a", "n1")]
    assert act.pdb_blocked([_node("n1", cordoned=True)], pods)
    assert not act.pdb_blocked([_node("n1")], pods)
    assert not act.pdb_blocked([_node("n1", cordoned=True)], [_pod("a", "n1", ns="other")])


def test_evictions_are_read_from_the_write_counters() -> None:
    writes = {"nodepool create pods/eviction": 3, "nodepool patch nodes": 5}
    assert act.evictions(writes) == 3
