"""The Karpenter benchmark cannot rot: S15 at quick size, Karpenter live in both variants and ours.

Runs ``bench/run.py --quick --only karpenter --scenarios S15`` as a user would (the benchmark
starts its own test bed; Karpenter's kwok provider is built once by ``tools/karpenter/build.sh``,
about 5 minutes cold, cached under ~/.cache/kubeloop). Checks the phase table is printed and
written, and what the phases must show whatever the speed: every pod that ran has every
milestone; with the bench's boot taint Karpenter's Nodes register before their boot is done,
in the fair variant never. No speed is asserted: that is what the benchmark reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench._real_cluster import SYSTEM_NODE
from bench.phases import LABELS, PHASES

from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

# may build Karpenter: kept out of `make test` (make test-bench, which CI runs)
pytestmark = [pytest.mark.integration, pytest.mark.bench, pytest.mark.timeout(1200)]

SIDES = ("karpenter", "karpenter-nodes-after-boot", "ours")


def _by_phase(phases: dict[str, Any], key: str) -> dict[str, Any]:
    return {f"{p['from']}>{p['to']}": p[key] for p in phases["phases"]}


def test_karpenter_quick_s15_phase_table(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    progress: list[str] = []
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "karpenter",
        "--scenarios",
        "S15",
        "--param",
        f"sides={','.join(SIDES)}",
        timeout=1100,
        progress=progress,
    )
    assert result["name"] == "karpenter"
    # both sides ran on the test bed set as a real cluster (bench/_real_cluster.py)
    assert "monitor period 5 s, grace 50 s" in result["params"]["cluster"]
    assert SYSTEM_NODE in result["params"]["cluster"]
    s15 = result["figures"]["S15"]
    for side in SIDES:
        fig = s15[side]
        assert "error" not in fig, (side, fig)
        phases = fig["phases"]
        # every fitting pod ran, and each has the whole chain (all its nodes are new)
        assert phases["pods"] == s15["fitting_pods"], side
        assert set(_by_phase(phases, "n").values()) == {s15["fitting_pods"]}, (side, phases)
        assert phases["total"]["n"] == s15["fitting_pods"]
    early = {side: _by_phase(s15[side]["phases"], "out_of_order") for side in SIDES}
    # Karpenter's kwok Nodes appear at the launch, before the bench ends their boot ...
    assert early["karpenter"]["boot_done>registered"] == s15["fitting_pods"]
    # ... while in the fair variant and ours a Node appears only once its VM has booted
    assert early["karpenter-nodes-after-boot"]["boot_done>registered"] == 0
    assert early["ours"]["boot_done>registered"] == 0
    heading = f"→ {LABELS[PHASES[0][1]]}"
    printed = [line for line in progress if line.startswith("| S15 |")]
    assert [line.split("|")[2].strip() for line in printed] == list(SIDES)
    assert any(heading in line for line in progress)
    written = docs.read_text()
    assert all(f"| S15 | {side} |" in written for side in SIDES)
