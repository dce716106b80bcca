"""The workers benchmark cannot rot: one tiny case, end to end.

Runs ``bench/run.py --quick --only workers`` with 4 objects and one repeat against the
session control plane, as a user would, and checks the JSON line and the docs block.
No speed is asserted: speed is measured in ``make bench``, never in tests.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench.workers import TARGET_RATIO

from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_workers_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "workers",
        "--objects",
        "4",
        "--repeats",
        "1",
        timeout=120,
    )
    assert set(result) == {"name", "params", "figures", "ratios"}
    assert result["name"] == "workers"
    params = result["params"]
    assert params["objects"] == 4
    assert params["repeats"] == 1
    workers = params["workers"]
    assert workers == [1, 2, 5, 10]
    figures, ratios = result["figures"], result["ratios"]
    for w in workers:
        fig = figures[f"w{w}"]
        for key in ("makespan_s", "ideal_s", "from_start_s", "peak_rss_mib"):
            assert fig[key] > 0, (w, key, fig)
        # what the runtime promises, whatever the speed: one reconcile per object, never
        # two at once for one object, and never more in flight than W
        assert fig["reconciles_per_object"] == 1.0
        assert fig["same_object_overlap"] == 0
        assert 1 <= fig["max_overlap"] <= min(w, 4)
        # the ideal is a lower bound of the makespan; infinity would mean no ideal at all
        assert 0.999 <= ratios[f"w{w}_makespan_over_ideal"] < math.inf, (w, ratios)
    worst = max(ratios[f"w{w}_makespan_over_ideal"] for w in workers)
    assert ratios["worst_makespan_over_ideal"] == worst
    # the verdict follows from the figures (its value depends on the machine, not the code)
    assert figures["within_target"] is (worst <= TARGET_RATIO)
    text = docs.read_text()
    assert "<!-- bench:workers:begin -->" in text
    assert "| 10 |" in text
