"""Packing: the planner's new nodes against the proven optimum and against FFD, and its time.

Seeded random workloads (one, two and three resources; 5-60 pods; five shapes; a fifth of them
with partly used ready nodes) go through ``plan_scale_up`` twice: as the operator runs it (FFD,
then the exact search of ``scheduling._exact`` within its default budget) and FFD alone
(``search=None``). The optimum comes from an independent exact solver (``bench/_optimum.py``:
OR-Tools CP-SAT on an assignment model for packings, and the pattern model's linear relaxation,
GLOP, for proven lower bounds). A plan checked here that meets the solver's proven lower bound
is optimal too (the bound is the proof, the plan its witness); a workload proven neither way is
counted apart with the solver's bounds, never as an optimum. Every plan is checked here
against the pods' requests: each pod placed once and no node over its room.

No cluster is needed. By hand::

    python -m bench.packing [--workloads 240] [--seed 1]
    python -m bench.packing --pinned   # the optimum of the workloads the unit tests pin
    python -m bench.packing --real-only [--real-workloads 60]

Beside the synthetic node, the same seeded workloads (the same shapes, as fractions of the
node) are planned on real EKS nodes: a pool of an EC2 type whose node class is AL2023, its
template from ``pool_template(..., node_class=...)``, the function the Autoscaler plans with
and the bootstrap's kubelet settings come from (EKS's kube-reserved, the eviction threshold,
ENI max pods), so the nodes are counted against the optimum of the allocatable a real node
registers with.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from bench import Benchmark, BenchResult, Context, rounded
from bench._optimum import fewest_new_nodes
from nodepool_operator.api import parse_nodeclass, parse_nodepool
from nodepool_operator.controllers import pool_template
from nodepool_operator.scheduling import (
    NodeState,
    NodeTemplate,
    Resources,
    SearchBudget,
    format_bytes,
    format_cpu,
    plan_scale_up,
    pod_view,
)

GI: Final = 1024**3
MI: Final = 1024**2
#: The node of the pool (as in the autoscaler benchmark's S3/S6 and the issue): 12 CPU / 96Gi.
TEMPLATE: Final = NodeTemplate(
    name="mem96.large",
    allocatable=Resources(cpu=12_000, memory=96 * GI, ephemeral_storage=100 * GI, pods=110),
)
#: Real EKS nodes the same workloads are planned on (a general type and a large one), each
#: as a pool of the type with an AL2023 node class: :func:`real_template`.
REAL_TYPES: Final = ("m5.xlarge", "r5.2xlarge")
#: The AL2023 node class of those pools: no kubelet options, so max pods is the type's ENI
#: limit and the reservations are EKS's defaults.
AL2023_CLASS_NAME: Final = "bench-al2023"
AL2023_CLASS: Final[dict[str, Any]] = {
    "apiVersion": "kubeloop.dev/v1alpha1",
    "kind": "AwsNodeClass",
    "metadata": {"name": AL2023_CLASS_NAME},
    "spec": {"amiId": "ami-0123456789abcdef0", "amiFamily": "AL2023", "cluster": {"name": "bench"}},
}
#: Request granularity per resource (millicores, bytes, bytes): what people write.
STEPS: Final = (100, 512 * MI, GI)
NAMES: Final = ("cpu", "memory", "ephemeral-storage")
SHAPES: Final = ("uniform", "large", "bimodal", "replicas", "complementary")
#: Targets from the issue, reported (never asserted).
OPTIMAL_UP_TO_PODS: Final = 40
P99_TARGET_MS: Final = 100.0
#: Workloads (seed 1) that tests/unit/nodepool_operator/scheduling/test_exact.py pins with
#: their optimum: the optimum there is this solver's, printed by ``--pinned`` and carried as
#: ``figures.pinned``.
PINNED: Final = (7, 74, 82, 88, 90, 107, 150, 172, 182, 212)
#: Repetitions per plan for its time: the minimum is the planner's cost, not the neighbours'.
TIMING_REPEATS: Final = 3


def real_template(instance_type: str) -> NodeTemplate:
    """The empty node a pool of ``instance_type`` with :data:`AL2023_CLASS` plans with: the
    allocatable its Node registers with (the type's nominal memory: no Node of it has
    reported the machine's yet)."""
    pool = parse_nodepool(
        {
            "apiVersion": "kubeloop.dev/v1alpha1",
            "kind": "NodePool",
            "metadata": {"name": f"bench-{instance_type}"},
            "spec": {
                "instanceType": instance_type,
                "targetNodes": 0,
                "maxNodes": 1000,
                "nodeClassRef": {"name": AL2023_CLASS_NAME},
            },
        }
    )
    return pool_template(pool, node_class=parse_nodeclass(AL2023_CLASS).spec)


def describe_allocatable(template: NodeTemplate) -> dict[str, str | int]:
    """A template's allocatable as API quantities (what the docs block prints)."""
    a = template.allocatable
    return {
        "cpu": format_cpu(a.cpu),
        "memory": format_bytes(a.memory),
        "ephemeral-storage": format_bytes(a.ephemeral_storage),
        "pods": a.pods,
    }


@dataclass(frozen=True)
class Workload:
    index: int
    dims: int
    shape: str
    pods: tuple[tuple[int, ...], ...]
    """Requests per pod in ``STEPS`` units, ``dims`` resources (cpu, memory, storage)."""
    existing: tuple[tuple[int, ...], ...]
    """Free room of ready nodes in the same units (an empty tuple: none)."""
    template: NodeTemplate = TEMPLATE
    """The node of the pool: the new nodes and the ready ones are of it."""

    @property
    def max_pods(self) -> int:
        return self.template.allocatable.pods


def make_workload(index: int, seed: int, template: NodeTemplate = TEMPLATE) -> Workload:
    """Workload ``index`` of ``seed``; its requests are drawn as fractions of ``template``'s
    allocatable, so the same index is the same shape of workload on every node."""
    rng = random.Random(seed * 100_003 + index)
    dims = 1 + index % 3
    shape = SHAPES[(index // 3) % len(SHAPES)]
    count = rng.randint(5, 60)
    caps = [template.allocatable.get(n) // s for n, s in zip(NAMES, STEPS, strict=True)]
    # One resource is memory alone (caches, JVMs); two are cpu and memory; three add storage.
    caps = [caps[1]] if dims == 1 else caps[:dims]

    def draw(lo: float, hi: float, cap: int) -> int:
        return max(1, round(rng.uniform(lo, hi) * cap))

    fractions: list[list[tuple[float, float]]] = []
    if shape == "replicas":
        kinds = [[(f, f) for f in (rng.uniform(0.05, 0.6) for _ in caps)] for _ in range(5)]
        kinds = kinds[: rng.randint(2, 5)]
        fractions = [rng.choice(kinds) for _ in range(count)]
    for _ in range(count if shape != "replicas" else 0):
        if shape == "uniform":
            fractions.append([(0.05, 0.5)] * len(caps))
        elif shape == "large":
            fractions.append([(0.2, 0.7)] * len(caps))
        elif shape == "bimodal":
            fractions.append([(0.05, 0.2) if rng.random() < 0.5 else (0.35, 0.65) for _ in caps])
        else:  # complementary: cpu-heavy and memory-heavy pods that pair up
            heavy = rng.random() < 0.5
            row = [(0.3, 0.6) if (d == 0) == heavy else (0.05, 0.15) for d in range(len(caps))]
            fractions.append(row if len(caps) > 1 else [(0.05, 0.6)])
    pods = tuple(
        tuple(draw(lo, hi, c) for (lo, hi), c in zip(f, caps, strict=True)) for f in fractions
    )
    existing: tuple[tuple[int, ...], ...] = ()
    if rng.random() < 0.2:
        existing = tuple(tuple(draw(0.1, 0.7, c) for c in caps) for _ in range(rng.randint(1, 3)))
    return Workload(index, dims, shape, pods, existing, template)


def _names(w: Workload) -> tuple[str, ...]:
    return ("memory",) if w.dims == 1 else NAMES[: w.dims]


def _step(name: str) -> int:
    return STEPS[NAMES.index(name)]


def _pod(w: Workload, i: int, request: Sequence[int]) -> dict[str, Any]:
    requests = {}
    for name, amount in zip(_names(w), request, strict=True):
        requests[name] = f"{amount * 100}m" if name == "cpu" else f"{amount * _step(name) // MI}Mi"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "bench", "name": f"w{w.index}-p{i:03d}"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": requests}}]},
    }


def _nodes(w: Workload) -> list[NodeState]:
    out = []
    for j, free in enumerate(w.existing):
        amounts = {n: a * _step(n) for n, a in zip(_names(w), free, strict=True)}
        out.append(
            NodeState(
                name=f"ready-{j}",
                free=Resources(
                    cpu=amounts.get("cpu", 0),
                    memory=amounts.get("memory", 0),
                    ephemeral_storage=amounts.get("ephemeral-storage", 0),
                    pods=w.max_pods,
                ),
            )
        )
    return out


def _check(w: Workload, pods: list[dict[str, Any]], plan: Any, label: str) -> None:
    """Raise unless ``plan`` places every pod once and fills no node beyond its room."""
    if plan.unschedulable or len(plan.placements) != len(pods):
        raise AssertionError(f"workload {w.index} ({label}): not every pod placed: {plan.summary}")
    index = {p["metadata"]["name"]: i for i, p in enumerate(pods)}
    used: dict[str, list[int]] = defaultdict(lambda: [0] * (w.dims + 1))
    for placement in plan.placements:
        request = w.pods[index[placement.pod.name]]
        for r, amount in enumerate((*request, 1)):
            used[str(placement.node)][r] += amount
    caps = [w.template.allocatable.get(n) // _step(n) for n in _names(w)] + [w.max_pods]
    free = {f"existing:ready-{j}": [*room, w.max_pods] for j, room in enumerate(w.existing)}
    for node, amounts in used.items():
        room = free.get(node, caps)
        if any(a > c for a, c in zip(amounts, room, strict=True)):
            raise AssertionError(
                f"workload {w.index} ({label}): {node} over its room: {amounts} > {room}"
            )
    opened = {n for n in used if n.startswith("new:")}
    if len(opened) != plan.new_nodes:
        raise AssertionError(
            f"workload {w.index} ({label}): {len(opened)} new nodes used, "
            f"plan says {plan.new_nodes}"
        )


def _timed_plan(
    w: Workload, pods: list[dict[str, Any]], nodes: list[NodeState], search: SearchBudget | None
) -> tuple[Any, float]:
    best = float("inf")
    plan = None
    for _ in range(TIMING_REPEATS):
        start = time.perf_counter()
        plan = plan_scale_up(
            [pod_view(p) for p in pods],  # the reading is part of planning, so it is timed
            template=w.template,
            existing_nodes=nodes,
            current_target=len(nodes),
            max_nodes=10**6,
            search=search,
        )
        best = min(best, time.perf_counter() - start)
    return plan, best


def measure(w: Workload, reference_limit_s: float = 30.0) -> dict[str, Any]:
    pods = [_pod(w, i, r) for i, r in enumerate(w.pods)]
    nodes = _nodes(w)
    ours, ours_s = _timed_plan(w, pods, nodes, SearchBudget())
    ffd, ffd_s = _timed_plan(w, pods, nodes, None)
    _check(w, pods, ours, "ours")
    _check(w, pods, ffd, "ffd")
    caps = (*(w.template.allocatable.get(n) // _step(n) for n in _names(w)), w.max_pods)
    start = time.perf_counter()
    optimum = fewest_new_nodes(
        [(*p, 1) for p in w.pods],
        caps,
        upper_bound=ffd.new_nodes,
        existing_free=[(*e, w.max_pods) for e in w.existing],
        time_limit_s=reference_limit_s,
    )
    reference_s = time.perf_counter() - start
    if ours.new_nodes < optimum.lower:
        raise AssertionError(
            f"workload {w.index}: ours {ours.new_nodes} < the reference's bound {optimum.lower}"
        )
    # A plan checked above that meets the reference's proven lower bound is an optimal packing
    # even when the solver's own search found none that good in its time: the proof is the
    # bound, the plan only its witness (#150 of seed 1: bound 10, CP-SAT's best 11, ours 10).
    if optimum.proven:
        value, proof = optimum.nodes, "solver"
    elif min(ours.new_nodes, ffd.new_nodes) == optimum.lower:
        value, proof = optimum.lower, "bound met by a checked plan"
    else:
        value, proof = None, None
    return {
        "index": w.index,
        "dims": w.dims,
        "shape": w.shape,
        "pods": len(w.pods),
        "ready_nodes": len(w.existing),
        "optimum": value,
        "proof": proof,
        "reference_best": optimum.nodes,
        "reference_lower": optimum.lower,
        "ours": ours.new_nodes,
        "ffd": ffd.new_nodes,
        "ours_ms": ours_s * 1000,
        "ffd_ms": ffd_s * 1000,
        "reference_s": reference_s,
    }


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarise(rows: list[dict[str, Any]], seed: int) -> BenchResult:
    proven = [r for r in rows if r["optimum"] is not None]
    unproven = [r for r in rows if r["optimum"] is None]
    small = [r for r in proven if r["pods"] <= OPTIMAL_UP_TO_PODS]
    large = [r for r in proven if r["pods"] > OPTIMAL_UP_TO_PODS]

    def above(subset: list[dict[str, Any]], side: str) -> int:
        return sum(r[side] > r["optimum"] for r in subset if r["optimum"] is not None)

    ours_ms = [r["ours_ms"] for r in rows]
    ffd_ms = [r["ffd_ms"] for r in rows]
    by_dims = {
        str(d): {
            "workloads": len(sub),
            "ffd_above_optimum": above(sub, "ffd"),
            "ours_above_optimum": above(sub, "ours"),
        }
        for d in (1, 2, 3)
        if (sub := [r for r in rows if r["dims"] == d])
    }
    by_shape = {
        s: {
            "workloads": len(sub),
            "ffd_above_optimum": above(sub, "ffd"),
            "ours_above_optimum": above(sub, "ours"),
        }
        for s in SHAPES
        if (sub := [r for r in rows if r["shape"] == s])
    }
    figures = {
        "workloads": len(rows),
        "workloads_proven": len(proven),
        "proven_by_bound": sum(r.get("proof") == "bound met by a checked plan" for r in proven),
        "unproven": [
            {
                k: r[k]
                for k in (
                    "index",
                    "dims",
                    "shape",
                    "pods",
                    "ours",
                    "ffd",
                    "reference_best",
                    "reference_lower",
                )
            }
            for r in unproven
        ],
        "unproven_up_to_40": sum(r["pods"] <= OPTIMAL_UP_TO_PODS for r in unproven),
        "workloads_up_to_40": len(small),
        "workloads_over_40": len(large),
        "ours_above_optimum_up_to_40": above(small, "ours"),
        "ours_above_optimum_over_40": above(large, "ours"),
        "ffd_above_optimum_up_to_40": above(small, "ffd"),
        "ffd_above_optimum_over_40": above(large, "ffd"),
        "nodes_optimum": sum(r["optimum"] for r in proven),
        "nodes_ours": sum(r["ours"] for r in proven),
        "nodes_ffd": sum(r["ffd"] for r in proven),
        "ours_ms_p50": rounded(statistics.median(ours_ms)),
        "ours_ms_p99": rounded(_percentile(ours_ms, 0.99)),
        "ours_ms_max": rounded(max(ours_ms)),
        "ffd_ms_p50": rounded(statistics.median(ffd_ms)),
        "ffd_ms_p99": rounded(_percentile(ffd_ms, 0.99)),
        "reference_s_p50": rounded(statistics.median(r["reference_s"] for r in rows)),
        "reference_s_max": rounded(max(r["reference_s"] for r in rows)),
        "by_dims": by_dims,
        "by_shape": by_shape,
        "worst": sorted(proven, key=lambda r: (r["optimum"] - r["ours"], -r["ours_ms"]))[:5],
        # every proven workload where ours is above the optimum, by index (the table counts them)
        "ours_above": [
            {k: r[k] for k in ("index", "dims", "shape", "pods", "optimum", "ours", "ffd")}
            for r in proven
            if r["ours"] > r["optimum"]
        ],
    }
    targets = {
        "optimal_up_to_40": figures["ours_above_optimum_up_to_40"] == 0
        and figures["unproven_up_to_40"] == 0,
        "p99_under_100ms": figures["ours_ms_p99"] < P99_TARGET_MS,
    }
    figures["targets"] = targets
    ratios = {
        "ours_nodes_over_optimum": rounded(figures["nodes_ours"] / figures["nodes_optimum"], 4),
        "ffd_nodes_over_optimum": rounded(figures["nodes_ffd"] / figures["nodes_optimum"], 4),
    }
    return BenchResult(
        name="packing",
        params={
            "workloads": len(rows),
            "seed": seed,
            "template": "12 CPU / 96Gi / 100Gi ephemeral-storage / 110 pods",
            "budget": asdict(SearchBudget()),
            "timing": f"min of {TIMING_REPEATS} runs per plan",
        },
        figures=figures,
        ratios=ratios,
    )


def summarise_real(rows: list[dict[str, Any]], template: NodeTemplate) -> dict[str, Any]:
    """Nodes against the optimum on one real node (the proven workloads), with the
    allocatable they were planned on."""
    proven = [r for r in rows if r["optimum"] is not None]
    return {
        "allocatable": describe_allocatable(template),
        "workloads": len(rows),
        "workloads_proven": len(proven),
        "unproven": [
            {k: r[k] for k in ("index", "pods", "ours", "ffd", "reference_best", "reference_lower")}
            for r in rows
            if r["optimum"] is None
        ],
        "ours_above_optimum": sum(r["ours"] > r["optimum"] for r in proven),
        "ffd_above_optimum": sum(r["ffd"] > r["optimum"] for r in proven),
        "nodes_optimum": sum(r["optimum"] for r in proven),
        "nodes_ours": sum(r["ours"] for r in proven),
        "nodes_ffd": sum(r["ffd"] for r in proven),
        "ours_above": [
            {k: r[k] for k in ("index", "dims", "shape", "pods", "optimum", "ours", "ffd")}
            for r in proven
            if r["ours"] > r["optimum"]
        ],
        "ours_ms_p50": rounded(statistics.median(r["ours_ms"] for r in rows)) if rows else None,
        "ours_ms_p99": rounded(_percentile([r["ours_ms"] for r in rows], 0.99)) if rows else None,
    }


def run_real(
    count: int, seed: int, reference_limit_s: float, types: Sequence[str] = REAL_TYPES
) -> dict[str, dict[str, Any]]:
    """Workloads 0..``count``-1 of ``seed`` on each of ``types`` as an AL2023 node."""
    out = {}
    for name in types:
        template = real_template(name)
        rows = [measure(make_workload(i, seed, template), reference_limit_s) for i in range(count)]
        out[name] = summarise_real(rows, template)
    return out


def pinned(
    reference_limit_s: float, measured: Sequence[dict[str, Any]] = ()
) -> dict[str, dict[str, Any]]:
    """The reference's optimum and FFD's count for each of :data:`PINNED` (seed 1), from
    ``measured`` rows of seed 1 where there is one."""
    have = {r["index"]: r for r in measured}
    out = {}
    for index in PINNED:
        row = have.get(index) or measure(make_workload(index, 1), reference_limit_s)
        keys = ("pods", "dims", "optimum", "proof", "reference_lower", "reference_best", "ffd")
        out[str(index)] = {k: row[k] for k in (*keys, "ours")}
    return out


def run_workloads(
    count: int, seed: int, reference_limit_s: float, real_count: int = 0
) -> BenchResult:
    rows = [measure(make_workload(i, seed), reference_limit_s) for i in range(count)]
    result = summarise(rows, seed)
    result["figures"]["pinned"] = pinned(reference_limit_s, rows if seed == 1 else ())
    result["params"]["reference"] = (
        f"OR-Tools CP-SAT and the pattern LP bound, {reference_limit_s:g} s per workload"
    )
    if real_count:
        result["figures"]["real_nodes"] = run_real(real_count, seed, reference_limit_s)
        result["params"]["real_node_class"] = "AL2023, default kubelet settings"
    return result


async def run(ctx: Context) -> BenchResult:
    count = int(ctx.param("workloads", 240, 200))
    real = int(ctx.param("real_workloads", 60, 2))
    seed = int(ctx.param("seed", 1, 1))
    # most workloads are proven in a second; the limit is what the few hardest ones get
    limit = float(ctx.param("reference_limit_s", 60.0, 10.0))
    ctx.log(
        f"packing: {count} workloads (seed {seed}), and {real} on each of "
        f"{', '.join(REAL_TYPES)} (AL2023), reference: CP-SAT ({limit:g} s each)"
    )
    return await asyncio.to_thread(run_workloads, count, seed, limit, real)


def markdown(result: BenchResult) -> str:
    f, p = result["figures"], result["params"]
    lines = [
        f"{f['workloads']} workloads (seed {p['seed']}) on a {p['template']} node; search budget "
        f"{p['budget']['max_steps']} steps / {p['budget']['max_seconds'] * 1000:.0f} ms; plan time "
        f"is the {p['timing']}.",
        "",
        "| | workloads | above the optimum: ours | above the optimum: FFD alone |",
        "| --- | ---: | ---: | ---: |",
        f"| up to {OPTIMAL_UP_TO_PODS} pods | {f['workloads_up_to_40']} | "
        f"**{f['ours_above_optimum_up_to_40']}** | {f['ffd_above_optimum_up_to_40']} |",
        f"| {OPTIMAL_UP_TO_PODS + 1}-60 pods | {f['workloads_over_40']} | "
        f"**{f['ours_above_optimum_over_40']}** | {f['ffd_above_optimum_over_40']} |",
    ]
    for key, title in (("by_dims", "resources"), ("by_shape", "shape")):
        for name, sub in f[key].items():
            lines.append(
                f"| {title}: {name} | {sub['workloads']} | {sub['ours_above_optimum']} | "
                f"{sub['ffd_above_optimum']} |"
            )
    lines += [
        "",
        f"The reference ({p.get('reference', 'CP-SAT')}) proved the optimum of "
        f"{f['workloads_proven']} workloads (of them {f.get('proven_by_bound', 0)} where its "
        "proven lower bound equals a plan checked here, ours or FFD's, while its own search "
        f"found none that good in time); {len(f['unproven'])} unproven (of them "
        f"{f['unproven_up_to_40']} of up to {OPTIMAL_UP_TO_PODS} pods) are left out above: "
        + (
            ", ".join(
                f"#{u['index']} ({u['pods']} pods: ours {u['ours']}, FFD {u['ffd']}, "
                f"optimum in [{u['reference_lower']}, {u['reference_best']}])"
                for u in f["unproven"]
            )
            or "none"
        )
        + ".",
        "",
        "Where ours is above the optimum: "
        + (
            ", ".join(
                f"#{r['index']} ({r['pods']} pods, {r['dims']} resource"
                f"{'s' if r['dims'] > 1 else ''}, {r['shape']}: "
                f"ours {r['ours']}, optimum {r['optimum']})"
                for r in f["ours_above"]
            )
            or "nowhere"
        )
        + ".",
        "",
        f"Nodes in all (proven workloads): optimum {f['nodes_optimum']}, ours "
        f"{f['nodes_ours']}, FFD alone "
        f"{f['nodes_ffd']}. Plan time p50 / p99 / max: ours **{f['ours_ms_p50']} / "
        f"{f['ours_ms_p99']}** / {f['ours_ms_max']} ms, FFD alone {f['ffd_ms_p50']} / "
        f"{f['ffd_ms_p99']} ms. The reference took {f['reference_s_p50']} s per workload "
        f"(median; max {f['reference_s_max']} s).",
        "",
        "Targets (reported, not asserted): equal to the optimum on every workload of up to "
        f"{OPTIMAL_UP_TO_PODS} pods: {'met' if f['targets']['optimal_up_to_40'] else 'missed'}; "
        f"plan p99 < {P99_TARGET_MS:.0f} ms: "
        f"{'met' if f['targets']['p99_under_100ms'] else 'missed'}.",
    ]
    if f.get("real_nodes"):
        lines += ["", *markdown_real(f["real_nodes"], p["seed"])]
    return "\n".join(lines)


def markdown_real(real: dict[str, dict[str, Any]], seed: int) -> list[str]:
    """The real-node table: nodes against the optimum with the allocatable planned on."""
    lines = [
        f"The first workloads of seed {seed} again, drawn as the same fractions of a real EKS "
        "node: a pool of the type with an AL2023 node class (default kubelet settings), its "
        "allocatable from `pool_template(..., node_class=...)` (EKS's kube-reserved from max "
        "pods, the eviction threshold, ENI max pods, the type's nominal memory):",
        "",
        "| node (AL2023) | allocatable: cpu / memory / ephemeral-storage / pods | workloads "
        "(proven) | nodes: optimum / ours / FFD alone | above the optimum: ours / FFD alone "
        "| plan ms p50 / p99 |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in real.items():
        a = r["allocatable"]
        lines.append(
            f"| {name} | {a['cpu']} / {a['memory']} / {a['ephemeral-storage']} / {a['pods']} "
            f"| {r['workloads']} ({r['workloads_proven']}) | {r['nodes_optimum']} / "
            f"**{r['nodes_ours']}** / {r['nodes_ffd']} | **{r['ours_above_optimum']}** / "
            f"{r['ffd_above_optimum']} | {r['ours_ms_p50']} / {r['ours_ms_p99']} |"
        )
    for name, r in real.items():
        notes = [
            f"#{u['index']} ({u['pods']} pods: ours {u['ours']}, FFD {u['ffd']}, optimum in "
            f"[{u['reference_lower']}, {u['reference_best']}])"
            for u in r["unproven"]
        ]
        above = [
            f"#{u['index']} ({u['pods']} pods, {u['shape']}: ours {u['ours']}, optimum "
            f"{u['optimum']})"
            for u in r["ours_above"]
        ]
        if notes or above:
            lines += [
                "",
                f"{name}: unproven (left out above): {', '.join(notes) or 'none'}; ours above "
                f"the optimum: {', '.join(above) or 'nowhere'}.",
            ]
    return lines


BENCHMARK = Benchmark(
    name="packing",
    title="packing: new nodes against the proven optimum",
    description=__doc__.split("\n\nNo cluster")[0].replace("\n", " ") if __doc__ else "",
    run=run,
    markdown=markdown,
    needs_cluster=False,
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.packing")
    parser.add_argument("--workloads", type=int, default=240)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference-limit", type=float, default=60.0)
    parser.add_argument("--real-workloads", type=int, default=60)
    parser.add_argument(
        "--pinned", action="store_true", help="only the unit tests' pinned workloads"
    )
    parser.add_argument(
        "--real-only", action="store_true", help="only the workloads on real AL2023 nodes"
    )
    args = parser.parse_args()
    if args.pinned:
        print(json.dumps(pinned(args.reference_limit)))
        return
    if args.real_only:
        real = run_real(args.real_workloads, args.seed, args.reference_limit)
        print(json.dumps(real))
        print("\n".join(markdown_real(real, args.seed)))
        return
    print(
        json.dumps(
            run_workloads(args.workloads, args.seed, args.reference_limit, args.real_workloads)
        )
    )


if __name__ == "__main__":
    main()
