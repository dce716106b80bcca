"""The Karpenter benchmark's phase tables (``bench/karpenter.py``): which figures each shows."""

from __future__ import annotations

from bench.karpenter import phase_table
from bench.phases import MILESTONES, last_to_run, phase_medians


def _chain(start: float, gap: float) -> dict[str, float]:
    return {m: start + i * gap for i, m in enumerate(MILESTONES)}


def test_the_last_pods_table_has_one_pod_per_row_and_skips_results_without_it() -> None:
    timelines = {"a": _chain(0.0, 1.0), "b": _chain(12.0, 2.0)}
    figures = {
        "S3": {
            "ours": {
                "phases": phase_medians(timelines.values()),
                "last_pod_phases": last_to_run(timelines),
            },
            "karpenter": {"phases": phase_medians(timelines.values())},  # an older result
        }
    }
    medians = phase_table(figures, ["S3"], ["ours", "karpenter"]).splitlines()[2:]
    last = phase_table(figures, ["S3"], ["ours", "karpenter"], "last_pod_phases").splitlines()[2:]
    assert [row.split("|")[2].strip() for row in medians] == ["ours", "karpenter"]
    assert len(last) == 1
    cells = [c.strip() for c in last[0].strip("|").split("|")]
    assert cells[:3] == ["S3", "ours", "2.00"]  # pod b's own gaps, not the medians (1.50)
    assert cells[-1] == "1"
