"""What a metric update costs: kubeloop's families against prometheus_client's.

kubeloop keeps its own lock-free families on the hot path and exposes them through a
``prometheus_client`` collector (src/kubeloop/_metrics.py); this benchmark is the reason.
It times, in one child process, the operations one reconcile makes on metrics (a counter
child ``inc``, a histogram child ``observe``, a gauge ``set``, and a ``labels()`` lookup) for
both implementations, and scrapes both registries once. Figures are ns per operation (best
of several rounds) and the per-reconcile total for the mix one reconcile performs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import timeit
from collections.abc import Callable
from typing import Any

from bench import Benchmark, BenchResult, Context, run_child

#: Metric operations per reconcile in kubeloop (controller + workqueue + client observer),
#: an estimate from reading the code path of one successful reconcile with one status write.
PER_RECONCILE = {"inc": 6, "observe": 4, "set": 3, "labels": 2}
BUCKETS = tuple(0.005 * 2**i for i in range(16))


def _measure(rounds: int, number: int) -> dict[str, Any]:
    import prometheus_client as pc

    from kubeloop import Registry

    ours = Registry()
    prom = pc.CollectorRegistry()
    o_counter = ours.counter("c_total", "c", ("a", "b"))
    o_hist = ours.histogram("h_seconds", "h", ("a",), buckets=BUCKETS)
    o_gauge = ours.gauge("g", "g", ("a",))
    p_counter = pc.Counter("c_total", "c", ("a", "b"), registry=prom)
    p_hist = pc.Histogram("h_seconds", "h", ("a",), buckets=BUCKETS, registry=prom)
    p_gauge = pc.Gauge("g", "g", ("a",), registry=prom)
    oc, oh, og = o_counter.labels("x", "y"), o_hist.labels("x"), o_gauge.labels("x")
    pcc, ph, pg = p_counter.labels("x", "y"), p_hist.labels("x"), p_gauge.labels("x")
    ops: dict[str, dict[str, Callable[[], object]]] = {
        "kubeloop": {
            "inc": oc.inc,
            "observe": lambda: oh.observe(0.07),
            "set": lambda: og.set(3),
            "labels": lambda: o_counter.labels("x", "y"),
        },
        "prometheus_client": {
            "inc": pcc.inc,
            "observe": lambda: ph.observe(0.07),
            "set": lambda: pg.set(3),
            "labels": lambda: p_counter.labels("x", "y"),
        },
    }
    out: dict[str, Any] = {}
    for impl, table in ops.items():
        ns = {
            op: min(timeit.repeat(fn, number=number, repeat=rounds)) / number * 1e9
            for op, fn in table.items()
        }
        ns["per_reconcile"] = sum(ns[op] * n for op, n in PER_RECONCILE.items())
        out[impl] = {k: round(v, 1) for k, v in ns.items()}
    scrape = min(timeit.repeat(ours.render, number=20, repeat=rounds)) / 20
    out["scrape_ms"] = round(scrape * 1e3, 3)
    return out


async def run(ctx: Context) -> BenchResult:
    rounds = int(ctx.param("rounds", 7, 3))
    number = int(ctx.param("number", 200_000, 50_000))
    ctx.log(f"metrics cost: {rounds} rounds of {number} ops")
    args = ["--rounds", str(rounds), "--number", str(number)]
    child = await asyncio.to_thread(run_child, "bench.metrics_cost", args, 600)
    figures = child.output
    ours, theirs = figures["kubeloop"], figures["prometheus_client"]
    return BenchResult(
        name="metrics_cost",
        params={"rounds": rounds, "number": number, "per_reconcile_ops": PER_RECONCILE},
        figures=figures,
        ratios={
            "prometheus_client_over_kubeloop_per_reconcile": round(
                theirs["per_reconcile"] / ours["per_reconcile"], 2
            )
        },
    )


def markdown(result: BenchResult) -> str:
    f = result["figures"]
    rows = ["| operation | kubeloop (ns) | prometheus_client (ns) |", "| --- | --- | --- |"]
    for op in ("inc", "observe", "set", "labels", "per_reconcile"):
        rows.append(f"| {op} | {f['kubeloop'][op]} | {f['prometheus_client'][op]} |")
    return "\n".join(rows) + f"\n\nOne scrape of the registry: {f['scrape_ms']} ms.\n"


BENCHMARK = Benchmark(
    name="metrics_cost",
    title="Metric updates: kubeloop's families vs prometheus_client",
    description=__doc__.split("\n\n", 1)[1].replace("\n", " ") if __doc__ else "",
    run=run,
    markdown=markdown,
)


if __name__ == "__main__":
    args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
    print(json.dumps(_measure(int(args["--rounds"]), int(args["--number"]))))
