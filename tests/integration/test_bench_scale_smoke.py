"""The scale benchmark cannot rot: its quick form (60 pending pods, 6 nodes) through
``bench/run.py``, as a user would. No cluster is involved. Checks the JSON line, the docs block
and what holds whatever the speed: the reconcile wrote the plan's target, never fewer new nodes
than a proven lower bound (the volume bound, or the exact reference's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.bench_support import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_scale_quick_smoke(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    command = [sys.executable, "bench/run.py", "--quick", "--only", "scale"]
    proc = subprocess.run(
        [*command, "--write", "--docs", str(docs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    [result] = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert result["name"] == "scale"
    assert (result["params"]["pods"], result["params"]["nodes"]) == (60, 6)
    figures = result["figures"]
    assert figures["lower_bound_by"] in ("volume", "reference")
    assert figures["new_nodes"] == figures["plan_new_nodes"]
    assert figures["new_nodes"] >= figures["lower_bound"] > 0
    assert figures["loop_wakeups"] > 0
    text = docs.read_text()
    assert "<!-- bench:scale:begin -->" in text
    assert f"at commit `{result['params']['commit']}`" in text
