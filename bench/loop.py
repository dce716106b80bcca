"""Loop: the drift example with and without the predicate: reconciles and writes per minute.

The seed example ``examples/seeds/drift.py`` writes ``status.lastCheckedAt`` on every
reconcile and asks to be requeued after ``requeue_after`` seconds. Without a predicate each
of its own status writes is an update event that triggers the next reconcile at once (the
loop trap); with ``generation_changed`` the object is checked every ``requeue_after`` seconds
plus once per spec change. Each mode runs that example's own ``run()`` (imported from
``examples/seeds``) in its own process (this module's ``__main__``), so its CPU time is its
own.

By hand::

    python -m bench.loop --kubeconfig K --predicate none --seconds 15
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import sys
import time
from types import ModuleType
from typing import Any

from bench import (
    ROOT,
    Benchmark,
    BenchResult,
    Context,
    peak_rss_mib,
    process_cpu_seconds,
    rounded,
    run_child,
)

SEEDS = ROOT / "examples" / "seeds"
FULL: dict[str, Any] = {"seconds": 60.0, "requeue_after": 2.0, "spec_changes": 1}
QUICK: dict[str, Any] = {"seconds": 15.0, "requeue_after": 2.0, "spec_changes": 1}
MODES = ("generation", "none")


def drift_example() -> ModuleType:
    """``examples/seeds/drift.py``, imported under a private name (it imports its
    ``_cluster`` helper as a top-level module, so the seeds directory goes on sys.path)."""
    if str(SEEDS) not in sys.path:
        sys.path.insert(0, str(SEEDS))
    name = "kubeloop_seed_drift"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SEEDS / "drift.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {SEEDS / 'drift.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- one mode (child process) ------------------------------------------------------------


async def measure(
    kubeconfig: str, predicate: str, seconds: float, requeue_after: float, spec_changes: int
) -> dict[str, Any]:
    drift = drift_example()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    out: dict[str, Any] = await drift.run(
        kubeconfig, predicate, seconds, requeue_after, spec_changes
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        **out,
        "predicate": predicate,
        "seconds": seconds,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mib": peak_rss_mib(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--predicate", choices=MODES, default="none")
    parser.add_argument("--seconds", type=float, default=FULL["seconds"])
    parser.add_argument("--requeue-after", type=float, default=FULL["requeue_after"])
    parser.add_argument("--spec-changes", type=int, default=FULL["spec_changes"])
    args = parser.parse_args()
    result = asyncio.run(
        measure(
            args.kubeconfig, args.predicate, args.seconds, args.requeue_after, args.spec_changes
        )
    )
    print(json.dumps(result), flush=True)


# -- the benchmark (parent side) --------------------------------------------------------


async def _mode(
    ctx: Context, predicate: str, seconds: float, requeue_after: float, spec_changes: int
) -> dict[str, Any]:
    args = [
        "--kubeconfig",
        str(ctx.kubeconfig),
        "--predicate",
        predicate,
        "--seconds",
        str(seconds),
        "--requeue-after",
        str(requeue_after),
        "--spec-changes",
        str(spec_changes),
    ]
    server_before = process_cpu_seconds(ctx.server_pids)
    child = await asyncio.to_thread(run_child, "bench.loop", args, seconds + 120)
    server_cpu = process_cpu_seconds(ctx.server_pids) - server_before
    out = child.output
    per_min = 60.0 / seconds
    fig: dict[str, Any] = {
        "reconciles": out["reconciles"],
        "status_writes": out["status_writes"],
        "reconciles_per_min": rounded(out["reconciles"] * per_min),
        "status_writes_per_min": rounded(out["status_writes"] * per_min),
        "loop_detected": bool(out["loop_detected"]),
        "cpu_s": rounded(out["cpu_s"]),
        "cpu_s_per_min": rounded(out["cpu_s"] * per_min),
        "wall_s": rounded(out["wall_s"]),
        "peak_rss_mib": rounded(out["peak_rss_mib"]),
    }
    if ctx.server_pids:
        fig["server_cpu_s"] = rounded(server_cpu)
        fig["server_cpu_s_per_min"] = rounded(server_cpu * per_min)
    ctx.log(
        f"loop predicate={predicate}: {fig['reconciles_per_min']:.0f} reconciles/min, "
        f"{fig['status_writes_per_min']:.0f} writes/min, loop_detected={fig['loop_detected']}"
    )
    return fig


async def run(ctx: Context) -> BenchResult:
    seconds = float(ctx.param("seconds", FULL["seconds"], QUICK["seconds"]))
    requeue_after = float(ctx.param("requeue_after", FULL["requeue_after"], QUICK["requeue_after"]))
    spec_changes = int(ctx.param("spec_changes", FULL["spec_changes"], QUICK["spec_changes"]))
    modes = {m: await _mode(ctx, m, seconds, requeue_after, spec_changes) for m in MODES}
    with_pred, without = modes["generation"], modes["none"]
    # with the predicate: the first reconcile, one per requeue_after, one per spec change
    expected = 1 + int(seconds // requeue_after) + spec_changes
    ratios: dict[str, float] = {
        "reconciles_without_over_with": rounded(
            without["reconciles"] / max(1, with_pred["reconciles"]), 4
        ),
        "writes_without_over_with": rounded(
            without["status_writes"] / max(1, with_pred["status_writes"]), 4
        ),
        "with_predicate_reconciles_over_expected": rounded(with_pred["reconciles"] / expected, 4),
    }
    if with_pred["cpu_s"] > 0:
        ratios["cpu_without_over_with"] = rounded(without["cpu_s"] / with_pred["cpu_s"], 4)
    return {
        "name": "loop",
        "params": {
            "seconds_per_mode": seconds,
            "requeue_after_s": requeue_after,
            "spec_changes": spec_changes,
            "objects": 1,
            "workers": 1,
            "example": "examples/seeds/drift.py run()",
        },
        "figures": {
            "without_predicate": without,
            "with_generation_changed": with_pred,
            "expected_reconciles_with_predicate": expected,
        },
        "ratios": ratios,
    }


def markdown(result: BenchResult) -> str:
    p, f, r = result["params"], result["figures"], result["ratios"]
    has_server = "server_cpu_s_per_min" in f["without_predicate"]
    rows = [
        "| predicate | reconciles / min | status writes / min | loop detected "
        "| operator CPU s / min | apiserver+etcd CPU s / min | peak RSS MiB |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    modes = (("none", "without_predicate"), ("generation_changed", "with_generation_changed"))
    for label, key in modes:
        fig = f[key]
        server = fig["server_cpu_s_per_min"] if has_server else "n/a"
        rows.append(
            f"| {label} | **{fig['reconciles_per_min']:.0f}** | {fig['status_writes_per_min']:.0f} "
            f"| {'yes' if fig['loop_detected'] else 'no'} | {fig['cpu_s_per_min']} | {server} "
            f"| {fig['peak_rss_mib']:.0f} |"
        )
    return "\n".join(
        [
            f"{p['seconds_per_mode']:.0f} s per mode, one object, `requeue_after` = "
            f"{p['requeue_after_s']} s, {p['spec_changes']} spec change(s) during the run.",
            "",
            *rows,
            "",
            f"Without the predicate: {r['reconciles_without_over_with']:.0f}x the reconciles "
            f"and {r['writes_without_over_with']:.0f}x the status writes. With it: "
            f"{f['with_generation_changed']['reconciles']} reconciles against the "
            f"{f['expected_reconciles_with_predicate']} expected (first + one per "
            "`requeue_after` + one per spec change).",
        ]
    )


BENCHMARK = Benchmark(
    name="loop",
    title="loop: the drift example with and without the predicate",
    description=(
        "The seed example `examples/seeds/drift.py` (its own `run()`, imported from "
        "`examples/seeds`) reconciles one `Pool` object, writing `status.lastCheckedAt` (a "
        "fresh timestamp) every time and returning `requeue_after`. Each mode runs for a "
        "fixed time in its own process (`python -m bench.loop`): without a predicate every "
        "own status write is an update event that triggers the next reconcile at once (the "
        "loop trap); with `generation_changed` status writes trigger nothing. Rates are per "
        "minute of the mode's run time (`--seconds`; CRD install, namespace and sync add a "
        "little wall time around it). Loop detected is the runtime's loop detector "
        "(`controller.loops_detected > 0`). Operator CPU is user+system time of the child "
        "during `run()`; apiserver+etcd CPU is read from `/proc` when the harness started "
        "the control plane."
    ),
    run=run,
    markdown=markdown,
)


if __name__ == "__main__":
    main()
