"""The packing benchmark's 240 seeded workloads planned with a step-only search budget, the
new-node count of each printed as one JSON object: run under two checkouts and compare, to
show a restructuring left every plan's size as it was (issue 20, item 4).

Why a step-only budget: the default budget also stops at 60 ms of wall clock, so on a loaded
machine a search can stop earlier than on a quiet one and the counts differ for reasons that
are not the code's. Bound by steps alone, the same input stops at the same step.

    PYTHONPATH=<checkout>/packages/nodepool-operator/src:<checkout>/src:<checkout> \\
        .venv/bin/python bench/packing_compare.py > counts.json

(run from the checkout; older checkouts' ``_timed_plan`` took no workload, which is allowed for.)
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

import bench.packing as bp
from nodepool_operator.scheduling import SearchBudget


def counts(workloads: int = 240, seed: int = 1) -> dict[int, int]:
    budget = replace(SearchBudget(), max_seconds=1e9)
    out: dict[int, int] = {}
    for i in range(workloads):
        w = bp.make_workload(i, seed)
        pods = [bp._pod(w, j, r) for j, r in enumerate(w.pods)]
        plan: Any
        try:
            plan, _ = bp._timed_plan(w, pods, bp._nodes(w), budget)
        except TypeError:  # before the workload's own template (issue 21)
            plan, _ = bp._timed_plan(pods, bp._nodes(w), budget)  # type: ignore[call-arg]
        out[i] = plan.new_nodes
    return out


if __name__ == "__main__":
    json.dump(counts(), sys.stdout)
    sys.stdout.write("\n")
