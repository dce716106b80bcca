"""What receiving the watch of one's own writes costs, beside the writes themselves.

Every informer-based controller gets the watch event of each of its writes back: the raw
client (``bench._raw``) does not. This measures that share alone, so the write path's
target (kubeloop's CPU per object against the raw client's, ``docs/benchmarks.md``) can be
set against what no informer avoids. Per repeat, on a fresh namespace of N Samples:

* the watcher (this module's ``--watch`` child): kubeloop's ``Client`` lists the namespace
  and watches it from the list's version (TLS, HTTP chunks, line splitting, one msgspec
  decode per event; no store, no handlers, no queue), reporting its CPU from the first
  event to the N-th MODIFIED;
* meanwhile ``bench._raw`` writes every Sample's status, 16 at a time, reporting its CPU.

Prints both per repeat and the watcher's CPU as a share of the raw client's; the first
repeat is a warm-up, not counted. Not part of ``bench/run.py``::

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--watch", metavar="NAMESPACE", help=argparse.SUPPRESS)  # the child
    args = p.parse_args()
    if args.watch:
        print(json.dumps(asyncio.run(watch(args.kubeconfig, args.watch, args.objects))))
        return
    shares: list[float] = []
    for repeat in range(args.repeats + 1):
        (ns,) = asyncio.run(namespaces(args.kubeconfig, 1, args.objects))
        common = ["--kubeconfig", args.kubeconfig]
        watcher = subprocess.Popen(
            [sys.executable, "-m", "bench.watch_floor", *common, "--watch", ns,
             "--objects", str(args.objects)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert watcher.stdout is not None
        if watcher.stdout.readline().strip() != "watching":
            raise SystemExit("the watcher did not start")
        collection = f"/apis/{SAMPLES.group}/{SAMPLES.version}/namespaces/{ns}/samples"
        raw = subprocess.run(
            [sys.executable, "-m", "bench._raw", *common, "--concurrency", "16",
             "--collection", collection],
            capture_output=True,
            text=True,
            check=True,
        )  # fmt: skip
        out, _ = watcher.communicate(timeout=300)
        seen = json.loads(out.strip().splitlines()[-1])
        wrote = json.loads(raw.stdout.strip().splitlines()[-1])
        share = seen["cpu_s"] / wrote["cpu_s"]
        n = args.objects
        print(
            f"{repeat} raw16 {wrote['cpu_s'] / n * 1000:.3f} ms/object, watcher "
            f"{seen['cpu_s'] / n * 1000:.3f} ms/event ({seen['events']}): {share:.2f} of raw"
        )
        if repeat:  # the first is a warm-up
            shares.append(share)
    print(f"watcher / raw16, median of {len(shares)}: {statistics.median(shares):.2f}")


if __name__ == "__main__":
    main()
