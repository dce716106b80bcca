"""Scale: one Autoscaler reconcile for 2,000 pending pods of mixed shapes on a 200-node pool.

The pods' requests are the packing benchmark's (``bench/packing.py``, its two-resource
workloads of every shape, one after another until there are enough); the pool's Nodes are
the same 12 CPU / 96Gi ``mem96.large``, each with one running pod that takes part of it. The
real controller (its informers, observe, decide, act) reconciles once in process over a fixed
:class:`~kubeloop.testing.Snapshot` (no cluster, the writes recorded), in a child process of
its own, so its CPU seconds and peak RSS are the Autoscaler's alone. Reported: the decision
time (the reconcile's wall time, burst window 0), the target it wrote, the new nodes against
a lower bound of the optimum, the plan time p50/p99 over repeated passes of
``plan_scale_up`` on the same pods and nodes, and the event loop's longest block during the
reconcile, two ways: the most CPU the loop's thread spent in one callback (what the process
holds the loop for), and the longest gap between the wake-ups of a probe task that sleeps
1 ms (which adds the waits for a core and for the GIL). No cluster is needed. By hand::

    python -m bench.scale [--pods 2000] [--nodes 200] [--passes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bench import Benchmark, BenchResult, Context, peak_rss_mib, rounded, run_child
from bench.packing import GI, MI, STEPS, TEMPLATE, make_workload
from kubeloop import Request
from kubeloop.testing import Snapshot, new_manager, reconcile_once
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.scheduling import NodeState, Resources, plan_scale_up, pod_view
from nodepool_operator.settings import OperatorSettings

OPERATOR_API: Final = "kubeloop.dev/v1alpha1"
#: The issue's bound on one block of the event loop during the reconcile (reported only).
LOOP_BLOCK_TARGET_MS: Final = 50.0
#: The probe's sleep between wake-ups.
PROBE_S: Final = 0.001
#: Up to this many pods the exact reference (``bench/_optimum.py``) runs when the plan is above
#: the volume bound; beyond, only the volume bound (the reference's models grow with pods x
#: nodes: 60 pods on 6 partly used nodes take it 40 s on a loaded machine).
REFERENCE_UP_TO_PODS: Final = 80
#: The pool's maxNodes (the API's largest).
MAX_NODES: Final = 1000
#: A running pod per Node takes this fraction of it (cycling), so the nodes have room left.
USED: Final = (0.2, 0.4, 0.6, 0.8, 0.3)


def requests(count: int, seed: int) -> list[tuple[int, int]]:
    """(millicores, bytes) of ``count`` pods: the packing workloads of two resources."""
    out: list[tuple[int, int]] = []
    index = 1  # index % 3 == 1: cpu and memory
    while len(out) < count:
        for cpu, memory in make_workload(index, seed).pods:
            out.append((cpu * STEPS[0], memory * STEPS[1]))
        index += 3
    return out[:count]


def _pod(name: str, cpu: int, memory: int, **extra: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": f"{cpu}m", "memory": f"{memory // MI}Mi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "bench", "name": name, "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "app", "resources": resources}], **extra.pop("spec", {})},
        **extra,
    }


def objects(pods: int, nodes: int, seed: int) -> list[dict[str, Any]]:
    """The Autoscaler, its pool, the pool's Nodes with their running pods, the pending pods."""
    since = (datetime(2026, 1, 1, tzinfo=UTC) - timedelta(minutes=10)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    out: list[dict[str, Any]] = [
        {
            "apiVersion": OPERATOR_API,
            "kind": "Autoscaler",
            "metadata": {"name": "as", "generation": 1},
            "spec": {"nodePoolRef": {"name": "big"}, "namespaces": ["bench"], "frequency": "30s"},
        },
        {
            "apiVersion": OPERATOR_API,
            "kind": "NodePool",
            "metadata": {"name": "big", "generation": 1},
            "spec": {"targetNodes": nodes, "instanceType": TEMPLATE.name, "maxNodes": MAX_NODES},
        },
    ]
    for j in range(nodes):
        name = f"node-{j:04d}"
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": since}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {POOL_LABEL: "big"}},
                "status": {
                    "allocatable": {"cpu": "12", "memory": "96Gi", "pods": "110"},
                    "capacity": {"cpu": "12", "memory": "96Gi", "pods": "110"},
                    "conditions": [ready],
                },
            }
        )
        used = USED[j % len(USED)]
        out.append(
            _pod(
                f"run-{j:04d}",
                round(12_000 * used),
                round(96 * GI * used * 0.9) // MI * MI,
                spec={"nodeName": name},
                status={"phase": "Running"},
            )
        )
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    for i, (cpu, memory) in enumerate(requests(pods, seed)):
        out.append(
            _pod(
                f"pend-{i:05d}",
                cpu,
                memory,
                status={"phase": "Pending", "conditions": [unschedulable]},
            )
        )
    return out


def _pending(objs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "Pod" and "nodeName" not in o["spec"]]


def _node_states(objs: Sequence[dict[str, Any]]) -> list[NodeState]:
    """The pool's Nodes with the room their running pods leave (as observe computes it)."""
    alloc = Resources(cpu=12_000, memory=96 * GI, pods=110)
    used = {
        o["spec"]["nodeName"]: pod_view(o).requests + Resources(pods=1)
        for o in objs
        if o["kind"] == "Pod" and "nodeName" in o["spec"]
    }
    return [NodeState(name=name, free=alloc - req) for name, req in sorted(used.items())]


def volume_bound(objs: Sequence[dict[str, Any]]) -> int:
    """Fewest new template nodes by volume: per resource, what the pending pods ask beyond the
    ready nodes' free room, over a template node's allocatable, rounded up; the largest."""
    ask = Resources()
    for pod in _pending(objs):
        ask += pod_view(pod).requests + Resources(pods=1)
    free = Resources()
    for node in _node_states(objs):
        free += node.free
    cap = Resources(cpu=12_000, memory=96 * GI, pods=110)
    return max(
        math.ceil(max(0, ask.get(name) - free.get(name)) / cap.get(name))
        for name in ("cpu", "memory", "pods")
    )


def reference_bound(objs: Sequence[dict[str, Any]], upper: int, limit_s: float) -> int:
    """The exact reference's proven lower bound (``bench/_optimum.py``), for small inputs."""
    from bench._optimum import fewest_new_nodes  # OR-Tools: seconds to import, seldom needed

    step = (STEPS[0], STEPS[1])

    def units(r: Resources) -> tuple[int, int, int]:
        return (r.cpu // step[0], r.memory // step[1], r.pods)

    items = [(*units(pod_view(p).requests)[:2], 1) for p in _pending(objs)]
    free = [units(n.free) for n in _node_states(objs)]
    cap = (12_000 // step[0], 96 * GI // step[1], 110)
    return fewest_new_nodes(
        items, cap, upper_bound=upper, existing_free=free, time_limit_s=limit_s
    ).lower


def plan_times(objs: Sequence[dict[str, Any]], passes: int) -> tuple[list[float], float, int]:
    """Seconds of each of ``passes`` plans, the first read of the pods' views, and the plan's
    new nodes. The views are read once per pod version (as the controller does)."""
    pending, nodes = _pending(objs), _node_states(objs)
    start = time.perf_counter()
    views = [pod_view(p) for p in pending]
    read_s = time.perf_counter() - start
    times, new = [], 0
    for _ in range(passes):
        start = time.perf_counter()
        plan = plan_scale_up(
            views,
            template=TEMPLATE,
            existing_nodes=nodes,
            current_target=len(nodes),
            max_nodes=MAX_NODES,
        )
        times.append(time.perf_counter() - start)
        new = plan.new_nodes
    return times, read_s, new


async def _probe(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(PROBE_S)
        now = time.perf_counter()
        gaps.append(now - last - PROBE_S)
        last = now


@contextlib.contextmanager
def _callback_cpu(longest: list[float]) -> Iterator[None]:
    """Record in ``longest[0]`` the most CPU seconds the loop's thread spent in one callback (a
    task's step): what the process itself holds the loop for, whatever the machine's load (on
    a shared machine the probe's wall gaps add the waits for a core and for the GIL)."""
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        start = time.thread_time()
        run(handle)
        longest[0] = max(longest[0], time.thread_time() - start)

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        asyncio.events.Handle._run = run  # type: ignore[method-assign]


class _Probed(AutoscalerController):
    """The controller, its reconcile watched by the loop probe."""

    gaps: list[float]
    wall_s: float
    cpu_s: float
    callback_cpu_s: float

    async def reconcile(self, req: Request) -> Any:
        self.gaps = []
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(self.gaps, stop))
        await asyncio.sleep(0.01)  # the probe's first wake-up
        cpu, start = time.process_time(), time.perf_counter()
        longest = [0.0]
        try:
            with _callback_cpu(longest):
                await asyncio.sleep(0)  # the reconcile's steps from here on are timed
                return await super().reconcile(req)
        finally:
            self.callback_cpu_s = longest[0]
            self.wall_s = time.perf_counter() - start
            self.cpu_s = time.process_time() - cpu
            stop.set()
            await probe


async def reconcile(objs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One reconcile of the real controller over ``objs``: its time, CPU, longest loop block
    and the target it wrote."""
    snapshot = Snapshot(
        objs, resources=[NODEPOOLS, AUTOSCALERS], scale_paths={NODEPOOLS: "spec.targetNodes"}
    )
    mgr = new_manager(snapshot.client)
    controller = _Probed(mgr, OperatorSettings(batch_window_seconds=0.0))
    controller.register()
    _, writes = await reconcile_once(mgr, Request("as"), controller="autoscaler")
    targets = [
        w.body["spec"]["replicas"]
        for w in writes
        if (w.verb, w.kind, w.subresource) == ("update", "NodePool", "scale")
    ]
    gaps = controller.gaps
    return {
        "decision_s": controller.wall_s,
        "reconcile_cpu_s": controller.cpu_s,
        "target": targets[-1] if targets else None,
        "loop_max_block_ms": max(gaps, default=0.0) * 1000,
        "loop_max_callback_cpu_ms": controller.callback_cpu_s * 1000,
        "loop_wakeups": len(gaps),
    }


async def idle_probe(seconds: float) -> float:
    """The probe's longest gap with nothing else running: the machine's own noise."""
    gaps: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(gaps, stop))
    await asyncio.sleep(seconds)
    stop.set()
    await probe
    return max(gaps, default=0.0)


def child(pods: int, nodes: int, passes: int, seed: int, reference_limit_s: float) -> None:
    """The measured process: prints one JSON line."""
    objs = objects(pods, nodes, seed)
    # a first, small reconcile: what a process does once (parsers built, modules loaded) is
    # not the reconcile's; a running operator has done it long before
    asyncio.run(reconcile(objects(2, 1, seed)))
    cpu = time.process_time()
    run = asyncio.run(reconcile(objs))
    times, read_s, new = plan_times(objs, passes)
    out: dict[str, Any] = {
        **run,
        "plan_ms": [t * 1000 for t in times],
        "views_read_ms": read_s * 1000,
        "plan_new_nodes": new,
        "cpu_s": time.process_time() - cpu,
        "peak_rss_mib": peak_rss_mib(),
        "idle_probe_max_ms": asyncio.run(idle_probe(2.0)) * 1000,
        "volume_bound": volume_bound(objs),
    }
    if pods <= REFERENCE_UP_TO_PODS and new > out["volume_bound"]:
        # a plan at the volume bound is optimal already: the bound is the proof
        out["reference_bound"] = reference_bound(objs, new, reference_limit_s)
    print(json.dumps(out))


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run(ctx: Context) -> BenchResult:
    pods = int(ctx.param("pods", 2000, 60))
    nodes = int(ctx.param("nodes", 200, 6))
    passes = int(ctx.param("passes", 20, 5))
    seed = int(ctx.param("seed", 1, 1))
    limit = float(ctx.param("reference_limit_s", 10.0, 5.0))
    ctx.log(f"scale: {pods} pending pods, {nodes} nodes, {passes} plan passes")
    args = ["--child", f"--pods={pods}", f"--nodes={nodes}", f"--passes={passes}"]
    args += [f"--seed={seed}", f"--reference-limit={limit}"]
    result = await asyncio.to_thread(run_child, "bench.scale", args, 1800.0)
    out = result.output
    lower = max(out["volume_bound"], out.get("reference_bound", 0))
    planned = None if out["target"] is None else out["target"] - nodes
    plan_ms = out["plan_ms"]
    figures = {
        "decision_s": rounded(out["decision_s"]),
        "reconcile_cpu_s": rounded(out["reconcile_cpu_s"]),
        "new_nodes": planned,
        "plan_new_nodes": out["plan_new_nodes"],
        "lower_bound": lower,
        "lower_bound_by": "reference" if "reference_bound" in out else "volume",
        "plan_ms_p50": rounded(statistics.median(plan_ms)),
        "plan_ms_p99": rounded(_percentile(plan_ms, 0.99)),
        "views_read_ms": rounded(out["views_read_ms"]),
        "loop_max_block_ms": rounded(out["loop_max_block_ms"]),
        "loop_max_callback_cpu_ms": rounded(out["loop_max_callback_cpu_ms"]),
        "loop_wakeups": out["loop_wakeups"],
        "idle_probe_max_ms": rounded(out["idle_probe_max_ms"]),
        "process_cpu_s": rounded(result.cpu_s),
        "peak_rss_mib": rounded(out["peak_rss_mib"]),
    }
    params: dict[str, Any] = {"pods": pods, "nodes": nodes, "passes": passes, "seed": seed}
    params["template"] = TEMPLATE.name
    return BenchResult(name="scale", params=params, figures=figures, ratios={})


def markdown(result: BenchResult) -> str:
    f, p = result["figures"], result["params"]
    bound = (
        "the exact reference's proven lower bound"
        if f["lower_bound_by"] == "reference"
        else "the volume bound (pending requests beyond the nodes' free room, per resource)"
    )
    met = f["loop_max_callback_cpu_ms"] <= LOOP_BLOCK_TARGET_MS
    return "\n".join(
        [
            f"{p['pods']} pending pods (the packing workloads' two-resource shapes, seed "
            f"{p['seed']}) on a pool of {p['nodes']} {p['template']} Nodes, one reconcile of "
            "the real controller in process.",
            "",
            "| decision | reconcile CPU | new nodes | lower bound | plan p50 / p99 | "
            "loop: longest callback (CPU) | loop: probe's longest gap (idle) | process CPU | "
            "peak RSS |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {f['decision_s']} s | {f['reconcile_cpu_s']} s | **{f['new_nodes']}** | "
            f"{f['lower_bound']} | {f['plan_ms_p50']} / {f['plan_ms_p99']} ms | "
            f"**{f['loop_max_callback_cpu_ms']} ms** | {f['loop_max_block_ms']} ms "
            f"({f['idle_probe_max_ms']} ms) | {f['process_cpu_s']} s | {f['peak_rss_mib']} MiB |",
            "",
            f"Lower bound: {bound}. Plan time over {p['passes']} passes of `plan_scale_up` on "
            f"the same views (their first read: {f['views_read_ms']} ms); above the exact "
            "search's `max_pods` FFD's plan stands. The observation's reading of the pods and "
            "the decision run in a worker thread; the loop's longest callback is the most CPU "
            "its thread spent in one step during the reconcile (under "
            f"{LOOP_BLOCK_TARGET_MS:.0f} ms: {'met' if met else 'missed'}; reported, not "
            "asserted). The probe (a task sleeping 1 ms, woken "
            f"{f['loop_wakeups']} times) measures wall gaps, which add the waits for a core and "
            "for the GIL (handed over every 5 ms); in brackets the same probe's longest gap "
            "with nothing running, the machine's own noise. Process CPU is the whole child "
            "(imports, objects, a warm-up reconcile, the reconcile and the plan passes).",
        ]
    )


BENCHMARK = Benchmark(
    name="scale",
    title="scale: 2,000 pending pods on a 200-node pool",
    description=__doc__.split(" No cluster is")[0].replace("\n", " ") if __doc__ else "",
    run=run,
    markdown=markdown,
    needs_cluster=False,
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference-limit", type=float, default=10.0)
    parser.add_argument("--child", action="store_true", help="(what the harness runs)")
    args = parser.parse_args()
    child(args.pods, args.nodes, args.passes, args.seed, args.reference_limit)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
