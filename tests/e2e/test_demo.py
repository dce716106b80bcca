"""``nodepool-operator demo`` end to end, as a user runs it: a subprocess with its own cluster.

The demo starts its own control plane rather than using the session's: it creates a
cluster-scoped NodePool and Nodes that every scheduler in that cluster would use, and pods
that other tests' nodes would attract.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: The demo's own --timeout; the subprocess also gets time to start and stop its cluster.
DEMO_TIMEOUT = 180
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# the module fixture runs the demo in the first test: its subprocess bound and then some
pytestmark = [pytest.mark.integration, pytest.mark.timeout(DEMO_TIMEOUT + 420)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One headless run with --json and --report; its figures and the report dir."""
    report = tmp_path_factory.mktemp("demo-report")
    argv = [sys.executable, "-m", "nodepool_operator", "demo", "--headless", "--json"]
    argv += ["--boot-seconds", "1", "--timeout", str(DEMO_TIMEOUT), "--report", str(report)]
    # The bin-packing scoring here; the AWS demo test runs the default (LeastAllocated).
    argv += ["--scheduler-scoring", "MostAllocated"]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=DEMO_TIMEOUT + 180, check=False
    )
    context = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, context
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, context  # --json: one line on stdout, nothing else
    figures: dict[str, Any] = json.loads(lines[0])
    return figures, report


def test_every_fitting_pod_is_scheduled_on_the_fewest_nodes(
    demo: tuple[dict[str, Any], Path],
) -> None:
    figures, _ = demo
    assert set(figures) == {
        "pods",
        "pods_fitting",
        "pods_scheduled",
        "pods_not_triggering",
        "nodes",
        "nodes_lower_bound",
        "vms",
        "duplicate_vms",
        "leaked_vms",
        "api_writes",
        "conflicts",
        "seconds",
        "pods_running",
        "nodes_drained",
        "evictions",
        "pdb_blocked_s",
        "evictions_refused",
    }
    assert (figures["pods"], figures["pods_fitting"]) == (17, 13)
    assert figures["pods_scheduled"] == figures["pods_fitting"]
    assert figures["pods_running"] == figures["pods_fitting"], "kwok runs every bound pod"
    # The default burst packs on 3 nodes whatever order the scheduler binds it in, so a
    # fourth node would be a scale-up for a pod that must not trigger one.
    assert figures["nodes"] == figures["nodes_lower_bound"] == 3
    assert figures["vms"] == figures["nodes"]
    assert figures["seconds"] < DEMO_TIMEOUT


def test_the_second_act_drains_and_shrinks_the_pool(demo: tuple[dict[str, Any], Path]) -> None:
    figures, report = demo
    assert figures["nodes_drained"] >= 1
    # The drained node still held the Deployment's pods: evicted, not deleted with the node.
    assert figures["evictions"] >= 2
    # The PodDisruptionBudget held the drain: the API server refused an eviction (429), seen
    # in the drain's Events, and the budget allowed no disruption while the node drained.
    assert figures["evictions_refused"] >= 1
    assert figures["pdb_blocked_s"] > 0
    # The report's timeline marks the act, and the pool's shrinking comes after the mark.
    rows = [x for x in (report / "summary.md").read_text().splitlines() if x.startswith("| ")]
    (act,) = (i for i, row in enumerate(rows) if "| second act: " in row)
    after = rows[act + 1 :]
    assert any("targetNodes 3 -> 2" in row for row in after), rows
    assert any("ready nodes 3 -> 2" in row for row in after), rows


def test_the_summary_reports_the_budget_and_the_blockers(
    demo: tuple[dict[str, Any], Path],
) -> None:
    figures, report = demo
    summary = (report / "summary.md").read_text()
    section = summary.split("## Scale-down: budgets and blockers", 1)[1].split("## ", 1)[0]
    assert "PodDisruptionBudget prod/demo-web (minAvailable 2)" in section
    assert f"{figures['evictions']} eviction(s), " in section
    assert f"{figures['evictions_refused']} refused (429)" in section
    # The pool's own budget (the API's default: the demo's pool sets none) and how much of
    # it the operator reported in use, read from the pool's status.
    assert "pool disruption budgets (nodes at once): 10% (default)" in section
    assert re.search(
        r"pool status\.disruption at the end: \d+ disrupting, \d+ more allowed", section
    )
    # The other nodes hold bare pods: the Autoscaler reports them kept by NotReplicated.
    kept = [x for x in section.splitlines() if ": NotReplicated (pod " in x]
    assert len(kept) >= 1, section
    assert "pool drain settings: drainTimeout" in section


def test_pods_that_must_not_trigger_did_not(demo: tuple[dict[str, Any], Path]) -> None:
    figures, _ = demo
    # Too big, unwatched namespace, nodeSelector gpu=true, missing Secret.
    assert figures["pods_not_triggering"] == 4


def test_no_duplicate_or_leaked_vms(demo: tuple[dict[str, Any], Path]) -> None:
    figures, _ = demo
    assert figures["duplicate_vms"] == 0
    assert figures["leaked_vms"] == 0
    assert figures["api_writes"] > 0


def test_report_has_a_summary_and_a_chart(demo: tuple[dict[str, Any], Path]) -> None:
    figures, report = demo
    summary = (report / "summary.md").read_text()
    assert summary.startswith("# NodePool + Autoscaler demo")
    assert f"| `pods_scheduled` | {figures['pods_scheduled']} |" in summary
    assert "targetNodes 0 -> " in summary
    assert "`NodeResourcesFit` `MostAllocated`" in summary
    assert (report / "chart.png").read_bytes().startswith(PNG_SIGNATURE)
    assert (report / "operator.log").stat().st_size > 0


def test_summary_and_cloud_json_agree_on_the_cloud_calls(
    demo: tuple[dict[str, Any], Path],
) -> None:
    figures, report = demo
    calls = json.loads((report / "cloud.json").read_text())["calls"]
    # the second act terminated the drained node's VM: a delete call, counted in both
    assert calls.get("delete", 0) >= figures["nodes_drained"] >= 1
    listed = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
    (line,) = (x for x in (report / "summary.md").read_text().splitlines() if "Cloud calls" in x)
    assert line.endswith(f": {listed}.")
