"""What receiving the watch of one's own writes costs, beside the writes themselves.

Every informer-based controller gets the watch event of each of its writes back: the raw
client (``bench._raw``) does not. This measures that share alone, so the write path's
target (kubeloop's CPU per object against the raw client's, ``docs/benchmarks.md``) can be
set against what no informer avoids. Per repeat, on a fresh namespace of N Samples:

* the watcher (this module's ``--watch`` child): kubeloop's ``Client`` lists the namespace
  and watches it from the list's version (TLS, HTTP chunks, line splitting, one msgspec
  decode per event; no store, no handlers, no queue), reporting its CPU from the first
  event to the N-th MODIFIED;
* meanwhile ``bench._raw`` writes every Sample's status, 16 at a time, reporting its CPU;
* and, on another fresh namespace, ``bench._raw`` the same writes with nobody watching.

Prints per repeat both clients' CPU, the watcher's as a share of the raw client's, and the
apiserver+etcd CPU per object with and without the watcher: the difference is what the
server spends sending the watch, which no informer-based controller avoids and the raw
limit does not pay (the throughput block's apiserver CPU, kubeloop against raw). The server
is every ``kube-apiserver`` and ``etcd`` process on the machine (one control plane, as
``bench/run.py`` starts it), or ``--server-pids``. The first repeat is a warm-up, not
counted. Not part of ``bench/run.py``::

    python -m bench.watch_floor --kubeconfig K --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from bench import process_cpu_seconds
from bench.paired import namespaces
from bench.throughput import SAMPLES
from kubeloop import Client


def _cpu() -> float:
    now = resource.getrusage(resource.RUSAGE_SELF)
    return now.ru_utime + now.ru_stime


async def watch(kubeconfig: str, namespace: str, objects: int) -> dict[str, float]:
    """Watch ``namespace``'s Samples until ``objects`` MODIFIED events have arrived."""
    async with Client.from_kubeconfig(kubeconfig) as client:
        _, version = await client.list_all(SAMPLES, namespace)
        print("watching", flush=True)  # the parent starts the writes now
        seen, start = 0, None
        async for event in client.watch(
            SAMPLES, namespace, resource_version=version, timeout_seconds=300
        ):
            if start is None:
                start = _cpu()
            if event.type == "MODIFIED":
                seen += 1
                if seen >= objects:
                    break
        return {"events": seen, "cpu_s": _cpu() - (start or _cpu())}


def server_processes() -> list[int]:
    """The pids of every kube-apiserver and etcd on the machine."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in ("kube-apiserver", "etcd"):
                pids.append(int(comm.parent.name))
        except OSError:
            continue  # gone meanwhile
    return pids


def _raw(kubeconfig: str, namespace: str) -> dict[str, float]:
    collection = f"/apis/{SAMPLES.group}/{SAMPLES.version}/namespaces/{namespace}/samples"
    done = subprocess.run(
        [sys.executable, "-m", "bench._raw", "--kubeconfig", kubeconfig, "--concurrency", "16",
         "--collection", collection],
        capture_output=True,
        text=True,
        check=True,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _unwatched(kubeconfig: str, namespace: str, server: list[int]) -> float:
    """The raw writes on ``namespace`` with nobody watching: the server's CPU."""
    before = process_cpu_seconds(server)
    _raw(kubeconfig, namespace)
    return process_cpu_seconds(server) - before


def _watched(
    kubeconfig: str, namespace: str, objects: int, server: list[int]
) -> tuple[dict[str, float], dict[str, float], float]:
    """The raw writes on ``namespace`` while the watcher child watches it: the raw client's
    figures, the watcher's, and the server's CPU from the first write to the last event."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "bench.watch_floor", "--kubeconfig", kubeconfig,
         "--watch", namespace, "--objects", str(objects)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert watcher.stdout is not None
    if watcher.stdout.readline().strip() != "watching":
        raise SystemExit("the watcher did not start")
    before = process_cpu_seconds(server)
    wrote = _raw(kubeconfig, namespace)
    out, _ = watcher.communicate(timeout=300)
    return wrote, json.loads(out.strip().splitlines()[-1]), process_cpu_seconds(server) - before


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--server-pids", help="apiserver and etcd pids, comma-separated")
    p.add_argument("--watch", metavar="NAMESPACE", help=argparse.SUPPRESS)  # the child
    args = p.parse_args()
    if args.watch:
        print(json.dumps(asyncio.run(watch(args.kubeconfig, args.watch, args.objects))))
        return
    server = (
        [int(pid) for pid in args.server_pids.split(",")]
        if args.server_pids
        else server_processes()
    )
    if not server:
        raise SystemExit("no kube-apiserver or etcd process found: give --server-pids")
    shares: list[float] = []
    extra: list[float] = []
    n = args.objects
    for repeat in range(args.repeats + 1):
        alone, ns = asyncio.run(namespaces(args.kubeconfig, 2, args.objects))
        # in turn first and second, so the machine's drift does not pass for the watch's cost
        if repeat % 2:
            server_alone = _unwatched(args.kubeconfig, alone, server)
            wrote, seen, server_watched = _watched(args.kubeconfig, ns, n, server)
        else:
            wrote, seen, server_watched = _watched(args.kubeconfig, ns, n, server)
            server_alone = _unwatched(args.kubeconfig, alone, server)
        share = seen["cpu_s"] / wrote["cpu_s"]
        cost = (server_watched - server_alone) / n * 1000
        print(
            f"{repeat} raw16 {wrote['cpu_s'] / n * 1000:.3f} ms/object, watcher "
            f"{seen['cpu_s'] / n * 1000:.3f} ms/event ({seen['events']}): {share:.2f} of raw; "
            f"apiserver+etcd {server_alone / n * 1000:.3f} ms/object unwatched, "
            f"{server_watched / n * 1000:.3f} watched: the watch {cost:+.3f}"
        )
        if repeat:  # the first is a warm-up
            shares.append(share)
            extra.append(cost)
    print(f"watcher / raw16, median of {len(shares)}: {statistics.median(shares):.2f}")
    print(
        f"apiserver+etcd CPU of sending the watch, ms per object, median of {len(extra)}: "
        f"{statistics.median(extra):.3f}"
    )


if __name__ == "__main__":
    main()
