"""The packing benchmark cannot rot: a dozen workloads through ``bench/run.py``, as a user would.

No cluster is involved (the harness starts none for ``--only packing``). Checks the JSON line,
the docs block and what holds whatever the speed: every plan was checked valid by the benchmark,
ours never uses more nodes than FFD alone nor fewer than the reference's proven optimum.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
