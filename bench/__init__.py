"""kubeloop's benchmarks: what a benchmark module provides, and the helpers they share.

``bench/run.py`` is the harness (CLI, control plane, JSON lines, ``docs/benchmarks.md``).
A benchmark is a module that defines ``BENCHMARK``, a :class:`Benchmark`, and is listed in
the harness's registry. Anything whose CPU or memory is measured runs in a child process
(:func:`run_child`), so the figures belong to that process alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

#: The repository root: children run ``python -m bench.<module>`` with it on ``sys.path``.
ROOT = Path(__file__).resolve().parent.parent


class BenchResult(TypedDict):
    """One benchmark's outcome: exactly what its JSON line holds."""

    name: str
    params: dict[str, Any]
    figures: dict[str, Any]
    ratios: dict[str, float]


@dataclass
class Context:
    """What the harness hands to a benchmark."""

    #: Admin kubeconfig of the cluster to measure.
    kubeconfig: Path
    #: Smaller sizes (``--quick``).
    quick: bool = False
    #: Command-line overrides of benchmark parameters (e.g. ``{"objects": 20}``).
    overrides: dict[str, Any] = field(default_factory=dict)
    #: PIDs of kube-apiserver and etcd when the harness started them (for their CPU time);
    #: empty for ``--kubeconfig``.
    server_pids: list[int] = field(default_factory=list)

    def param(self, key: str, full: Any, quick: Any) -> Any:
        """A parameter: the override if given, else the quick or full default."""
        if key in self.overrides:
            return self.overrides[key]
        return quick if self.quick else full

    def log(self, message: str) -> None:
        """Progress, on stderr (stdout carries only the JSON lines)."""
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark."""

    name: str
    #: Section heading in ``docs/benchmarks.md``.
    title: str
    #: What is measured and how (Markdown; goes under the heading).
    description: str
    run: Callable[[Context], Awaitable[BenchResult]]
    #: The result as Markdown (a table, and a line or two of context).
    markdown: Callable[[BenchResult], str]
    #: Whether it measures a cluster; the harness starts no control plane for a run of only
    #: benchmarks that do not (``packing`` is pure computation).
    needs_cluster: bool = True
    #: Whether it starts control planes of its own (``karpenter``: one per side), which
    #: the run header then names instead of "no cluster".
    starts_own_cluster: bool = False


@dataclass(frozen=True)
class ChildResult:
    """A child process's last JSON line, and what the kernel says it used."""

    output: dict[str, Any]
    #: user + system CPU seconds of the whole process (start-up included), from ``wait4``.
    cpu_s: float
    wall_s: float


class ChildError(RuntimeError):
    pass


def run_child(module: str, args: Sequence[str], timeout: float) -> ChildResult:
    """Run ``python -m <module> <args>`` and wait for it (blocking: use ``asyncio.to_thread``).

    The child's stderr is passed through; its stdout must end with a JSON line.
    CPU time comes from ``wait4`` on that one child. Peak RSS is for the child to
    report itself (:func:`peak_rss_mib`): the kernel's ``ru_maxrss`` of a child
    includes the parent's size before the exec.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args], stdout=subprocess.PIPE, env=env, cwd=ROOT
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if code != 0:
        raise ChildError(f"{module} {' '.join(args)} exited with {code} after {wall:.1f}s")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise ChildError(f"{module} printed no JSON result")
    return ChildResult(
        output=json.loads(lines[-1]),
        cpu_s=usage.ru_utime + usage.ru_stime,
        wall_s=wall,
    )


def peak_rss_mib() -> float:
    """This process's peak resident set size in MiB (``VmHWM``).

    Not ``ru_maxrss``: Linux carries it across ``exec``, so a child's value would
    include its parent's size before the exec (subprocess spawns via vfork).
    """
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_cpu_seconds(pids: Sequence[int]) -> float:
    """user + system CPU seconds used so far by ``pids`` (Linux ``/proc``; 0 if unreadable)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # the command name may contain spaces
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / ticks


def machine_cpu_seconds() -> float:
    """CPU seconds all cores have been busy since boot (``/proc/stat``; 0 if unreadable).

    The difference across a measured phase, minus the CPU of the processes being
    measured, is what anything else on the machine took: a disturbed run shows.
    """
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0.0
    # user nice system idle iowait irq softirq steal ...: everything but idle and iowait
    busy = sum(int(v) for i, v in enumerate(first[1:9]) if i not in (3, 4))
    return busy / os.sysconf("SC_CLK_TCK")


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def rounded(value: float, digits: int = 4) -> float:
    """Round to ``digits`` significant digits (JSON and tables stay readable)."""
    if value == 0:
        return 0.0
    return float(f"{value:.{digits}g}")
