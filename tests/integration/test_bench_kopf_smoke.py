"""The kubeloop-vs-kopf benchmark cannot rot: one tiny case, end to end.

Runs ``bench/run.py --quick --only kopf`` with 10 objects, no apiserver warm-up pass and a
2 s quiet period (``KUBELOOP_BENCH_QUIET_S``) against the session control plane, as a user
would, and checks the JSON line and the docs block. Both operators really run (kopf from
the ``bench`` dependency group). No speed is asserted: speed is measured in ``make bench``,
never in tests.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

pytestmark = [
    pytest.mark.bench,
    pytest.mark.integration,
    pytest.mark.timeout(600),
]  # runs bench/run.py

OBJECTS = 10

FIGURES = {
    "converge_s",
    "objects_per_s",
    "create_s",
    "writes_per_object",
    "event_writes_per_object",
    "requests",
    "cpu_s",
    "cpu_ms_per_object",
    "peak_rss_mib",
    "quiet_s",
    "quiet_writes_per_min",
    "change_s",
    "change_writes_per_object",
    "change_requests",
    "backlog_s",
    "backlog_writes_per_object",
}


def test_kopf_compare_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    # kopf is a bench dependency that `make setup` installs: its absence is a failure
    assert importlib.util.find_spec("kopf") is not None, "kopf missing: uv sync --group bench"
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "kopf",
        "--objects",
        str(OBJECTS),
        "--warmup",
        "0",
        "--repeats",
        "1",
        "--param",
        "repairs=2",
        timeout=420,
        env={"KUBELOOP_BENCH_QUIET_S": "2"},
    )
    assert set(result) == {"name", "params", "figures", "ratios"}
    assert result["name"] == "kopf"
    assert result["params"]["sizes"] == [OBJECTS]
    assert result["params"]["quiet_s"] == 2.0
    figures = result["figures"]
    assert result["params"]["repeats"] == 1
    for fw in ("kubeloop", "kopf", "kopf-tuned"):
        fig = figures[fw][f"n{OBJECTS}"]
        assert fig.keys() >= FIGURES, (fw, sorted(FIGURES - fig.keys()))
        for key in ("converge_s", "change_s", "backlog_s", "peak_rss_mib", "cpu_total_s"):
            assert fig[key] > 0, (fw, key, fig)
        # every object converged through the operator's own writes, counted at the apiserver
        assert fig["writes_per_object"] >= 1, (fw, fig)
        assert fig["change_writes_per_object"] >= 1, (fw, fig)
    # kubeloop's one status write per object and per change (a correctness property)
    kubeloop = figures["kubeloop"][f"n{OBJECTS}"]
    assert kubeloop["requests"] == {"PUT/status": OBJECTS}
    assert kubeloop["change_requests"] == {"PUT/status": OBJECTS}
    assert set(figures["targets"]) == {
        f"converge_speedup_{OBJECTS}",
        "writes_per_object_ratio",
        "kubeloop_quiet_writes_per_min",
    }
    for key in (
        f"converge_speedup_{OBJECTS}",
        f"change_speedup_{OBJECTS}",
        f"backlog_speedup_{OBJECTS}",
        "writes_per_object_ratio",
        "writes_per_change_ratio",
        "peak_rss_ratio",
    ):
        assert 0 < result["ratios"][key] < math.inf, (key, result["ratios"][key])
    # at 10 objects kubeloop's CPU may stay under one clock tick (0.01 s): then inf
    assert result["ratios"][f"cpu_ratio_{OBJECTS}"] > 0
    # the child-owning job: every side converged, created each child, repaired both
    # deleted ones (the behaviour itself is checked against the apiserver in
    # test_bench_kopf_children_smoke.py)
    assert result["params"]["child_sizes"] == [OBJECTS]
    assert result["params"]["repairs"] == 2
    for fw in ("kubeloop", "kopf", "kopf-tuned"):
        child = figures["children"][fw][f"n{OBJECTS}"]
        assert child["converge_s"] > 0, (fw, child)
        assert child["change_s"] > 0, (fw, child)
        assert len(child["repair_s"]) == 2, (fw, child)
        assert child["repair_s_median"] > 0, (fw, child)
        # one child created per object and one per repair, as the apiserver counted
        assert child["child_requests"].get("POST", 0) >= OBJECTS, (fw, child)
        assert child["repair_child_requests"].get("POST", 0) >= 2, (fw, child)
    kl_child = figures["children"]["kubeloop"][f"n{OBJECTS}"]
    assert kl_child["child_requests"] == {"POST": OBJECTS}
    assert kl_child["requests"] == {}  # this job writes no status
    assert kl_child["change_child_requests"] == {"PUT": OBJECTS}
    assert kl_child["repair_child_requests"] == {"POST": 2}
    # kopf-tuned keeps its diff base in status: one status PATCH per object, not two
    assert figures["children"]["kopf-tuned"][f"n{OBJECTS}"]["requests"] == {"PATCH/status": OBJECTS}
    text = docs.read_text()
    assert "<!-- bench:kopf:begin -->" in text
    assert f"| kopf | {OBJECTS} |" in text
    assert "**What limits it.**" in text
    assert "**Child-owning job**" in text
    assert f"| kopf-tuned | {OBJECTS} | **" in text
