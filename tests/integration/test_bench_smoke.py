"""The benchmark harness cannot rot: one tiny throughput case, end to end.

Runs ``bench/run.py --quick --only throughput`` with 20 objects, one repeat and no
warm-up against the session control plane, as a user would, and checks the JSON line.
No speed is asserted: speed is measured in ``make bench``, never in tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--quick",
            "--only",
            "throughput",
            "--objects",
            "20",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--kubeconfig",
            str(kube_control_plane.kubeconfig),
            "--write",
            "--docs",
            str(docs),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    result = lines[0]
    assert set(result) == {"name", "params", "figures", "ratios"}
    assert result["name"] == "throughput"
    assert result["params"]["objects"] == 20
    workers = result["params"]["workers"]
    assert workers == [1, 4, 16]
    figures = result["figures"]
    for w in workers:
        fig = figures["kubeloop"][f"w{w}"]
        for key in ("seconds", "objects_per_s", "cpu_s", "peak_rss_mib"):
            assert fig[key] > 0, (w, key, fig)
        # one status write per object, and nothing the runtime had to retry or re-read
        assert fig["status_writes_per_object"] == 1.0
        assert fig["reconciles_per_object"] == 1.0
        assert fig["conflicts"] == 0
        assert f"w{w}_of_raw_limit" in result["ratios"]
    assert set(figures["raw"]) == {"c1", "c4", "c16", "c64"}
    assert figures["raw_limit_objects_per_s"] > 0
    text = docs.read_text()
    assert "<!-- bench:throughput:begin -->" in text
    assert "| kubeloop | 16 |" in text
