"""The Karpenter benchmark's scale-down scenario: which pods its ReplicaSet keeps, and how
the run header and the table name what a run measured (``bench/karpenter.py``, ``bench/run.py``)."""

from __future__ import annotations

from typing import Any

from bench.karpenter import DELETION_COST, _after_scale_down, _mark_kept
from bench.run import _own_cluster_versions, machine


def _pods(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"sd-{i:03d}", "labels": {"a": "b"}}} for i in range(n)]


def test_one_pod_in_three_carries_the_deletion_cost_the_replicaset_keeps_by() -> None:
    pods = _pods(24)
    _mark_kept(pods)
    kept = [
        p["metadata"]["name"] for p in pods if DELETION_COST in p["metadata"].get("annotations", {})
    ]
    assert kept == [f"sd-{i:03d}" for i in range(0, 24, 3)]
    # A pod without the annotation has cost 0: lower, so the ReplicaSet removes it first.
    assert all(int(p["metadata"]["annotations"][DELETION_COST]) > 0 for p in pods[::3])


def test_the_table_says_how_many_kept_pods_run_after_the_scale_down() -> None:
    assert _after_scale_down({}) == "–"
    assert _after_scale_down({"nodes_after_scale_down": 3}) == "3"
    fig = {"nodes_after_scale_down": 3, "pods_running_after_scale_down": 8, "pods_kept": 8}
    assert _after_scale_down(fig) == "3 (8 of 8 pods running)"


def test_a_run_of_benchmarks_that_start_their_own_control_planes_names_their_versions() -> None:
    assert _own_cluster_versions(["packing", "scale"]) == ("none (no cluster needed)", "none")
    apiserver, etcd = _own_cluster_versions(["scale", "karpenter"])
    assert apiserver.startswith("v1.")
    assert "started by the benchmark" in apiserver
    assert etcd[:1].isdigit()
    assert "started by the benchmark" in etcd


def test_the_header_says_who_starts_the_control_plane() -> None:
    assert "each benchmark" in machine("v1", "3", None, per_benchmark=True)["control_plane"]
    assert machine("none", "none", None)["control_plane"].startswith("none")
    assert "harness" in machine("v1", "3", True)["control_plane"]
