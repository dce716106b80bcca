"""CPU per object of two write-path clients run at the same time, on a shared machine.

On a machine other jobs load, one client measured after another meets another load; run at
the same time, each on its own fresh namespace of N Samples, both meet the same one. Each
side is a child process that reports its own CPU seconds (``bench.throughput`` for kubeloop,
``bench._raw`` for the raw client); a kubeloop side named ``src=DIR`` runs the code of another
checkout (its ``src`` first on ``sys.path``), to compare two commits::

    python -m bench.paired --kubeconfig K --pair after,raw16 \\
        --pair src=/tmp/before/src,after --repeats 5

Sides: ``after`` (this checkout's kubeloop, W=16), ``src=DIR`` (kubeloop from DIR, W=16),
``rawC`` (the raw client with C connections). Prints one line per side and repeat, then
the medians; the first repeat is a warm-up, not counted. Not part of ``bench/run.py``:
docs/benchmarks.md's write-path sections quote it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys

from bench.throughput import install_crd, populate
from kubeloop import Client


async def namespaces(kubeconfig: str, count: int, objects: int) -> list[str]:
    client = Client.from_kubeconfig(kubeconfig)
    try:
        await install_crd(client)
        return [await populate(client, "paired", objects) for _ in range(count)]
    finally:
        await client.close()


def _command(side: str, kubeconfig: str, ns: str, objects: int) -> tuple[dict[str, str], list[str]]:
    env = dict(os.environ)
    if side.startswith("raw"):
        collection = f"/apis/bench.kubeloop.dev/v1/namespaces/{ns}/samples"
        argv = ["-m", "bench._raw", "--kubeconfig", kubeconfig, "--concurrency", side[3:]]
        return env, [sys.executable, *argv, "--collection", collection]
    if side.startswith("src="):
        env["PYTHONPATH"] = os.pathsep.join([side[4:], os.getcwd()])
    elif side != "after":
        raise SystemExit(f"unknown side {side!r}: after, src=DIR or rawC")
    argv = ["-m", "bench.throughput", "--kubeconfig", kubeconfig, "--namespace", ns]
    return env, [sys.executable, *argv, "--objects", str(objects), "--workers", "16"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--pair", action="append", required=True, help="two sides, comma-separated")
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    pairs = [tuple(pair.split(",")) for pair in args.pair]
    cpu: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats + 1):
        for pair in pairs:
            spaces = asyncio.run(namespaces(args.kubeconfig, len(pair), args.objects))
            running = []
            for side, ns in zip(pair, spaces, strict=True):
                env, argv = _command(side, args.kubeconfig, ns, args.objects)
                running.append((side, subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)))
            for side, proc in running:
                out, _ = proc.communicate()
                if proc.returncode:
                    raise SystemExit(f"{side} failed with exit code {proc.returncode}")
                result = json.loads(out.decode().strip().splitlines()[-1])
                ms = result["cpu_s"] / args.objects * 1000
                rate = args.objects / result["seconds"]
                print(f"{repeat} {'+'.join(pair)} {side}: {ms:.3f} ms/object, {rate:.0f}/s")
                if repeat:  # the first is a warm-up
                    cpu.setdefault(("+".join(pair), side), []).append(ms)
    for (name, side), values in cpu.items():
        runs = ", ".join(f"{v:.3f}" for v in values)
        print(f"{name} {side}: median {statistics.median(values):.3f} ms/object ({runs})")


if __name__ == "__main__":
    main()
