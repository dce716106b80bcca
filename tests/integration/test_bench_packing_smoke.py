"""The packing benchmark cannot rot: a dozen workloads through ``bench/run.py``, as a user would.

No cluster is involved (the harness starts none for ``--only packing``). Checks the JSON line,
the docs block and what holds whatever the speed: every plan was checked valid by the benchmark,
ours never uses more nodes than FFD alone nor fewer than the reference's proven optimum. The
same holds on the real AL2023 nodes (m5.xlarge, r5.2xlarge), planned on the allocatable the
product computes for them, which the block prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.packing import REAL_TYPES, describe_allocatable, real_template

from tests.integration.bench_support import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_packing_quick_smoke(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--quick",
            "--only",
            "packing",
            "--param",
            "workloads=12",
            "--param",
            "reference_limit_s=5.0",
            "--param",
            "real_workloads=2",
            "--write",
            "--docs",
            str(docs),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    result = lines[0]
    assert result["name"] == "packing"
    figures = result["figures"]
    assert figures["workloads"] == 12
    assert figures["workloads_proven"] + len(figures["unproven"]) == 12
    assert figures["nodes_ours"] <= figures["nodes_ffd"]
    assert figures["nodes_ours"] >= figures["nodes_optimum"]
    assert result["params"]["commit"]
    text = docs.read_text()
    assert "<!-- bench:packing:begin -->" in text
    assert f"at commit `{result['params']['commit']}`" in text

    real = figures["real_nodes"]
    assert list(real) == list(REAL_TYPES)
    for name, node in real.items():
        # planned on the product's template of an AL2023 node of the type, not the synthetic one
        allocatable = describe_allocatable(real_template(name))
        assert node["allocatable"] == allocatable
        assert node["workloads"] == 2
        # workloads 0 and 1 of seed 1 (28 and 7 pods): small enough to be proven, and within
        # the planner's target of the optimum on every workload of up to 40 pods
        assert node["workloads_proven"] == 2, node["unproven"]
        assert node["nodes_optimum"] <= node["nodes_ours"] <= node["nodes_ffd"]
        assert node["ours_above_optimum"] == 0, node["ours_above"]
        assert node["nodes_ours"] == node["nodes_optimum"]
        row = (
            f"| {name} | {allocatable['cpu']} / {allocatable['memory']} / "
            f"{allocatable['ephemeral-storage']} / {allocatable['pods']} | 2 (2) |"
        )
        assert row in text
    # m5.xlarge as EKS sizes it: 4 vCPUs less 80m kube-reserved, ENI max pods 4 * (15 - 1) + 2
    assert real["m5.xlarge"]["allocatable"]["cpu"] == "3920m"
    assert real["m5.xlarge"]["allocatable"]["pods"] == 58
