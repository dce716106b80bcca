"""kubeloop's benchmark harness.

    bench/run.py [--quick] [--only NAME] [--kubeconfig K] [--write]

Starts its own control plane (etcd + kube-apiserver on loopback; kube-scheduler too when the
``autoscaler`` benchmark runs, as it needs pods scheduled) unless
``--kubeconfig`` names a cluster, runs each benchmark, prints one JSON line per benchmark
on stdout (``name``, ``params``, ``figures``, ``ratios``; progress goes to stderr), and with
``--write`` updates ``docs/benchmarks.md``: the machine, the date and the exact command, and
a table per benchmark. ``--quick`` uses smaller sizes (about 10 minutes at most on 2 cores);
``--objects``/``--repeats`` override a benchmark's sizes (the smoke test runs a tiny case).
Benchmarks are not part of ``make test``; ``make bench`` runs the full set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import traceback
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if not __package__:  # run as a script (bench/run.py): make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (
    ROOT,
    Benchmark,
    BenchResult,
    Context,
    autoscaler_scenarios,
    informer_scale,
    karpenter,
    kopf_compare,
    loop,
    metrics_cost,
    packing,
    scale,
    throughput,
    workers,
)
from bench._real_cluster import real_cluster_timing
from kubeloop import Client
from kubeloop.envtest import SCHEDULER_SCORINGS, ControlPlane, ControlPlaneOptions, find_assets

#: Every benchmark, in the order they run and appear in the docs.
BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        throughput.BENCHMARK,
        workers.BENCHMARK,
        loop.BENCHMARK,
        informer_scale.BENCHMARK,
        autoscaler_scenarios.BENCHMARK,
        packing.BENCHMARK,
        scale.BENCHMARK,
        karpenter.BENCHMARK,
        kopf_compare.BENCHMARK,
        metrics_cost.BENCHMARK,
    )
}

DOCS = ROOT / "docs" / "benchmarks.md"
RUN_BEGIN, RUN_END = "<!-- bench:run:begin -->", "<!-- bench:run:end -->"

SKELETON = f"""# Benchmarks

Speed is measured here, never asserted in tests. Everything between `<!-- bench:... -->`
markers is written by the harness; the rest of this file (such as the "what limits it" notes)
is kept by every `--write`.

```bash
make bench                                  # the full set; updates this file
.venv/bin/python bench/run.py --quick       # smaller sizes, about 10 minutes at most on 2 cores
.venv/bin/python bench/run.py --only NAME --kubeconfig K --write
```

Each benchmark prints one JSON line (`name`, `params`, `figures`, `ratios`). Without
`--kubeconfig` the harness starts its own control plane (etcd and kube-apiserver on loopback,
on the same machine as the clients it measures, so they compete for its cores).

## Last run

{RUN_BEGIN}
{RUN_END}
"""


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


# -- the machine ---------------------------------------------------------------------------


def _proc_field(path: str, key: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    return None


def machine(
    apiserver: str, etcd: str | None, own_control_plane: bool | None, *, per_benchmark: bool = False
) -> dict[str, Any]:
    """What the figures depend on, for the docs header (``own_control_plane`` None: the run
    needed no shared cluster; ``per_benchmark``: a benchmark of it starts its own)."""
    mem_kib = _proc_field("/proc/meminfo", "MemTotal") or "0 kB"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "memory_gib": round(int(mem_kib.split()[0]) / 1024 / 1024, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "kubeloop": importlib.metadata.version("kubeloop"),
        "aiohttp": importlib.metadata.version("aiohttp"),
        "apiserver": apiserver,
        "etcd": etcd,
        "load_before": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "commit": git_commit(),
        "control_plane": (
            "started by each benchmark that needs one, on loopback, same machine"
            if own_control_plane is None and per_benchmark
            else "none (no benchmark of this run needs one)"
            if own_control_plane is None
            else "started by the harness on loopback, same machine (etcd --unsafe-no-fsync)"
            if own_control_plane
            else "given by --kubeconfig"
        ),
    }


def _own_cluster_versions(names: list[str]) -> tuple[str, str]:
    """The header's kube-apiserver and etcd for a run with no shared cluster: "none", or,
    when a benchmark of it starts its own control planes, the binaries' versions."""
    if not any(BENCHMARKS[n].starts_own_cluster for n in names):
        return "none (no cluster needed)", "none"
    assets = find_assets()
    versions = []
    for binary in (assets.kube_apiserver, assets.etcd):
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, check=False
        ).stdout
        words = out.split()
        versions.append(next((w for w in words if w[:1] == "v" or w[:1].isdigit()), "unknown"))
    own = "started by the benchmark (one control plane per side)"
    return f"{versions[0]}, {own}", f"{versions[1]}, {own}"


def _etcd_version(url: str) -> str | None:
    with (
        contextlib.suppress(OSError, ValueError),
        urllib.request.urlopen(f"{url}/version", timeout=5) as resp,
    ):
        return str(json.loads(resp.read()).get("etcdserver"))
    return None


async def _apiserver_version(kubeconfig: Path) -> str:
    async with Client.from_kubeconfig(kubeconfig) as client:
        return str((await client.server_version()).get("gitVersion", "unknown"))


def git_commit() -> str:
    """The commit measured, ``+dirty`` when the work tree differs from it (tied to the figures)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}+dirty" if dirty else sha


def command_line() -> str:
    """The command that ran this, as typed from the repository root."""

    def rel(path: str) -> str:
        p = Path(path).absolute()
        with contextlib.suppress(ValueError):
            return str(p.relative_to(Path.cwd()))
        return str(p)

    return shlex.join([rel(sys.executable), rel(sys.argv[0]), *sys.argv[1:]])


# -- docs/benchmarks.md ------------------------------------------------------------------


def _replace_block(text: str, begin: str, end: str, body: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def _machine_line(m: dict[str, Any]) -> str:
    return (
        f"{m['cores']} cores, {m['memory_gib']} GiB, Python {m['python'].split()[0]}, "
        f"kube-apiserver {m['apiserver']}"
    )


def run_header(m: dict[str, Any], date: str, command: str, quick: bool) -> str:
    cores = f"{m['cores']}" + (
        f" ({m['usable_cores']} usable)" if m["usable_cores"] not in (None, m["cores"]) else ""
    )
    rows = [
        ("date", date),
        ("commit", f"`{m['commit']}`"),
        ("command", f"`{command}`"),
        ("sizes", "quick (`--quick`)" if quick else "full"),
        ("cores", f"{cores}: {m['cpu']}"),
        ("memory", f"{m['memory_gib']} GiB"),
        ("OS", m["os"]),
        ("Python", m["python"]),
        ("kube-apiserver", m["apiserver"]),
        ("etcd", m["etcd"] or "unknown"),
        ("kubeloop / aiohttp", f"{m['kubeloop']} / {m['aiohttp']}"),
        ("control plane", m["control_plane"]),
        ("load average before the run (1/5/15 min)", m["load_before"]),
    ]
    return "\n".join(["| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows)])


def update_docs(
    path: Path, results: list[BenchResult], m: dict[str, Any], date: str, command: str, quick: bool
) -> None:
    """Rewrite the run header and each measured benchmark's block; keep everything else."""
    text = path.read_text() if path.exists() else SKELETON
    if RUN_BEGIN not in text:
        text = text.rstrip("\n") + f"\n\n## Last run\n\n{RUN_BEGIN}\n{RUN_END}\n"
    text = _replace_block(text, RUN_BEGIN, RUN_END, run_header(m, date, command, quick))
    for result in results:
        bench = BENCHMARKS[result["name"]]
        begin, end = _markers(bench.name)
        body = (
            f"{bench.description}\n\n"
            f"_Measured {date} at commit `{result['params'].get('commit', m['commit'])}` "
            f"with `{command}`"
            f"{' (quick sizes)' if quick else ''}; {_machine_line(m)}._\n\n"
            f"{bench.markdown(result)}"
        )
        if begin in text and end in text:
            text = _replace_block(text, begin, end, body)
        else:
            text = text.rstrip("\n") + f"\n\n## {bench.title}\n\n{begin}\n{body}\n{end}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# -- running -----------------------------------------------------------------------------


@contextlib.contextmanager
def cluster(
    kubeconfig: str | None,
    scheduler: bool = False,
    needed: bool = True,
    scoring: str | None = None,
) -> Iterator[tuple[Path | None, ControlPlane | None]]:
    if kubeconfig is not None:
        yield Path(kubeconfig).resolve(), None
        return
    if not needed:
        yield None, None
        return
    parts = "etcd + kube-apiserver" + (
        " + kube-scheduler + kube-controller-manager + kwok" if scheduler else ""
    )
    print(f"[bench] starting a control plane ({parts})", file=sys.stderr)
    # Pods that should run need the full bed: kwok is the Nodes' kubelet and
    # kube-controller-manager their lifecycle (the VMs' kubelets register the Nodes).
    options = ControlPlaneOptions(scheduler=scheduler, controller_manager=scheduler, kwok=scheduler)
    if scheduler:  # the node lifecycle timing of a real cluster (bench._real_cluster)
        options = real_cluster_timing(options)
    if scoring is not None:
        options.scheduler_scoring = scoring
    with ControlPlane(options) as cp:
        yield cp.kubeconfig, cp


async def run_all(
    ctx: Context, names: list[str], commit: str
) -> tuple[list[BenchResult], list[str]]:
    results: list[BenchResult] = []
    failed: list[str] = []
    for name in names:
        ctx.log(f"{name}: starting")
        try:
            result = await BENCHMARKS[name].run(ctx)
        except Exception:
            traceback.print_exc()
            ctx.log(f"{name}: FAILED")
            failed.append(name)
            continue
        result["params"]["commit"] = commit
        print(json.dumps(result), flush=True)
        results.append(result)
    return results, failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description="Run kubeloop's benchmarks (one JSON line each)."
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (<= ~10 min)")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=list(BENCHMARKS),
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting one")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--docs", type=Path, default=DOCS, help=argparse.SUPPRESS)
    parser.add_argument("--objects", type=int, help="override the object count")
    parser.add_argument("--repeats", type=int, help="override the number of repeats")
    parser.add_argument("--scenarios", help="autoscaler: only these scenarios, e.g. S1,S5")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any benchmark parameter (numbers are parsed), e.g. seconds=4",
    )
    parser.add_argument(
        "--scheduler-scoring",
        choices=SCHEDULER_SCORINGS,
        help="kube-scheduler's NodeResourcesFit scoring for the harness's control plane",
    )
    parser.add_argument("--warmup", type=int, help="override the uncounted warm-up passes")
    parser.add_argument(
        "--server-pids",
        default="",
        help="with --kubeconfig: comma-separated apiserver/etcd PIDs, to report their CPU time",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    overrides = {
        k: v
        for k, v in (
            ("objects", args.objects),
            ("repeats", args.repeats),
            ("scenarios", args.scenarios),
            ("warmup", args.warmup),
            ("scheduler_scoring", args.scheduler_scoring),
        )
        if v is not None
    }
    for item in args.param:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"bench/run.py: --param {item!r}: expected KEY=VALUE")
        value: Any = raw
        with contextlib.suppress(ValueError):
            value = float(raw) if "." in raw else int(raw)
        overrides[key] = value
    pids = [int(p) for p in args.server_pids.split(",") if p]
    command = command_line()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    needed = any(BENCHMARKS[n].needs_cluster for n in names)
    scheduler = "autoscaler" in names
    with cluster(
        args.kubeconfig, scheduler=scheduler, needed=needed, scoring=args.scheduler_scoring
    ) as (kubeconfig, cp):
        if kubeconfig is None:  # only benchmarks that need no cluster
            ctx = Context(kubeconfig=Path(), quick=args.quick, overrides=overrides)
            own = any(BENCHMARKS[n].starts_own_cluster for n in names)
            m = machine(*_own_cluster_versions(names), None, per_benchmark=own)
            ctx.log(f"{m['cores']} cores; {command}")
            results, failed = asyncio.run(run_all(ctx, names, m["commit"]))
            if args.write and results:
                update_docs(args.docs, results, m, date, command, args.quick)
                ctx.log(f"wrote {args.docs}")
            return 1 if failed else 0
        ctx = Context(
            kubeconfig=kubeconfig,
            quick=args.quick,
            overrides=overrides,
            server_pids=cp.pids if cp is not None else pids,
        )
        apiserver = asyncio.run(_apiserver_version(kubeconfig))
        m = machine(apiserver, _etcd_version(cp.etcd_url) if cp else None, cp is not None)
        ctx.log(f"{_machine_line(m)}; {command}")
        if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
            ctx.log(f"warning: the machine is busy (load {m['load_before']}); figures will suffer")
        results, failed = asyncio.run(run_all(ctx, names, m["commit"]))
    if args.write and results:
        update_docs(args.docs, results, m, date, command, args.quick)
        ctx.log(f"wrote {args.docs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
