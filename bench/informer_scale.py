"""Informer scale: N objects: initial sync time, memory per cached object, watch events per
second the cache absorbs, and the longest event-loop stall during sync; then memory per
cached Pod, whole and metadata-only.

The parent side (:func:`run`, called by ``bench/run.py``) creates N ``Sample`` objects in a
fresh namespace (concurrent creates, not measured), then starts the observer in its own
process (this module's ``__main__``). The observer opens its connection, takes its baseline
RSS, starts a kubeloop :class:`~kubeloop.Cache` with one informer for the namespace and
waits for ``wait_for_sync`` while a ticker task (``asyncio.sleep(0.001)`` in a loop)
records the longest gap between its wake-ups: the longest time the event loop was blocked.
Then it prints ``READY``; the parent patches K objects as fast as the apiserver takes it
(plain aiohttp, ``bench._raw``, C connections, one merge patch of an annotation each), and
the observer counts the update events its handler receives, checks afterwards with a live
LIST that every cached resourceVersion is the server's, and reports.

By hand (the namespace must hold the objects; without the parent nobody patches, so use
``--updates 0``; ``--profile`` writes cProfile stats of the sync)::

    python -m bench.informer_scale --kubeconfig K --namespace NS --objects 10000 \\
        --updates 0 --profile sync.prof
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime as _dt
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench import ROOT, Benchmark, BenchResult, Context, peak_rss_mib, rounded
from bench._raw import connect
from bench.throughput import SAMPLES, delete_all, install_crd, populate
from kubeloop import (
    LEASES,
    NAMESPACES,
    PODS,
    Added,
    AlreadyExists,
    Cache,
    Client,
    Deleted,
    Event,
    Generic,
    KubeloopError,
    LoopDetector,
    Manager,
    ManagerOptions,
    ReflectorOptions,
    Registry,
    Request,
    Resource,
    Result,
    Updated,
)
from kubeloop.testing import eventually

FULL: dict[str, Any] = {"objects": 100_000, "updates": 5_000, "patch_concurrency": 32}
QUICK: dict[str, Any] = {"objects": 2_000, "updates": 1_000, "patch_concurrency": 32}
#: A longest stall above this gets a cProfile of the sync (``--profile``) and a note.
STALL_BUDGET_MS = 100.0
#: Targets of issue 10 at 100,000 objects (reported, never asserted).
MEMORY_TARGET_BYTES = 1536
STALL_TARGET_MS = 50.0
_READY = "READY"


def rss_mib() -> float:
    """This process's resident set size now (``VmRSS``), in MiB."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    return 0.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class StallMeter:
    """A task that sleeps ``interval`` in a loop and records the gaps between its wake-ups:
    a gap much longer than ``interval`` is the time the event loop was busy elsewhere, or
    the time the process was not scheduled at all (a busy machine). The CPU time the process
    used within each gap tells the two apart: ``longest_cpu_ms`` is the most CPU spent within
    any one gap (this process's own work blocking the loop)."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.gaps: list[tuple[float, float]] = []  # (wall seconds, CPU seconds)
        self._last = (0.0, 0.0)
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def _now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def _record(self) -> None:
        now = self._now()
        self.gaps.append((now[0] - self._last[0], now[1] - self._last[1]))
        self._last = now

    def start(self) -> None:
        self.gaps = []
        self._last = self._now()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self._record()

    async def stop(self) -> dict[str, Any]:
        # the stretch since the last tick counts too: the loop may have been blocked until now
        self._record()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        ms = [wall * 1000 for wall, _ in self.gaps]
        wall, cpu = max(self.gaps)
        return {
            "longest_ms": wall * 1000,
            "longest_cpu_ms": cpu * 1000,  # CPU used within the longest gap
            "longest_cpu_any_gap_ms": max(c for _, c in self.gaps) * 1000,
            "p99_ms": statistics.quantiles(ms, n=100)[98] if len(ms) >= 2 else ms[0],
            "over_10ms": sum(1 for g in ms if g > 10),
            "over_50ms": sum(1 for g in ms if g > 50),
            "over_100ms": sum(1 for g in ms if g > 100),
            "ticks": len(ms),
        }


# -- the observer (child process) -------------------------------------------------------


async def observe(
    kubeconfig: str,
    namespace: str,
    objects: int,
    updates: int,
    profile: Path | None,
    timeout: float,
    compact: bool = False,
) -> dict[str, Any]:
    client = Client.from_kubeconfig(kubeconfig)
    await client.server_version()  # TLS connection open: neither in the sync time nor the RSS
    added = 0
    received: list[tuple[str, float]] = []  # (resourceVersion, monotonic time) per update
    all_received = asyncio.Event()

    def handler(event: Event) -> None:
        nonlocal added
        if isinstance(event, Added):
            added += 1
        elif isinstance(event, Updated):
            received.append((event.new["metadata"]["resourceVersion"], time.monotonic()))
            if len(received) >= updates:
                all_received.set()

    options = ReflectorOptions(transform=compact_transform) if compact else ReflectorOptions()
    cache = Cache(client, options=options)
    informer = cache.informer(SAMPLES, namespace=namespace)
    informer.add_handler(handler)
    gc.collect()
    rss_before = rss_mib()
    meter = StallMeter()
    profiler = cProfile.Profile() if profile is not None else None

    # -- initial sync
    meter.start()
    cpu0 = cpu_seconds()
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    cache.start()
    await cache.wait_for_sync(timeout)
    sync_s = time.perf_counter() - start
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    sync_cpu = cpu_seconds() - cpu0
    sync_stall = await meter.stop()
    cached = len(informer.store)
    gc.collect()
    rss_after = rss_mib()
    peak_after_sync = peak_rss_mib()
    items = informer.store.list()
    json_bytes = sum(len(msgspec.json.encode(o)) for o in items) / max(1, len(items))
    del items

    # -- the burst: the parent patches now
    print(_READY, flush=True)
    meter.start()
    cpu1 = cpu_seconds()
    if updates:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_received.wait(), timeout)
    burst_cpu = cpu_seconds() - cpu1
    burst_stall = await meter.stop()

    # -- did the cache keep up? every cached resourceVersion is the server's
    live, _ = await client.list_all(SAMPLES, namespace)
    server_rv = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in live}
    mismatched = sum(
        1
        for name, rv in server_rv.items()
        if (informer.store.get(f"{namespace}/{name}") or {})
        .get("metadata", {})
        .get("resourceVersion")
        != rv
    )
    mismatched += sum(1 for key in informer.store if key.split("/", 1)[1] not in server_rv)
    await cache.stop()
    standby = await measure_standby(client, namespace, objects, updates, timeout)
    await client.close()
    return {
        "objects": objects,
        "cached": cached,
        "added_events": added,
        "sync_s": sync_s,
        "sync_cpu_s": sync_cpu,
        "sync_stall": sync_stall,
        "page_size": options.page_size,
        "rss_before_mib": rss_before,
        "rss_after_sync_mib": rss_after,
        "peak_rss_after_sync_mib": peak_after_sync,
        "json_bytes_per_object": json_bytes,
        "updates_expected": updates,
        "updates_received": len(received),
        "burst_cpu_s": burst_cpu,
        "burst_stall": burst_stall,
        "received": received,
        "rv_mismatches": mismatched,
        "relists": informer.reflector.relists,
        "peak_rss_mib": peak_rss_mib(),
        "standby": standby,
    }


async def observe_pods(
    kubeconfig: str, namespace: str, objects: int, metadata_only: bool, timeout: float
) -> dict[str, Any]:
    """Sync one informer of the namespace's Pods, whole or metadata only
    (``PartialObjectMetadata``), and measure what it holds: the RSS delta across the sync
    per cached Pod, and the JSON size of what a read returns. One process per variant, so
    neither inherits the other's freed memory."""
    client = Client.from_kubeconfig(kubeconfig)
    await client.server_version()  # TLS connection open: not in the RSS delta
    cache = Cache(client)
    informer = cache.informer(PODS, namespace=namespace, metadata_only=metadata_only)
    gc.collect()
    rss_before = rss_mib()
    start = time.perf_counter()
    cache.start()
    await cache.wait_for_sync(timeout)
    sync_s = time.perf_counter() - start
    gc.collect()
    rss_after = rss_mib()
    items = informer.store.list()
    kinds = sorted({o.get("kind", "") for o in items})
    json_bytes = sum(len(msgspec.json.encode(o)) for o in items) / max(1, len(items))
    del items
    await cache.stop()
    await client.close()
    return {
        "objects": objects,
        "metadata_only": metadata_only,
        "cached": len(informer.store),
        "kinds": kinds,
        "sync_s": sync_s,
        "rss_delta_mib": rss_after - rss_before,
        "json_bytes_per_object": json_bytes,
    }


def _held_bytes(det: LoopDetector) -> tuple[int, int]:
    """Bytes (``sys.getsizeof``, each object once) of what the loop detector's own tables
    reach, and how many decoded API objects among them. Requests are left out: the
    workqueue holds the same ones."""
    stack: list[Any] = list(det.tables().values())
    seen: set[int] = set()
    size = api_objects = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type | Request):
            continue
        seen.add(id(o))
        size += sys.getsizeof(o)
        if isinstance(o, dict):
            api_objects += "metadata" in o
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif isinstance(o, Added | Updated | Deleted | Generic):
            stack.extend(gc.get_referents(o))
    return size, api_objects


async def measure_standby(
    client: Client, namespace: str, objects: int, updates: int, timeout: float
) -> dict[str, Any]:
    """A manager that is not leader (the Lease is someone else's) with one controller
    for the objects: its sources start, its workers never do. After its cache has
    delivered every object and ``updates`` patches by another writer, what does its loop
    detector hold?"""
    lease_name = "bench-informer-standby"
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease_name},
        "spec": {"holderIdentity": "bench-leader", "leaseDurationSeconds": 3600, "renewTime": now},
    }
    await client.create(LEASES, lease, namespace)
    options = ManagerOptions(
        leader_election=True,
        leader_election_id=lease_name,
        leader_election_namespace=namespace,
        identity="bench-standby",
        metrics_bind_address=None,
        health_probe_bind_address=None,
        handle_signals=False,
        registry=Registry(),
    )
    mgr = Manager(client, options)
    ctl = mgr.controller("standby").for_(SAMPLES, namespace=namespace).complete(_never)
    det = ctl.loops
    assert det is not None
    gc.collect()
    rss0 = rss_mib()
    task = asyncio.create_task(mgr.run())
    try:
        await eventually(
            lambda: det.footprint()["pending"] >= objects, "every object", timeout, interval=0.2
        )
        # updates by another writer, and wait until the standby's cache has them
        written: dict[str, str] = {}
        names = iter(range(updates))

        async def patcher() -> None:
            for i in names:
                name = f"s{i % objects:05d}"
                body = {"metadata": {"annotations": {"bench.kubeloop.dev/standby": str(i)}}}
                done = await client.patch(SAMPLES, name, body, namespace)
                written[f"{namespace}/{name}"] = done["metadata"]["resourceVersion"]

        await asyncio.gather(*(patcher() for _ in range(16)))
        [informer] = mgr.cache.informers
        await eventually(
            lambda: all(
                int(informer.store.resource_version(k) or "0") >= int(v)  # etcd revisions
                for k, v in written.items()
            ),
            "every update in the standby's cache",
            timeout,
            interval=0.2,
        )
        gc.collect()
        rss1 = rss_mib()
        held, api_objects = _held_bytes(det)
        footprint = det.footprint()
        reconciles = ctl.reconciles
    finally:
        mgr.stop()
        await asyncio.wait_for(task, timeout)
        with contextlib.suppress(KubeloopError):
            await client.delete(LEASES, lease_name, namespace)
    return {
        "objects": objects,
        "updates": updates,
        "reconciles": reconciles,
        "pending": footprint["pending"],
        "own_objects": footprint["own_objects"],
        "detector_bytes": held,
        "detector_api_objects": api_objects,
        "rss_delta_mib": rss1 - rss0,
    }


async def _never(req: Request) -> Result:
    raise AssertionError(f"a standby reconciled {req}")


#: Values shorter than this are interned by the opt-in compact transform: names, namespaces,
#: kinds, label values, phases repeat across objects; long values (timestamps, UIDs) rarely do.
_INTERN_BELOW = 64


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(k): _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, str) and len(value) < _INTERN_BELOW:
        return sys.intern(value)
    return value


def compact_transform(obj: dict[str, Any]) -> dict[str, Any]:
    """Opt-in (``--compact``, bench only): strip managedFields as the default does, then rebuild
    the object with interned keys and short values, so objects share their repeated strings.
    Measures what interning in the reflector would save; kubeloop does not do it."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    return dict(_compact(obj))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True, help="holds the objects to cache")
    parser.add_argument("--objects", type=int, default=FULL["objects"])
    parser.add_argument("--updates", type=int, default=0, help="update events to wait for")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the sync")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--compact", action="store_true", help="intern strings (opt-in)")
    parser.add_argument(
        "--pods",
        choices=("full", "metadata"),
        help="only sync the namespace's Pods (whole or metadata-only) and report memory",
    )
    args = parser.parse_args()
    if args.pods:
        pods = observe_pods(
            args.kubeconfig, args.namespace, args.objects, args.pods == "metadata", args.timeout
        )
        print(json.dumps(asyncio.run(pods)), flush=True)
        return
    result = asyncio.run(
        observe(
            args.kubeconfig,
            args.namespace,
            args.objects,
            args.updates,
            args.profile,
            args.timeout,
            args.compact,
        )
    )
    print(json.dumps(result), flush=True)


# -- the benchmark (parent side) --------------------------------------------------------


async def burst(
    kubeconfig: str, namespace: str, objects: int, updates: int, concurrency: int
) -> dict[str, Any]:
    """``updates`` merge patches (a changing annotation) over the objects, round robin,
    from ``concurrency`` connections; returns when each patched version was answered."""
    collection = SAMPLES.path(namespace)
    bodies = [
        (
            f"{collection}/s{i % objects:05d}",
            json.dumps({"metadata": {"annotations": {"bench.kubeloop.dev/seq": str(i)}}}).encode(),
        )
        for i in range(updates)
    ]
    answered: dict[str, float] = {}  # resourceVersion -> monotonic time of the response
    errors: dict[int, int] = {}
    async with connect(kubeconfig, concurrency) as api:
        headers = {**api.headers, "Content-Type": "application/merge-patch+json"}
        await asyncio.gather(*(api.json("GET", "/version") for _ in range(concurrency)))
        pending = iter(bodies)

        async def worker() -> None:
            for path, body in pending:
                async with api.http.patch(api.base + path, data=body, headers=headers) as resp:
                    text = await resp.read()
                    if resp.status != 200:
                        errors[resp.status] = errors.get(resp.status, 0) + 1
                        continue
                answered[json.loads(text)["metadata"]["resourceVersion"]] = time.monotonic()

        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        end = time.monotonic()
    if errors:
        raise RuntimeError(f"patches failed: {errors}")
    return {"start": start, "end": end, "answered": answered}


def _observer_timeout(objects: int) -> float:
    return 300.0 + objects * 0.02


async def _spawn(
    ctx: Context, namespace: str, objects: int, *args: str
) -> asyncio.subprocess.Process:
    """This module's observer in a process of its own, its stdout piped."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.informer_scale",
        "--kubeconfig",
        str(ctx.kubeconfig),
        "--namespace",
        namespace,
        "--objects",
        str(objects),
        "--timeout",
        str(_observer_timeout(objects)),
        *args,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


async def _observer(
    ctx: Context, namespace: str, objects: int, updates: int, concurrency: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the observer, patch when it is READY; its result and the burst's."""
    timeout = _observer_timeout(objects)
    compact = ["--compact"] if ctx.param("compact", 0, 0) else []
    proc = await _spawn(ctx, namespace, objects, "--updates", str(updates), *compact)
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(2 * timeout):
            while (line := await proc.stdout.readline()) and line.strip() != _READY.encode():
                pass
            if not line:
                raise RuntimeError(f"observer exited with {await proc.wait()} before syncing")
            ctx.log(f"informer_scale: synced; patching {updates} objects")
            patched = await burst(str(ctx.kubeconfig), namespace, objects, updates, concurrency)
            out = (await proc.stdout.read()).decode()
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if code != 0:
        raise RuntimeError(f"observer exited with {code}")
    lines = [x for x in out.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError("observer printed no JSON result")
    result: dict[str, Any] = json.loads(lines[-1])
    return result, patched


#: ServiceAccounts (not in kubeloop's curated exports): a Pod needs its namespace's
#: ``default`` one, which kube-controller-manager would create.
_SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
#: No scheduler serves this name: the Pods stay Pending and nothing writes their status,
#: so both syncs see the same objects.
_NO_SCHEDULER = "bench-informer-unscheduled"
_POD_CONCURRENCY = 32


def bench_pod(i: int) -> dict[str, Any]:
    """A Pod shaped like a typical workload's (one container, env, ports, probes,
    resources, labels and an owner-like annotation), never scheduled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i:06d}",
            "labels": {"app": "bench-web", "tier": "frontend", "shard": str(i % 16)},
            "annotations": {"bench.kubeloop.dev/revision": "7d9f5c6b8"},
        },
        "spec": {
            "schedulerName": _NO_SCHEDULER,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example/bench/web:1.27.3",
                    "args": ["--listen=:8080", "--metrics=:9090", "--log-format=json"],
                    "env": [
                        {"name": "POOL", "value": f"pool-{i % 16}"},
                        {"name": "REGION", "value": "eu-west-1"},
                        {"name": "LOG_LEVEL", "value": "info"},
                    ],
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "metrics", "containerPort": 9090},
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                }
            ],
        },
    }


async def populate_pods(client: Client, objects: int) -> str:
    """A fresh namespace holding ``objects`` unscheduled Pods; returns its name."""
    namespace = f"bench-informer-pods-{os.urandom(3).hex()}"
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    with contextlib.suppress(AlreadyExists):
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        await client.create(_SERVICEACCOUNTS, account, namespace)
    gate = asyncio.Semaphore(_POD_CONCURRENCY)

    async def create(i: int) -> None:
        async with gate:
            await client.create(PODS, bench_pod(i), namespace)

    await asyncio.gather(*(create(i) for i in range(objects)))
    return namespace


async def _pod_observer(ctx: Context, namespace: str, objects: int, variant: str) -> dict[str, Any]:
    proc = await _spawn(ctx, namespace, objects, "--pods", variant)
    try:
        async with asyncio.timeout(2 * _observer_timeout(objects)):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"pod observer ({variant}) exited with {proc.returncode}")
    lines = [x for x in out.decode().splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"pod observer ({variant}) printed no JSON result")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def measure_pods(ctx: Context, pods: int) -> dict[str, Any]:
    """Bytes per cached Pod, whole and metadata-only, each synced in its own process."""
    async with Client.from_kubeconfig(ctx.kubeconfig) as client:
        ctx.log(f"informer_scale: creating {pods} Pods (not measured)")
        namespace = await populate_pods(client, pods)
    cleanup_error = None
    try:
        full = await _pod_observer(ctx, namespace, pods, "full")
        meta = await _pod_observer(ctx, namespace, pods, "metadata")
    finally:
        ctx.log(f"informer_scale: deleting the {pods} Pods (not measured)")
        try:
            await delete_all(str(ctx.kubeconfig), namespace, resource=PODS)
        except (KubeloopError, RuntimeError, TimeoutError) as err:
            cleanup_error = f"{type(err).__name__}: {str(err)[:200]}"
            ctx.log(f"informer_scale: Pod clean-up failed ({cleanup_error}); continuing")

    def per_object(out: dict[str, Any]) -> float:
        return rounded(out["rss_delta_mib"] * 1024 * 1024 / max(1, out["cached"]))

    full_b, meta_b = per_object(full), per_object(meta)
    return {
        "namespace": namespace,
        "objects": pods,
        "full_cached": full["cached"],
        "metadata_only_cached": meta["cached"],
        "full_kinds": full["kinds"],
        "metadata_only_kinds": meta["kinds"],
        "full_bytes_per_cached_object": full_b,
        "metadata_only_bytes_per_cached_object": meta_b,
        "full_json_bytes_per_object": rounded(full["json_bytes_per_object"]),
        "metadata_only_json_bytes_per_object": rounded(meta["json_bytes_per_object"]),
        "full_sync_s": rounded(full["sync_s"]),
        "metadata_only_sync_s": rounded(meta["sync_s"]),
        "metadata_only_over_full": rounded(meta_b / full_b) if full_b > 0 else None,
        "cleaned_up": cleanup_error is None,
        "cleanup_error": cleanup_error,
    }


def _ms(seconds: float) -> float:
    return rounded(seconds * 1000)


async def run(ctx: Context) -> BenchResult:
    objects = int(ctx.param("objects", FULL["objects"], QUICK["objects"]))
    updates = int(ctx.param("updates", FULL["updates"], QUICK["updates"]))
    concurrency = int(
        ctx.param("patch_concurrency", FULL["patch_concurrency"], QUICK["patch_concurrency"])
    )
    async with Client.from_kubeconfig(ctx.kubeconfig) as client:
        await install_crd(client)
        ctx.log(f"informer_scale: creating {objects} objects (not measured)")
        t = time.perf_counter()
        namespace = await populate(client, "bench-informer", objects)
        ctx.log(f"informer_scale: created in {time.perf_counter() - t:.1f} s; observing")
    cleanup_error = None
    pods = int(ctx.param("pods", objects, objects))
    try:
        out, patched = await _observer(ctx, namespace, objects, updates, concurrency)
    finally:
        # page by page, retried, until a LIST finds none (bench/throughput.py's delete_all)
        ctx.log(f"informer_scale: deleting the {objects} objects (not measured)")
        t = time.perf_counter()
        try:
            deleted = await delete_all(str(ctx.kubeconfig), namespace)
            ctx.log(f"informer_scale: {deleted} deleted in {time.perf_counter() - t:.1f} s")
        except (KubeloopError, RuntimeError, TimeoutError) as err:
            # the figures are measured already: report them, and say the clean-up failed
            cleanup_error = f"{type(err).__name__}: {str(err)[:200]}"
            ctx.log(f"informer_scale: clean-up failed ({cleanup_error}); continuing")
    # Pods, whole and metadata-only (issue 23): after the Samples are gone, so the
    # apiserver and etcd hold one population at a time
    pod_memory = await measure_pods(ctx, pods) if pods > 0 else None

    # delivery lag per patch: event received by the handler minus the patch's response
    # (both CLOCK_MONOTONIC, which is system-wide on Linux); negative when the watch wins
    answered: dict[str, float] = patched["answered"]
    got = {rv: t for rv, t in out["received"]}
    lags = [got[rv] - t for rv, t in answered.items() if rv in got]
    missing = sum(1 for rv in answered if rv not in got)
    times = sorted(got.values())
    absorb_window = times[-1] - times[0] if len(times) >= 2 else 0.0
    write_window = patched["end"] - patched["start"]
    cached = out["cached"]
    rss_delta = out["rss_after_sync_mib"] - out["rss_before_mib"]
    per_event_cpu = out["burst_cpu_s"] / max(1, out["updates_received"])
    sync_stall, burst_stall = out["sync_stall"], out["burst_stall"]
    figures: dict[str, Any] = {
        "sync_s": rounded(out["sync_s"]),
        "sync_objects_per_s": rounded(cached / out["sync_s"]),
        "sync_cpu_s": rounded(out["sync_cpu_s"]),
        "cached": cached,
        "added_events": out["added_events"],
        "list_pages": -(-objects // out["page_size"]),
        "rss_before_mib": rounded(out["rss_before_mib"]),
        "rss_after_sync_mib": rounded(out["rss_after_sync_mib"]),
        "rss_delta_mib": rounded(rss_delta),
        "bytes_per_cached_object": rounded(rss_delta * 1024 * 1024 / max(1, cached)),
        "json_bytes_per_object": rounded(out["json_bytes_per_object"]),
        "peak_rss_after_sync_mib": rounded(out["peak_rss_after_sync_mib"]),
        "sync_longest_stall_ms": rounded(sync_stall["longest_ms"]),
        "sync_longest_stall_cpu_ms": rounded(sync_stall["longest_cpu_any_gap_ms"]),
        "sync_stall": {k: rounded(v) if isinstance(v, float) else v for k, v in sync_stall.items()},
        "updates_sent": len(answered),
        "updates_received": out["updates_received"],
        "updates_missing": missing,
        "write_s": rounded(write_window),
        "writes_per_s": rounded(len(answered) / write_window) if write_window else 0.0,
        "absorbed_per_s": rounded(len(times) / absorb_window) if absorb_window else 0.0,
        "lag_p50_ms": _ms(statistics.median(lags)) if lags else None,
        "lag_p99_ms": _ms(statistics.quantiles(lags, n=100)[98]) if len(lags) >= 2 else None,
        "lag_max_ms": _ms(max(lags)) if lags else None,
        "last_event_after_last_answer_ms": _ms(times[-1] - patched["end"]) if times else None,
        "burst_cpu_s": rounded(out["burst_cpu_s"]),
        "cpu_us_per_event": rounded(per_event_cpu * 1e6),
        "cpu_bound_events_per_s": rounded(1 / per_event_cpu) if per_event_cpu else 0.0,
        "burst_longest_stall_ms": rounded(burst_stall["longest_ms"]),
        "burst_longest_stall_cpu_ms": rounded(burst_stall["longest_cpu_any_gap_ms"]),
        "burst_stall": {
            k: rounded(v) if isinstance(v, float) else v for k, v in burst_stall.items()
        },
        "rv_mismatches": out["rv_mismatches"],
        "relists": out["relists"],
        "kept_up": out["rv_mismatches"] == 0 and missing == 0,
        "peak_rss_mib": rounded(out["peak_rss_mib"]),
        "cleaned_up": cleanup_error is None,
        "cleanup_error": cleanup_error,
        "standby": {
            "objects": out["standby"]["objects"],
            "updates": out["standby"]["updates"],
            "reconciles": out["standby"]["reconciles"],
            "pending_requests": out["standby"]["pending"],
            "loop_detector_bytes": out["standby"]["detector_bytes"],
            "loop_detector_bytes_per_object": rounded(
                out["standby"]["detector_bytes"] / max(1, out["standby"]["objects"])
            ),
            "loop_detector_decoded_objects": out["standby"]["detector_api_objects"],
            "rss_delta_mib": rounded(out["standby"]["rss_delta_mib"]),
        },
        "pods": pod_memory,
    }
    ctx.log(
        f"informer_scale: sync {figures['sync_s']} s, {figures['bytes_per_cached_object']:.0f} "
        f"B/object, longest stall {figures['sync_longest_stall_ms']} ms, absorbed "
        f"{figures['absorbed_per_s']:.0f} events/s (writes {figures['writes_per_s']:.0f}/s), "
        f"kept up: {figures['kept_up']}"
    )
    return {
        "name": "informer_scale",
        "params": {
            "objects": objects,
            "namespace": namespace,
            "updates": updates,
            "patch_concurrency": concurrency,
            "page_size": out["page_size"],
            "transform": (
                "compact (bench opt-in: managedFields stripped, strings interned)"
                if ctx.param("compact", 0, 0)
                else "strip_managed_fields (default)"
            ),
            "stall_ticker_ms": 1,
            "stall_budget_ms": STALL_BUDGET_MS,
            "memory": "RSS delta across the sync, after gc.collect(), divided by cached objects",
            "pods": pods,
        },
        "figures": {
            **figures,
            "targets": {
                "bytes_per_object_at_most_1536": figures["bytes_per_cached_object"]
                <= MEMORY_TARGET_BYTES,
                "no_sync_stall_over_50ms": figures["sync_longest_stall_ms"] <= STALL_TARGET_MS,
            },
        },
        "ratios": {
            "absorbed_over_written": rounded(figures["absorbed_per_s"] / figures["writes_per_s"])
            if figures["writes_per_s"]
            else 0.0,
            "memory_over_json": rounded(
                figures["bytes_per_cached_object"] / figures["json_bytes_per_object"]
            ),
            "sync_stall_over_budget": rounded(sync_stall["longest_ms"] / STALL_BUDGET_MS),
        },
    }


def markdown(result: BenchResult) -> str:
    p, f, r = result["params"], result["figures"], result["ratios"]
    s = f["sync_stall"]
    rows = [
        "| figure | value |",
        "| --- | ---: |",
        f"| initial sync (`cache.start()` to `wait_for_sync`) | **{f['sync_s']} s** "
        f"({f['sync_objects_per_s']:.0f} objects/s, {f['list_pages']} LIST pages) |",
        f"| CPU during the sync | {f['sync_cpu_s']} s |",
        f"| RSS before / after the sync | {f['rss_before_mib']:.1f} / "
        f"{f['rss_after_sync_mib']:.1f} MiB |",
        f"| memory per cached object (RSS delta / objects) | **{f['bytes_per_cached_object']:.0f}"
        f" B** ({r['memory_over_json']:.1f}x its {f['json_bytes_per_object']:.0f} B of JSON) |",
        f"| longest event-loop stall during the sync (wall) | **{f['sync_longest_stall_ms']} ms** "
        f"({s['longest_cpu_ms']} ms of it this process's CPU; p99 gap {s['p99_ms']} ms; "
        f"{s['over_10ms']} gaps > 10 ms, {s['over_50ms']} > 50 ms) |",
        f"| most CPU this process spent within any one gap during the sync "
        f"| {f['sync_longest_stall_cpu_ms']} ms |",
        f"| updates written (merge patches, {p['patch_concurrency']} connections) "
        f"| {f['updates_sent']} in {f['write_s']} s ({f['writes_per_s']:.0f}/s) |",
        f"| update events absorbed by the handler | **{f['absorbed_per_s']:.0f}/s** "
        f"({f['updates_received']} received, {f['updates_missing']} missing) |",
        f"| delivery lag (event received - patch answered) p50 / p99 / max "
        f"| {f['lag_p50_ms']} / {f['lag_p99_ms']} / {f['lag_max_ms']} ms |",
        f"| observer CPU per update event | {f['cpu_us_per_event']} µs "
        f"(CPU-bound ceiling {f['cpu_bound_events_per_s']:.0f} events/s) |",
        f"| longest event-loop stall during the burst (wall / most CPU in a gap) "
        f"| {f['burst_longest_stall_ms']} / {f['burst_longest_stall_cpu_ms']} ms |",
        f"| cache kept up (every cached resourceVersion = the server's, no event missing) "
        f"| {'yes' if f['kept_up'] else '**no**'} ({f['rv_mismatches']} mismatches) |",
        f"| standby (not leader, workers never start): loop detector's tables after "
        f"{f['standby']['objects']} objects and {f['standby']['updates']} updates "
        f"| **{f['standby']['loop_detector_bytes_per_object']:.0f} B/object** "
        f"({f['standby']['loop_detector_bytes'] / 1048576:.1f} MiB, "
        f"{f['standby']['loop_detector_decoded_objects']} decoded objects kept; RSS delta of "
        f"the standby manager, its own cache included: {f['standby']['rss_delta_mib']} MiB) |",
    ]
    pods = f.get("pods")
    if pods:
        ratio = pods["metadata_only_over_full"]
        rows += [
            f"| {pods['objects']} unscheduled Pods, whole: memory per cached Pod "
            f"| **{pods['full_bytes_per_cached_object']:.0f} B** "
            f"({pods['full_json_bytes_per_object']:.0f} B of JSON each) |",
            f"| the same Pods, metadata only (`PartialObjectMetadata`) "
            f"| **{pods['metadata_only_bytes_per_cached_object']:.0f} B** "
            f"({pods['metadata_only_json_bytes_per_object']:.0f} B of JSON each"
            + (f"; {ratio:.2f}x the whole Pod's memory" if ratio is not None else "")
            + ") |",
        ]
    over = f["sync_longest_stall_ms"] > p["stall_budget_ms"]
    return "\n".join(
        [
            f"{p['objects']} objects, {p['updates']} updates, LIST page size {p['page_size']}, "
            f"managedFields stripped (the default transform).",
            "",
            *rows,
            "",
            (
                f"The longest stall exceeds the {p['stall_budget_ms']:.0f} ms budget."
                if over
                else f"The longest stall is within the {p['stall_budget_ms']:.0f} ms budget."
            ),
            "",
            "Targets (reported, not asserted): at most "
            f"{MEMORY_TARGET_BYTES} B per cached object: "
            f"{'met' if f['bytes_per_cached_object'] <= MEMORY_TARGET_BYTES else 'missed'} "
            f"({f['bytes_per_cached_object']:.0f} B); no stall over {STALL_TARGET_MS:.0f} ms "
            "during the sync: "
            f"{'met' if f['sync_longest_stall_ms'] <= STALL_TARGET_MS else 'missed'} "
            f"({f['sync_longest_stall_ms']} ms).",
        ]
    )


BENCHMARK = Benchmark(
    name="informer_scale",
    title="informer_scale: a big cache (sync, memory, event rate, stalls)",
    description=(
        "N `Sample` objects are created in a fresh namespace (concurrent creates, **not** "
        "measured). The observer runs in its own process (`python -m bench.informer_scale`): "
        "it opens its connection, takes its RSS after `gc.collect()`, then starts a "
        "`kubeloop.Cache` with one informer for the namespace (default `ReflectorOptions`: "
        "LIST pages of 500, managedFields stripped) and a handler, and waits for "
        "`wait_for_sync`. Meanwhile a ticker task sleeping 1 ms in a loop records the gaps "
        "between its wake-ups; the longest gap is the longest time the event loop was blocked. "
        "Memory per cached object is the RSS delta across the sync (after `gc.collect()`) "
        "divided by the objects cached: it includes allocator slack and the informer's "
        "bookkeeping, not only the dicts (no `tracemalloc`, which would slow the sync). Then "
        "the harness patches K objects (a changing annotation, round robin) from plain aiohttp "
        "with C connections as fast as the apiserver takes them, and the observer's handler "
        "counts the update events; absorbed/s is events over the time from the first to the "
        "last received, so it cannot exceed the rate the writes happen at; the observer's CPU "
        "per event gives its own ceiling. Delivery lag compares each patch's response time in "
        "the harness with the time its event reached the handler (CLOCK_MONOTONIC, shared by "
        "the processes). Finally a live LIST checks that every cached resourceVersion is the "
        "server's. The objects are deleted afterwards, one deletecollection of 2,000 at a time "
        "(retried on a 5xx or timeout), until a LIST finds none. Then as many Pods (param "
        "`pods`; one container with env, ports, resources and a probe; a scheduler name no "
        "scheduler serves, so they stay Pending and nobody writes their status) are created "
        "in another namespace, and two more observer processes each sync one informer of "
        "them: whole Pods, and metadata only (`PartialObjectMetadata`, the `Accept` header "
        "of `for_`/`owns`/`watches(..., metadata_only=True)`); memory per cached Pod is "
        "measured as above. At a few hundred objects the RSS delta is mostly fixed costs; "
        "the per-object figures mean something from some ten thousand on."
    ),
    run=run,
    markdown=markdown,
)


if __name__ == "__main__":
    main()
