"""The benchmark harness cannot rot: one tiny throughput case, end to end.

Runs ``bench/run.py --quick --only throughput`` with 20 objects, one repeat and no
warm-up against the session control plane, as a user would, and checks the JSON line.
No speed is asserted: speed is measured in ``make bench``, never in tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

pytestmark = [
    pytest.mark.bench,
    pytest.mark.integration,
    pytest.mark.timeout(900),
]  # runs bench/run.py


def test_throughput_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "throughput",
        "--objects",
        "20",
        "--repeats",
        "1",
        "--warmup",
        "0",
        timeout=600,
    )
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
    # the share paired within a repeat: the raw limit's run time over kubeloop's, same pass
    limit_seconds = figures["raw"][f"c{figures['raw_limit_concurrency']}"]["seconds_each"]
    for w in workers:
        runs = figures["kubeloop"][f"w{w}"]["seconds_each"]
        expected = [round(c / k, 3) for c, k in zip(limit_seconds, runs, strict=True)]
        assert figures["of_raw_limit_per_repeat"][f"w{w}"] == pytest.approx(expected, rel=1e-2)
        assert result["ratios"][f"w{w}_of_raw_limit_paired"] == pytest.approx(expected[0], rel=1e-2)
    text = docs.read_text()
    assert "<!-- bench:throughput:begin -->" in text
    assert "| kubeloop | 16 |" in text
    assert "Of the raw limit per repeat" in text
