"""Reconcile throughput: N objects that each need one status write, beside the raw limit.

The parent side (:func:`run`, called by ``bench/run.py``) prepares a fresh namespace of
``Sample`` objects per configuration and runs each measured client in its own process:

* **kubeloop** (this module's ``__main__``): a Manager with one controller, ``for_`` the
  ``Sample`` kind with ``generation_changed`` and ``max_concurrent_reconciles=W``. The
  reconciler reads the object from ``mgr.cache`` and writes ``status.phase=Ready`` and
  ``status.observedGeneration`` with ``kubeloop.update_status`` (one PUT to ``/status``).
* **raw** (``bench/_raw.py``): plain aiohttp issuing the same PUTs with C connections.

By hand, e.g. to profile (without ``--namespace`` it installs the CRD and creates a
namespace of objects itself, before the clock starts)::

    python -m bench.throughput --kubeconfig K --objects 1000 --workers 16 --profile w16.prof
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import resource
import time
import uuid
from pathlib import Path
from typing import Any

from bench import (
    Benchmark,
    BenchResult,
    Context,
    machine_cpu_seconds,
    median,
    peak_rss_mib,
    process_cpu_seconds,
    rounded,
    run_child,
)
from bench._raw import connect
from kubeloop import (
    CRDS,
    NAMESPACES,
    AlreadyExists,
    ApiError,
    Backoff,
    Client,
    ControllerOptions,
    KubeloopError,
    Manager,
    ManagerOptions,
    Registry,
    Request,
    Resource,
    Result,
    copy_object,
    generation_changed,
    retry_transient,
    update_status,
)

GROUP = "bench.kubeloop.dev"
SAMPLES = Resource(GROUP, "v1", "samples", "Sample")

SAMPLE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"samples.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "samples", "singular": "sample", "kind": "Sample"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer", "minimum": 0}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "observedGeneration": {"type": "integer"},
                                    "phase": {"type": "string", "enum": ["Pending", "Ready"]},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}

#: 3,000 objects: a run of about 3 s (1,000 took about 1 s, and one run's wobble moved the
#: median by up to 2.4x).
FULL = {"objects": 3000, "workers": [1, 4, 16], "raw_concurrency": [1, 4, 16, 64], "repeats": 5}
QUICK = {"objects": 200, "workers": [1, 4, 16], "raw_concurrency": [1, 4, 16, 64], "repeats": 3}
#: Objects created at once while preparing a namespace (not measured).
_CREATE_CONCURRENCY = 32


# -- cluster preparation (never measured) ----------------------------------------------


async def install_crd(client: Client) -> None:
    with contextlib.suppress(AlreadyExists):
        await client.create(CRDS, SAMPLE_CRD)
    for _ in range(600):
        crd = await client.get(CRDS, SAMPLE_CRD["metadata"]["name"])
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            with contextlib.suppress(KubeloopError):
                await client.discover(SAMPLES.api_version, SAMPLES.kind)
                return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"CRD {SAMPLE_CRD['metadata']['name']} not established")


async def populate(client: Client, prefix: str, objects: int) -> str:
    """A fresh namespace holding ``objects`` Samples without status; returns its name."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    gate = asyncio.Semaphore(_CREATE_CONCURRENCY)

    async def create(i: int) -> None:
        async with gate:
            await client.create(
                SAMPLES,
                {
                    "apiVersion": SAMPLES.api_version,
                    "kind": SAMPLES.kind,
                    "metadata": {"name": f"s{i:05d}"},
                    "spec": {"size": i % 7},
                },
                namespace,
            )

    await asyncio.gather(*(create(i) for i in range(objects)))
    return namespace


async def converged(client: Client, namespace: str) -> int:
    """How many Samples in ``namespace`` are Ready for their current generation."""
    items, _ = await client.list_all(SAMPLES, namespace)
    return sum(
        1
        for o in items
        if (o.get("status") or {}).get("phase") == "Ready"
        and (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
    )


#: Samples per deletecollection call. The apiserver deletes a collection one object at a
#: time (``--delete-collection-workers`` defaults to 1): 100,000 in one call outlast its 60 s
#: request timeout and end in a 504 with the rest left in place; a page of this many takes
#: a few seconds (with ``limit`` the apiserver deletes one page and answers).
DELETE_PAGE = 2_000
#: The pauses before one call is sent again after a 5xx, a 504 timeout or a dropped
#: connection: 0.5, 1, 2, 4, 8 s (+10 %), then its error stands.
DELETE_RETRY = Backoff(duration=0.5, factor=2.0, jitter=0.1, steps=6)


async def delete_all(
    kubeconfig: str,
    namespace: str,
    *,
    page: int = DELETE_PAGE,
    backoff: Backoff = DELETE_RETRY,
    timeout: float | None = None,
    resource: Resource = SAMPLES,
) -> int:
    """Delete the namespace's Samples (or another ``resource``'s objects), keeping etcd's
    size steady from one configuration to the next; returns how many the deletecollection
    calls reported deleted.

    One deletecollection of ``page`` objects (``limit``) at a time, each retried on
    transient failures with the runtime's one retry loop (:func:`kubeloop.retry_transient`),
    until a LIST finds none left: the objects are gone when it returns, even if a call timed
    out half-way. Raises RuntimeError if a call deleted nothing (so it cannot loop for
    ever), TimeoutError after ``timeout`` seconds if given (the apiserver deletes some
    200-1,000 objects a second here: 100,000 take minutes). The namespace itself stays:
    without kube-controller-manager it would never finish terminating."""
    collection = resource.path(namespace)
    deleted = 0
    async with connect(kubeconfig, 1) as api, asyncio.timeout(timeout):

        async def call(method: str, query: str) -> Any:
            url = f"{api.base}{collection}?{query}"
            async with api.http.request(method, url, headers=api.headers) as resp:
                body = await resp.read()
                if resp.status >= 400:
                    with contextlib.suppress(ValueError):
                        body = json.loads(body)
                    raise ApiError.from_status(resp.status, body)
                return json.loads(body)

        async def left() -> int:
            listed = await call("GET", "limit=1")
            remaining = int((listed.get("metadata") or {}).get("remainingItemCount") or 0)
            return len(listed.get("items") or []) + remaining

        async def delete_page() -> int:
            answer = await call("DELETE", f"limit={page}")
            return len(answer.get("items") or [])

        remaining = await retry_transient(left, backoff=backoff)
        while remaining:
            deleted += await retry_transient(delete_page, backoff=backoff)
            before, remaining = remaining, await retry_transient(left, backoff=backoff)
            if remaining >= before:  # e.g. held by a finalizer: no point asking again
                raise RuntimeError(
                    f"{namespace}: {remaining} {resource.plural} left after deleting"
                )
    return deleted


# -- the kubeloop operator (child process) ---------------------------------------------


class RequestCounter:
    """Counts the operator's API requests by verb/subresource and status code."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.status_writes = 0
        self.conflicts = 0

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        key = f"{verb}/{subresource}" if subresource else verb
        self.counts[key] = self.counts.get(key, 0) + 1
        if verb == "update" and subresource == "status":
            self.status_writes += 1
            if code == 409:
                self.conflicts += 1


async def operate(
    kubeconfig: str,
    namespace: str | None,
    objects: int,
    workers: int,
    server_pids: list[int],
    profile: Path | None,
    timeout: float,
) -> dict[str, Any]:
    """Run the operator until all ``objects`` Samples in ``namespace`` are Ready."""
    client = Client.from_kubeconfig(kubeconfig)
    if namespace is None:
        await install_crd(client)
        namespace = await populate(client, "bench-tp", objects)
    counter = RequestCounter()
    client.add_observer(counter)
    mgr = Manager(
        client,
        ManagerOptions(
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=False,
            registry=Registry(),
        ),
    )
    ready: set[str] = set()
    all_ready = asyncio.Event()
    reconciles = 0
    first_reconcile: float | None = None
    sync_cpu: float | None = None

    async def reconcile(req: Request) -> Result:
        nonlocal reconciles, first_reconcile, sync_cpu
        reconciles += 1
        if first_reconcile is None:
            first_reconcile = time.perf_counter()
            sync_cpu = _cpu_seconds()
        obj = await mgr.cache.get(SAMPLES, req.name, req.namespace)
        if obj is None:
            return Result()
        generation = obj["metadata"]["generation"]

        def mutate(status: dict[str, Any]) -> None:
            status["phase"] = "Ready"
            status["observedGeneration"] = generation

        written = await update_status(client, SAMPLES, obj, mutate)
        status = written.get("status") or {}
        if status.get("phase") == "Ready" and status.get("observedGeneration") == generation:
            ready.add(req.name)
            if len(ready) >= objects:
                all_ready.set()
        return Result()

    mgr.controller("bench-throughput").for_(
        SAMPLES, predicates=[generation_changed], namespace=namespace
    ).with_options(ControllerOptions(max_concurrent_reconciles=workers)).complete(reconcile)

    profiler = cProfile.Profile() if profile is not None else None
    server_before = process_cpu_seconds(server_pids)
    machine_before = machine_cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = _cpu_seconds()
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    runner = asyncio.create_task(mgr.run())  # the clock starts with the controller
    waiter = asyncio.create_task(all_ready.wait())
    await asyncio.wait({runner, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    seconds = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    after = resource.getrusage(resource.RUSAGE_SELF)
    copy_us = _copy_cost_us(mgr)
    server_cpu = process_cpu_seconds(server_pids) - server_before
    machine_cpu = machine_cpu_seconds() - machine_before
    waiter.cancel()
    mgr.stop()
    await runner  # raises if the manager failed
    await client.close()
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    if len(ready) < objects:
        raise RuntimeError(f"only {len(ready)} of {objects} objects Ready after {seconds:.0f}s")
    return {
        "objects": objects,
        "workers": workers,
        "seconds": seconds,
        "sync_s": (first_reconcile or start) - start,
        # CPU of the LIST, the cache's fill and the first announcements (until the first
        # reconcile starts), part of cpu_s: the raw client lists before its clock starts
        "sync_cpu_s": (sync_cpu or cpu_before) - cpu_before,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "server_cpu_s": server_cpu if server_pids else None,
        "machine_cpu_s": machine_cpu,
        "reconciles": reconciles,
        "status_writes": counter.status_writes,
        "conflicts": counter.conflicts,
        "live_read_fallbacks": mgr.cache.live_read_fallbacks,
        # what a cache read's copy costs (Cache.get returns copies), per object read
        "copy_us_per_read": copy_us,
        "requests": counter.counts,
        "peak_rss_mib": peak_rss_mib(),
    }


def _cpu_seconds() -> float:
    """User+system CPU seconds of this process so far."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    return now.ru_utime + now.ru_stime


def _copy_cost_us(mgr: Manager) -> float:
    """Microseconds one cache read spends copying its object (measured after the run,
    over the cached objects, so it does not disturb the timed phase)."""
    objs = [o for inf in mgr.cache.informers for o in inf.store.list()]
    if not objs:
        return 0.0
    start = time.perf_counter()
    for obj in objs:
        copy_object(obj)
    return rounded((time.perf_counter() - start) / len(objs) * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", help="Samples to reconcile (default: create them)")
    parser.add_argument("--objects", type=int, default=FULL["objects"])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--server-pids", default="", help="comma-separated, for their CPU time")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the measured phase")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    pids = [int(p) for p in args.server_pids.split(",") if p]
    result = asyncio.run(
        operate(
            args.kubeconfig,
            args.namespace,
            args.objects,
            args.workers,
            pids,
            args.profile,
            args.timeout,
        )
    )
    print(json.dumps(result), flush=True)


# -- the benchmark (parent side) --------------------------------------------------------


def _child_timeout(objects: int) -> float:
    return 120.0 + objects * 0.5


#: A run during which other processes took more than this share of one core (CPU seconds
#: per second of the measured phase; at least _DISTURBED_FLOOR, as /proc counts in 10 ms
#: ticks) is discarded and run again, at most _RETRIES times. Only known when the harness
#: started the control plane (else the control plane's CPU counts as "other").
_DISTURBED = 0.1
_DISTURBED_FLOOR = 0.05
_RETRIES = 5
#: Before the clock starts, wait (at most _SETTLE_MAX s) for the machine to go quiet: below
#: _SETTLE_CORES busy cores over a 0.5 s window, so the preparation's aftermath is not measured.
_SETTLE_CORES = 0.1
_SETTLE_MAX = 10.0


async def settle() -> float:
    """Wait until the machine is (nearly) idle; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < _SETTLE_MAX:
        before = machine_cpu_seconds()
        await asyncio.sleep(0.5)
        if (machine_cpu_seconds() - before) / 0.5 < _SETTLE_CORES:
            break
    return time.monotonic() - start


def _other_cpu(run: dict[str, Any]) -> float | None:
    if run.get("server_cpu_s") is None:
        return None
    return float(run["machine_cpu_s"] - run["cpu_s"] - run["server_cpu_s"])


async def _one(ctx: Context, client: Client, kind: str, level: int, objects: int) -> dict[str, Any]:
    """One measured run in a fresh namespace: kubeloop with ``level`` workers, or the raw
    client with ``level`` connections."""
    kubeconfig = str(ctx.kubeconfig)
    namespace = await populate(client, f"bench-tp-{kind}{level}", objects)
    await settle()
    pids = ",".join(str(p) for p in ctx.server_pids)
    if kind == "w":
        module = "bench.throughput"
        args = ["--workers", str(level), "--objects", str(objects), "--namespace", namespace]
    else:
        module = "bench._raw"
        args = ["--concurrency", str(level), "--collection", SAMPLES.path(namespace)]
    if ctx.server_pids:
        args += ["--server-pids", pids]
    child = await asyncio.to_thread(
        run_child, module, ["--kubeconfig", kubeconfig, *args], _child_timeout(objects)
    )
    out = child.output
    if kind == "c" and out["errors"]:
        raise RuntimeError(f"raw client got errors: {out['errors']}")
    done = await converged(client, namespace)
    if done != objects:
        raise RuntimeError(f"{kind}={level}: {done} of {objects} objects converged")
    await delete_all(kubeconfig, namespace)
    out["cpu_total_s"] = child.cpu_s
    ctx.log(
        f"throughput {'kubeloop workers' if kind == 'w' else 'raw connections'}={level}: "
        f"{objects / out['seconds']:.0f} objects/s ({out['seconds']:.2f} s)"
    )
    return out


def _summary(runs: list[dict[str, Any]], objects: int) -> dict[str, Any]:
    seconds = median([r["seconds"] for r in runs])
    cpu = median([r["cpu_s"] for r in runs])
    fig: dict[str, Any] = {
        "seconds": rounded(seconds),
        "objects_per_s": rounded(objects / seconds),
        "cpu_s": rounded(cpu),
        "cpu_ms_per_object": rounded(cpu / objects * 1000),
        "cpu_total_s": rounded(median([r["cpu_total_s"] for r in runs])),
        "peak_rss_mib": rounded(max(r["peak_rss_mib"] for r in runs)),
        "seconds_each": [rounded(r["seconds"]) for r in runs],
        "objects_per_s_min": rounded(objects / max(r["seconds"] for r in runs)),
        "objects_per_s_max": rounded(objects / min(r["seconds"] for r in runs)),
    }
    if "status_writes" in runs[0]:  # kubeloop
        total = objects * len(runs)
        fig["sync_s"] = rounded(median([r["sync_s"] for r in runs]))
        # part of cpu_ms_per_object: the raw client lists before its clock starts
        sync_cpu = median([r["sync_cpu_s"] for r in runs])
        fig["sync_cpu_ms_per_object"] = rounded(sync_cpu / objects * 1000)
        fig["status_writes_per_object"] = rounded(sum(r["status_writes"] for r in runs) / total)
        fig["reconciles_per_object"] = rounded(sum(r["reconciles"] for r in runs) / total)
        fig["conflicts"] = sum(r["conflicts"] for r in runs)
        fig["live_read_fallbacks"] = sum(r["live_read_fallbacks"] for r in runs)
        fig["requests_last_run"] = runs[-1]["requests"]
    else:
        fig["status_writes_per_object"] = 1.0
    if runs[0].get("server_cpu_s") is not None:
        fig["server_cpu_s"] = rounded(median([r["server_cpu_s"] for r in runs]))
        # what the rest of the machine took meanwhile: near 0 on a quiet machine
        other = [_other_cpu(r) or 0.0 for r in runs]
        fig["other_cpu_s_max"] = rounded(max(0.0, *other), 2)
    return fig


async def run(ctx: Context) -> BenchResult:
    objects = int(ctx.param("objects", FULL["objects"], QUICK["objects"]))
    workers = list(ctx.param("workers", FULL["workers"], QUICK["workers"]))
    raw_levels = list(
        ctx.param("raw_concurrency", FULL["raw_concurrency"], QUICK["raw_concurrency"])
    )
    repeats = int(ctx.param("repeats", FULL["repeats"], QUICK["repeats"]))
    # one uncounted pass first: a fresh apiserver (Go heap, caches) is slower at first
    warmup = int(ctx.param("warmup", 1, 1))
    # interleaved, so a slow drift of the machine or of etcd affects both sides alike
    order = [("c", c) for c in raw_levels] + [("w", w) for w in workers]
    order.sort(key=lambda kv: (kv[1], kv[0]))
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in order}
    discarded = 0
    async with Client.from_kubeconfig(ctx.kubeconfig) as client:
        await install_crd(client)
        for rep in range(-warmup, repeats):
            what = "warm-up (not counted)" if rep < 0 else f"repeat {rep + 1} of {repeats}"
            ctx.log(f"throughput: {what}, {objects} objects")
            for kind, level in order:
                for attempt in range(_RETRIES + 1):
                    one = await _one(ctx, client, kind, level, objects)
                    other = _other_cpu(one)
                    allowed = max(_DISTURBED_FLOOR, _DISTURBED * one["seconds"])
                    if other is None or other <= allowed:
                        break
                    if attempt < _RETRIES:
                        discarded += 1
                        ctx.log(f"  disturbed: other processes took {other:.2f} CPU s; again")
                if rep >= 0:
                    runs[(kind, level)].append(one)

    kubeloop = {f"w{w}": _summary(runs[("w", w)], objects) for w in workers}
    raw = {f"c{c}": _summary(runs[("c", c)], objects) for c in raw_levels}
    best = max(raw_levels, key=lambda c: raw[f"c{c}"]["objects_per_s"])
    limit = raw[f"c{best}"]["objects_per_s"]
    # Paired within each repeat: the machine's speed drifts over a block (the raw client at
    # one connection went from 519 to 397 objects/s over four passes) and wobbles from run
    # to run, so a share of two medians taken from different runs moved by +-15 points with
    # no change of code; the share per repeat compares runs made seconds apart.
    limit_s = [one["seconds"] for one in runs[("c", best)]]
    paired = {
        w: [
            rounded(c_s / one["seconds"], 3)
            for one, c_s in zip(runs[("w", w)], limit_s, strict=True)
        ]
        for w in workers
    }
    return {
        "name": "throughput",
        "params": {
            "objects": objects,
            "workers": workers,
            "raw_concurrency": raw_levels,
            "repeats": repeats,
            "warmup_passes": warmup,
            "write": "PUT status (phase=Ready, observedGeneration)",
            "measured": "controller start until all objects Ready; creation not measured",
            "raw_client": "plain aiohttp, keep-alive pool, bodies pre-encoded",
        },
        "figures": {
            "kubeloop": kubeloop,
            "raw": raw,
            "raw_limit_objects_per_s": limit,
            "raw_limit_concurrency": best,
            "discarded_runs": discarded,
            "of_raw_limit_per_repeat": {f"w{w}": paired[w] for w in workers},
        },
        "ratios": {
            **{
                f"w{w}_of_raw_limit": rounded(kubeloop[f"w{w}"]["objects_per_s"] / limit, 3)
                for w in workers
            },
            **{f"w{w}_of_raw_limit_paired": rounded(median(paired[w]), 3) for w in workers},
            **{  # the same number of requests in flight on both sides
                f"w{w}_of_raw_c{w}": rounded(
                    kubeloop[f"w{w}"]["objects_per_s"] / raw[f"c{w}"]["objects_per_s"], 3
                )
                for w in workers
                if w in raw_levels
            },
        },
    }


def markdown(result: BenchResult) -> str:
    p, f, r = result["params"], result["figures"], result["ratios"]
    n, limit = p["objects"], f["raw_limit_objects_per_s"]
    rows = [
        "| client | workers / connections | objects/s | min-max | of raw limit "
        "| of raw, same concurrency | status writes / object | client CPU ms / object "
        "| apiserver+etcd CPU ms / object | peak RSS MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def row(
        client: str, level: int, fig: dict[str, Any], ops: str, of_limit: str, same: str
    ) -> str:
        server = f"{fig['server_cpu_s'] / n * 1000:.2f}" if "server_cpu_s" in fig else "n/a"
        return (
            f"| {client} | {level} | {ops} "
            f"| {fig['objects_per_s_min']:.0f}-{fig['objects_per_s_max']:.0f} | {of_limit} "
            f"| {same} | {fig['status_writes_per_object']:g} | {fig['cpu_ms_per_object']:.2f} "
            f"| {server} | {fig['peak_rss_mib']:.0f} |"
        )

    for w in p["workers"]:
        fig = f["kubeloop"][f"w{w}"]
        same = f"{r[f'w{w}_of_raw_c{w}']:.0%}" if f"w{w}_of_raw_c{w}" in r else "n/a"
        of_limit = f"**{r[f'w{w}_of_raw_limit']:.0%}**"
        rows.append(row("kubeloop", w, fig, f"{fig['objects_per_s']:.0f}", of_limit, same))
    for c in p["raw_concurrency"]:
        fig = f["raw"][f"c{c}"]
        ops = f"{fig['objects_per_s']:.0f}"
        if c == f["raw_limit_concurrency"]:
            ops = f"**{ops}**"
        rows.append(row("raw aiohttp", c, fig, ops, f"{fig['objects_per_s'] / limit:.0%}", ""))

    def sync_of(w: int) -> str:
        fig = f["kubeloop"][f"w{w}"]
        cpu = fig.get("sync_cpu_ms_per_object")
        return f"W={w}: {fig['sync_s']:.3f} s" + (f" ({cpu:.3f} ms CPU/object)" if cpu else "")

    sync = ", ".join(sync_of(w) for w in p["workers"])
    per_repeat = f.get("of_raw_limit_per_repeat")
    paired = ""
    if per_repeat:

        def shares(w: int) -> str:
            each = ", ".join(f"{x:.0%}" for x in per_repeat[f"w{w}"])
            return f"W={w}: **{r[f'w{w}_of_raw_limit_paired']:.0%}** ({each})"

        paired = (
            "Of the raw limit per repeat (kubeloop's run against the raw limit's configuration "
            "in the same pass, a few seconds apart; median, then each repeat): "
            + "; ".join(shares(w) for w in p["workers"])
            + "."
        )
    figs = [*f["kubeloop"].values(), *f["raw"].values()]
    other = [x["other_cpu_s_max"] for x in figs if "other_cpu_s_max" in x]
    quiet = (
        f" Other processes on the machine took at most {max(other)} CPU s during any kept "
        f"measured phase ({f.get('discarded_runs', 0)} disturbed run(s) discarded and re-run)."
        if other
        else ""
    )
    return "\n".join(
        [
            f"{n} objects per configuration; objects/s is N / the median time of "
            f"{p['repeats']} run(s) (min-max: the slowest and fastest run), after "
            f"{p.get('warmup_passes', 0)} uncounted warm-up pass(es). Raw limit = the best raw "
            f"row: **{limit:.0f} objects/s** at {f['raw_limit_concurrency']} connections.",
            "",
            *rows,
            "",
            *([paired, ""] if paired else []),
            "Time from controller start to the first reconcile (LIST + cache sync; its CPU "
            f"is part of the client CPU above, the raw client lists before its clock): {sync}."
            + quiet,
        ]
    )


BENCHMARK = Benchmark(
    name="throughput",
    title="throughput: reconcile throughput vs. the raw limit",
    description=(
        "N `Sample` objects (CRD `samples.bench.kubeloop.dev`, status subresource) are created "
        "in a fresh namespace per configuration **before** the clock starts. Measured: from "
        "controller start (`Manager.run()`, so the initial LIST and cache sync are included) "
        "until every object has `status.phase=Ready` and `status.observedGeneration` equal "
        "to its generation, each with one `PUT .../status` through `kubeloop.update_status`. "
        "The operator runs in its own process (`python -m bench.throughput`): a Manager, one "
        "controller `for_` the kind with `generation_changed` and `max_concurrent_reconciles` "
        "W, reading from `mgr.cache`. The raw limit is a minimal client in its own process "
        "(`python -m bench._raw`): plain aiohttp with the kubeconfig's client certificate, a "
        "keep-alive pool of C connections opened before the clock, bodies encoded before the "
        "clock, issuing the same PUTs; its best C is the limit. Client CPU is user+system "
        "time of the measuring process during the measured phase; peak RSS is that process's "
        "`VmHWM` (interpreter and imports included); apiserver+etcd CPU is read from "
        "`/proc` when the harness started the control plane. Every run is checked afterwards "
        "with a LIST: all N objects converged. One uncounted warm-up pass over every "
        "configuration comes first (a fresh apiserver is slower for a while). When the "
        "harness started the control plane, a run during which other processes took more "
        "than a tenth of a core is discarded and run again (at most 5 times; the count is "
        "reported)."
    ),
    run=run,
    markdown=markdown,
)


if __name__ == "__main__":
    main()
