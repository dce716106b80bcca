"""The Karpenter benchmark's repeated runs: which scenarios get several runs per side, and
how a side's runs become one row (the median run, every run's time beside it)."""

from __future__ import annotations

from pathlib import Path

from bench import Context
from bench.karpenter import REPEATS, _each, median_run, repeats


def _fig(running: float, nodes: int = 15) -> dict[str, object]:
    return {
        "all_fitting_scheduled_s": running,
        "all_fitting_running_s": running,
        "nodes_created": nodes,
    }


def test_the_close_scenarios_of_the_full_set_get_several_runs() -> None:
    full = Context(kubeconfig=Path(), quick=False)
    assert [repeats(full, s) for s in ("S1", "S2", "S6", "SD")] == [REPEATS, 1, REPEATS, REPEATS]
    assert repeats(Context(kubeconfig=Path(), quick=True), "SD") == 1
    given = Context(kubeconfig=Path(), quick=True, overrides={"repeats": "2"})
    assert repeats(given, "S2") == 2


def test_a_side_is_its_median_run_with_every_runs_time() -> None:
    row = median_run([_fig(28.5, 16), _fig(27.2, 15), _fig(27.9, 14)])
    assert (row["all_fitting_running_s"], row["nodes_created"]) == (27.9, 14)
    assert row["all_fitting_running_each_s"] == [28.5, 27.2, 27.9]
    assert _each(row, "all_fitting_running_s") == "27.9 (27.2–28.5, 3 runs)"


def test_a_failed_run_is_left_out_and_counted() -> None:
    row = median_run([_fig(27.0), {"error": "boom"}, _fig(29.0)])
    assert row["all_fitting_running_s"] == 27.0  # the lower of two
    assert (row["runs"], row["runs_failed"]) == (3, 1)
    assert median_run([{"error": "boom"}]) == {"error": "boom"}
    one = median_run([_fig(27.0)])
    assert "runs" not in one
    assert _each(one, "all_fitting_running_s") == "27.0"
