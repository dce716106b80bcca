"""The autoscaler benchmark cannot rot: scenario S5 at quick size, end to end.

Runs ``bench/run.py --quick --only autoscaler --scenarios S5`` against the session control
plane (which has kube-scheduler), as a user would, checks the JSON line's shape, and that the
run left no NodePool or Node of its own behind (those are cluster-scoped, shared with every
other test). No speed or outcome is asserted: that is what the benchmark reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

pytestmark = [
    pytest.mark.bench,
    pytest.mark.integration,
    pytest.mark.timeout(600),
]  # runs bench/run.py

#: The label on every object a benchmark run creates (bench/autoscaler_scenarios.py).
RUN_LABEL = "bench.kubeloop.dev/run"
SIDE_KEYS = {
    "t_decide_s",
    "t_decide_from_last_pod_s",
    "all_scheduled_s",
    "target",
    "scale_writes",
    "vm_creates",
    "live_vms",
    "api_writes",
    "autoscaler_writes",
    "cloud_calls",
    "cloud_calls_by_op",
}


def test_autoscaler_quick_s5_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "autoscaler",
        "--scenarios",
        "S5",
        # the second profile's pass, which full runs make for S1-S3, here on S5 (quick runs skip it)
        "--param",
        "other_scoring=MostAllocated",
        "--param",
        "other_scoring_scenarios=S5",
        timeout=300,
    )
    assert set(result) == {"name", "params", "figures", "ratios"}
    assert result["name"] == "autoscaler"
    assert result["params"]["scenarios"] == ["S5"]
    s5 = result["figures"]["S5"]
    assert s5["lower_bound"] == s5["ffd"] == 0
    for side in ("ours", "naive"):
        assert set(s5[side]) >= SIDE_KEYS, (side, sorted(s5[side]))
        assert s5[side]["duplicates"] == 0
    assert s5["naive"]["naive"]["ticks"] >= 1
    # S5 needs no node: our autoscaler writes nothing, and the verdict says so
    assert s5["ours"]["scale_writes"] == 0
    assert result["figures"]["targets"]["s5_zero_scale_writes"] is True
    other = result["figures"]["other_scoring"]
    assert other["scoring"] == "MostAllocated"
    assert list(other["scenarios"]) == ["S5"]
    assert set(other["scenarios"]["S5"]) == {"optimum", "ours"}  # S5 has no reserved side
    assert other["scenarios"]["S5"]["ours"]["scale_writes"] == 0
    text = docs.read_text()
    assert "<!-- bench:autoscaler:begin -->" in text
    assert "| S5: " in text
    assert "kube-scheduler scores MostAllocated:" in text
    assert "- S5 ours: 0 nodes" in text

    rest = kube_control_plane.rest()
    pools = rest.get(f"/apis/kubeloop.dev/v1alpha1/nodepools?labelSelector={RUN_LABEL}")
    assert pools["items"] == []
    nodes = rest.get(f"/api/v1/nodes?labelSelector={RUN_LABEL}")
    assert nodes["items"] == []
