"""Workers: N objects, each reconcile waiting T, with W workers: makespan vs ceil(N/W) x T.

The parent side (:func:`run`, called by ``bench/run.py``) creates a fresh namespace of N
``Sample`` objects per configuration (not measured) and runs the operator in its own
process (this module's ``__main__``): a Manager with one controller ``for_`` the kind in that
namespace with ``max_concurrent_reconciles=W``, whose reconciler only awaits
``asyncio.sleep(T)`` (the slow part of a real reconcile: a cloud call). Every object needs
exactly one reconcile, so with W workers the best possible makespan is ``ceil(N/W) x T``.

By hand (without ``--namespace`` it installs the CRD and creates the objects itself)::

    python -m bench.workers --kubeconfig K --objects 20 --delay 0.5 --workers 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from typing import Any

from bench import Benchmark, BenchResult, Context, median, peak_rss_mib, rounded, run_child
from bench.throughput import SAMPLES, delete_all, install_crd, populate
from kubeloop import (
    Client,
    ControllerOptions,
    Manager,
    ManagerOptions,
    Registry,
    Request,
    Result,
)

FULL: dict[str, Any] = {"objects": 20, "delay": 0.5, "workers": [1, 2, 5, 10], "repeats": 3}
QUICK: dict[str, Any] = {"objects": 10, "delay": 0.2, "workers": [1, 2, 5, 10], "repeats": 1}
#: The issue's target: makespan within 10% of the ideal.
TARGET_RATIO = 1.10


# -- the operator (child process) -------------------------------------------------------


async def operate(
    kubeconfig: str, namespace: str | None, objects: int, delay: float, workers: int
) -> dict[str, Any]:
    """Reconcile every Sample in ``namespace`` once, each reconcile sleeping ``delay``."""
    client = Client.from_kubeconfig(kubeconfig)
    if namespace is None:
        await install_crd(client)
        namespace = await populate(client, "bench-workers", objects)
    mgr = Manager(
        client,
        ManagerOptions(
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=False,
            registry=Registry(),
        ),
    )
    starts: list[float] = []
    ends: list[float] = []
    done: set[str] = set()
    active = 0
    max_overlap = 0
    same_object_overlap = 0
    running: set[str] = set()
    all_done = asyncio.Event()

    async def reconcile(req: Request) -> Result:
        nonlocal active, max_overlap, same_object_overlap
        starts.append(time.perf_counter())
        if req.name in running:  # the runtime promises this never happens
            same_object_overlap += 1
        running.add(req.name)
        active += 1
        max_overlap = max(max_overlap, active)
        try:
            await asyncio.sleep(delay)
        finally:
            active -= 1
            running.discard(req.name)
        ends.append(time.perf_counter())
        done.add(req.name)
        if len(done) >= objects:
            all_done.set()
        return Result()

    mgr.controller("bench-workers").for_(SAMPLES, namespace=namespace).with_options(
        ControllerOptions(max_concurrent_reconciles=workers)
    ).complete(reconcile)

    start = time.perf_counter()
    runner = asyncio.create_task(mgr.run())
    waiter = asyncio.create_task(all_done.wait())
    timeout = objects * delay + 60
    await asyncio.wait({runner, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    mgr.stop()
    await runner  # raises if the manager failed
    await client.close()
    if len(done) < objects:
        raise RuntimeError(f"only {len(done)} of {objects} objects reconciled in {timeout:.0f}s")
    ideal = math.ceil(objects / workers) * delay
    makespan = max(ends) - min(starts)
    return {
        "objects": objects,
        "workers": workers,
        "delay_s": delay,
        "makespan_s": makespan,
        "ideal_s": ideal,
        "from_start_s": max(ends) - start,
        "first_reconcile_s": min(starts) - start,
        "reconciles": len(starts),
        "max_overlap": max_overlap,
        "same_object_overlap": same_object_overlap,
        "peak_rss_mib": peak_rss_mib(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", help="Samples to reconcile (default: create them)")
    parser.add_argument("--objects", type=int, default=FULL["objects"])
    parser.add_argument("--delay", type=float, default=FULL["delay"])
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(
        operate(args.kubeconfig, args.namespace, args.objects, args.delay, args.workers)
    )
    print(json.dumps(result), flush=True)


# -- the benchmark (parent side) --------------------------------------------------------


async def _one(
    ctx: Context, client: Client, objects: int, delay: float, workers: int
) -> dict[str, Any]:
    namespace = await populate(client, f"bench-workers-w{workers}", objects)
    args = [
        "--kubeconfig",
        str(ctx.kubeconfig),
        "--namespace",
        namespace,
        "--objects",
        str(objects),
        "--delay",
        str(delay),
        "--workers",
        str(workers),
    ]
    child = await asyncio.to_thread(run_child, "bench.workers", args, objects * delay + 120)
    await delete_all(str(ctx.kubeconfig), namespace)
    out = child.output
    ctx.log(
        f"workers W={workers}: makespan {out['makespan_s']:.3f} s, ideal {out['ideal_s']:.3f} s "
        f"(x{out['makespan_s'] / out['ideal_s']:.3f}), max overlap {out['max_overlap']}"
    )
    return out


async def run(ctx: Context) -> BenchResult:
    objects = int(ctx.param("objects", FULL["objects"], QUICK["objects"]))
    delay = float(ctx.param("delay", FULL["delay"], QUICK["delay"]))
    levels = [int(w) for w in ctx.param("workers", FULL["workers"], QUICK["workers"])]
    repeats = int(ctx.param("repeats", FULL["repeats"], QUICK["repeats"]))
    runs: dict[int, list[dict[str, Any]]] = {w: [] for w in levels}
    async with Client.from_kubeconfig(ctx.kubeconfig) as client:
        await install_crd(client)
        for rep in range(repeats):
            ctx.log(f"workers: repeat {rep + 1} of {repeats}, N={objects}, T={delay} s")
            for w in levels:
                runs[w].append(await _one(ctx, client, objects, delay, w))

    figures: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    for w in levels:
        rs = runs[w]
        reconciles = sum(r["reconciles"] for r in rs)
        ideal = math.ceil(objects / w) * delay
        makespan = median([r["makespan_s"] for r in rs])
        figures[f"w{w}"] = {
            "makespan_s": rounded(makespan),
            "ideal_s": rounded(ideal),
            "makespan_each_s": [rounded(r["makespan_s"]) for r in rs],
            "from_start_s": rounded(median([r["from_start_s"] for r in rs])),
            "first_reconcile_s": rounded(median([r["first_reconcile_s"] for r in rs])),
            "max_overlap": max(r["max_overlap"] for r in rs),
            "expected_overlap": min(w, objects),
            "reconciles_per_object": rounded(reconciles / (objects * len(rs))),
            "same_object_overlap": sum(r["same_object_overlap"] for r in rs),
            "peak_rss_mib": rounded(max(r["peak_rss_mib"] for r in rs)),
        }
        ratios[f"w{w}_makespan_over_ideal"] = rounded(makespan / ideal, 4)
    worst = max(ratios.values())
    ratios["worst_makespan_over_ideal"] = worst
    figures["within_target"] = worst <= TARGET_RATIO
    return {
        "name": "workers",
        "params": {
            "objects": objects,
            "delay_s": delay,
            "workers": levels,
            "repeats": repeats,
            "target_ratio": TARGET_RATIO,
            "measured": "first reconcile start to last reconcile end (median of repeats)",
            "reconcile": "asyncio.sleep(T) only",
        },
        "figures": figures,
        "ratios": ratios,
    }


def markdown(result: BenchResult) -> str:
    p, f, r = result["params"], result["figures"], result["ratios"]
    rows = [
        "| workers W | ideal ceil(N/W) x T s | makespan s | makespan / ideal | max overlap "
        "| reconciles / object | controller start to last end s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for w in p["workers"]:
        fig = f[f"w{w}"]
        rows.append(
            f"| {w} | {fig['ideal_s']} | {fig['makespan_s']} "
            f"| **{r[f'w{w}_makespan_over_ideal']:.3f}** | {fig['max_overlap']} "
            f"(of {fig['expected_overlap']}) | {fig['reconciles_per_object']} "
            f"| {fig['from_start_s']} |"
        )
    verdict = "met" if f["within_target"] else "**missed**"
    return "\n".join(
        [
            f"N = {p['objects']} objects, T = {p['delay_s']} s per reconcile, median of "
            f"{p['repeats']} run(s) per W.",
            "",
            *rows,
            "",
            f"Target (makespan within {p['target_ratio'] - 1:.0%} of the ideal for every W): "
            f"{verdict}; worst ratio {r['worst_makespan_over_ideal']:.3f}.",
        ]
    )


BENCHMARK = Benchmark(
    name="workers",
    title="workers: makespan with W workers vs. the ideal",
    description=(
        "N `Sample` objects are created in a fresh namespace per configuration **before** the "
        "operator starts. The operator runs in its own process (`python -m bench.workers`): a "
        "Manager, one controller `for_` the kind in that namespace with "
        "`max_concurrent_reconciles` W, whose reconciler does nothing but `await "
        "asyncio.sleep(T)`. Every object needs exactly one reconcile, so the best possible "
        "makespan is ceil(N/W) x T. Measured: from the start of the first reconcile to the end "
        "of the last (the initial LIST and cache sync are before it and shown separately as "
        "controller start to last end). Max overlap is the most reconciles in flight at once; "
        "it should reach min(W, N)."
    ),
    run=run,
    markdown=markdown,
)


if __name__ == "__main__":
    main()
