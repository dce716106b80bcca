"""The end of a run in words: the terminal summary, and ``--report DIR`` (summary.md, chart.png)."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

from nodepool_operator.api import Disruption
from nodepool_operator.demo._apiactivity import ApiActivity
from nodepool_operator.demo._chart import caption, chart_png
from nodepool_operator.demo._figures import MEANINGS, Figures
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._scaledown import (
    DEPLOYMENT_NAME,
    PDB_MIN_AVAILABLE,
    PDB_NAME,
    PDB_NAMESPACE,
    REPLICAS,
    UNNEEDED_TIME,
)
from nodepool_operator.demo._timeline import Milestone, milestones
from nodepool_operator.demo._workload import POOL_NAME, WATCHED_NAMESPACES, Role

SUMMARY = "summary.md"
CHART = "chart.png"
CLOUD = "cloud.json"
CHART_ALT = "pending and running pods, target and ready nodes over time"


def verdict(result: DemoResult) -> str:
    """One sentence: did the run do what it should?"""
    f = result.figures
    if not result.converged:
        return (
            f"Timed out after {result.timeout:.0f} s: {f.pods_scheduled} of {f.pods_fitting} "
            f"fitting pods scheduled."
        )
    problems = f.problems()
    if problems:
        return f"Converged in {f.seconds} s, but: {'; '.join(problems)}."
    return (
        f"All {f.pods_fitting} fitting pods scheduled in {f.seconds} s on {f.nodes} nodes "
        f"(the lower bound is {f.nodes_lower_bound}); {f.pods_not_triggering} pods did not "
        f"trigger a scale-up; no duplicate or leaked VMs."
    )


def story(result: DemoResult) -> list[Milestone]:
    """The run's milestones, with the start of the second act among them: the samples show
    its effects, not what the demo did."""
    found = milestones(result.samples)
    if result.scale_down_at is not None:
        act = Milestone(
            result.scale_down_at,
            f"second act: the bare pods of one node deleted, a Deployment of {REPLICAS} there "
            f"under a PodDisruptionBudget, scale-down on (unneeded after {UNNEEDED_TIME})",
        )
        # After what was seen at that instant: the act begins once its sample is taken.
        at = next((i for i, m in enumerate(found) if m.t > act.t), len(found))
        found.insert(at, act)
    return found


def terminal_summary(result: DemoResult) -> str:
    """What the demo prints when it ends (without ``--json``)."""
    lines = ["", verdict(result), ""]
    width = max(len(f.name) for f in fields(Figures))
    for name, value in result.figures.to_json().items():
        lines.append(f"  {name:<{width}}  {value}")
    if result.scale_down_at is not None:
        lines += ["", "Scale-down, budgets and blockers:"]
        lines += [f"  {line}" for line in disruption_lines(result)]
    lines += ["", "Timeline (the report has the Autoscaler's reasoning too):"]
    lines += [f"  {m.t:6.1f} s  {m.text}" for m in story(result) if not m.detail]
    return "\n".join(lines) + "\n"


def disruption_lines(result: DemoResult) -> list[str]:
    """What held the second act's scale-down: the PodDisruptionBudget and what it refused, the
    pool's disruption settings, and the nodes the default blockers kept."""
    f = result.figures
    lines = [
        f"PodDisruptionBudget {PDB_NAMESPACE}/{PDB_NAME} (minAvailable {PDB_MIN_AVAILABLE}) "
        f"over Deployment {DEPLOYMENT_NAME} ({REPLICAS} replicas, then {REPLICAS + 1} once it "
        f"held the drain): {f.evictions} eviction(s), "
        f"{f.evictions_refused} refused (429), held the drain about {f.pdb_blocked_s} s",
    ]
    defaults = Disruption()
    budgets = result.disruption.get("budgets")
    # The API's own default when the pool leaves them out (None where the API has no budgets).
    default_budgets = getattr(defaults, "budgets", None)
    if budgets:
        shown = ", ".join(
            str(b.get("nodes")) + (f" ({', '.join(b['reasons'])})" if b.get("reasons") else "")
            for b in budgets
        )
        lines.append(f"pool disruption budgets (nodes at once): {shown}")
    elif default_budgets:
        shown = ", ".join(str(getattr(b, "nodes", b)) for b in default_budgets)
        lines.append(f"pool disruption budgets (nodes at once): {shown} (default)")
    else:
        lines.append("pool disruption budgets: none in spec.disruption")
    status = result.disruption_status
    if status:
        lines.append(
            f"pool status.disruption at the end: {status.get('disrupting', 0)} disrupting, "
            f"{status.get('allowed', 0)} more allowed"
        )
    settings = ", ".join(
        f"{key} {result.disruption[key]}"
        if key in result.disruption
        else f"{key} {_duration(default)} (default)"
        for key, default in (
            ("drainTimeout", defaults.drain_timeout),
            ("terminationGracePeriod", defaults.termination_grace_period),
        )
    )
    lines.append(f"pool drain settings: {settings}")
    if result.unremovable:
        lines.append("kept by blockers (the Autoscaler's status.unremovableNodes):")
        lines += [f"  {entry}" for entry in result.unremovable]
    else:
        lines.append("kept by blockers: none reported")
    return lines


def _duration(value: timedelta) -> str:
    """A whole number of hours, minutes or seconds, as the pool's spec writes durations."""
    seconds = int(value.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _scoring_sentence(scoring: str | None) -> str:
    if scoring is None:
        return ""
    how = "fullest node first" if scoring == "MostAllocated" else "emptiest node first"
    return f" kube-scheduler scored nodes with `NodeResourcesFit` `{scoring}` ({how})."


def summary_markdown(result: DemoResult) -> str:
    """The Markdown report: what was applied, what happened, the figures and the timeline."""
    w = result.workload
    f = result.figures
    shape = w.shape
    watched = ", ".join(f"`{n}`" for n in WATCHED_NAMESPACES)
    out = [
        "# NodePool + Autoscaler demo",
        "",
        f"**{verdict(result)}**",
        "",
        "## What happened",
        "",
        "The demo ran a local control plane (etcd, kube-apiserver, kube-scheduler; no kubelet, "
        'so "scheduled" means bound: `spec.nodeName` is set) and the operator in the same '
        f"process, with the simulated cloud (a VM boots in {result.boot_seconds:g} s)."
        f"{_scoring_sentence(result.scheduler_scoring)} It applied:",
        "",
        f"- NodePool `{POOL_NAME}`: `{shape.instance_type}` nodes of {shape.memory} and "
        f"{shape.cpu} CPUs, 0 to {shape.max_nodes} nodes, `targetNodes: 0`;",
        f"- Autoscaler `{POOL_NAME}` for namespaces {watched}"
        f" with `frequency: {w.frequency}`. The seeds' default is `5m`; the period does not set "
        "the reaction time, because the Autoscaler reacts to pod events through its watch and the "
        "period is only a safety net.",
        "",
        f"Then it created {f.pods} pods at once:",
        "",
        "| pod | memory | cpu | should it scale the pool? | bound to |",
        "| --- | --- | --- | --- | --- |",
    ]
    groups = {(g.namespace, name): g for g in w.burst for name in g.names()}
    for (namespace, name), group in groups.items():
        answer = "yes" if group.role is Role.FITS else f"no: {group.role.explanation}"
        node = result.pod_nodes.get((namespace, name), "") or "(pending)"
        out.append(f"| `{namespace}/{name}` | {group.memory} | {group.cpu} | {answer} | {node} |")
    out += [
        "",
        "The pods that must not scale the pool may still be bound once nodes exist: the "
        "scheduler checks neither namespaces nor Secrets, so the unwatched pod and the pod with "
        "the missing Secret can land in spare room (in a real cluster the latter would then wait "
        "in ContainerCreating). They are counted in `pods_not_triggering`, never in "
        "`pods_scheduled`. The burst is sized so that no binding order can strand a fitting "
        "pod on the lower-bound number of nodes, so any extra node is a wrong scale-up.",
        "",
        "## Figures",
        "",
        "| figure | value | meaning |",
        "| --- | --- | --- |",
    ]
    for name, value in f.to_json().items():
        out.append(f"| `{name}` | {value} | {MEANINGS[name]} |")
    if result.scale_down_at is not None:
        out += [
            "",
            "## Scale-down: budgets and blockers",
            "",
            "In the second act the pool's other nodes hold bare pods (no controller would "
            "recreate them), so the default blocker `NotReplicated` keeps them; the node that "
            "goes holds only the Deployment's pods. Its budget refuses their eviction until the "
            "demo adds a spare replica, then lets them go one at a time.",
            "",
            *(
                f"  - {line.strip()}" if line.startswith("  ") else f"- {line}"
                for line in disruption_lines(result)
            ),
        ]
    out += ["", "## Timeline", "", "| t (s) | what |", "| ---: | --- |"]
    out += [f"| {m.t:.1f} | {m.text} |" for m in story(result)]
    api = result.samples[-1].api if result.samples else ApiActivity()
    conflicts = ", ".join(f"`{k}` {n}" for k, n in api.conflicts_by_target.items()) or "none"
    out += [
        "",
        "## Cost",
        "",
        "The operator's API writes from the burst on (installing the CRDs before it is not "
        "counted), by controller (`-`: outside any reconcile, e.g. Events), verb and resource:",
        "",
        "| writer | writes |",
        "| --- | ---: |",
        *(f"| `{target}` | {n} |" for target, n in api.writes_by_target.items()),
        "",
        f"409 Conflicts, by controller and resource: {conflicts}. A conflict is a write that "
        "lost a race and was re-read and re-applied (docs/ownership.md), not an error.",
        "",
        f"Cloud calls by method, to the end of the run (the second act's too; `{CLOUD}` "
        "holds the same record): "
        + (", ".join(f"{k} {v}" for k, v in sorted(result.cloud_calls.items())) or "none")
        + ".",
        "",
        "## Chart",
        "",
        f"![{CHART_ALT}]({CHART})",
        "",
        caption(),
        "",
    ]
    return "\n".join(out)


def write_report(result: DemoResult, directory: Path) -> tuple[Path, Path]:
    """Write ``summary.md``, ``chart.png`` and ``cloud.json`` (the cloud's own record, when
    the result has one) into ``directory`` (created if missing); returns the first two.

    Blocking (file writes, PNG encoding): call it from a worker thread in async code.
    """
    directory.mkdir(parents=True, exist_ok=True)
    summary = directory / SUMMARY
    chart = directory / CHART
    if result.cloud_record:
        (directory / CLOUD).write_text(json.dumps(result.cloud_record, indent=2))
    summary.write_text(summary_markdown(result))
    chart.write_bytes(chart_png(result.samples, scale_down_at=result.scale_down_at))
    return summary, chart
