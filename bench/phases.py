"""Where the time goes: a pod's wait for a new node, split into phases.

A pod that needs a node that does not exist yet passes ten milestones, in this order when
nothing is odd: it is created, kube-scheduler marks it Unschedulable, the autoscaler decides
to scale, the cloud creates the VM, the VM has booted, its Node registers, turns Ready, has
its start-up taints lifted (schedulable), the pod is bound to it and runs. The bench records
when each milestone was first seen: the pod and Node ones from the apiserver's watch, the
decision from the autoscaler's own API object (our NodePool's ``targetNodes`` raise,
Karpenter's NodeClaim), the cloud ones from the cloud's records (our simulated cloud's
create and boot-done times, Karpenter's NodeClaim ``Launched`` condition) and never from an
autoscaler's own counters. This module is the pure half: recorded times in, per-phase
medians out, so fixed timelines test it.

Two rules keep the table honest when the record is not the ideal chain:

- **Out of order.** A milestone seen before an earlier one in the chain (Karpenter's kwok
  Nodes register before their simulated boot ends) counts as reached only when every
  earlier milestone is: its phase takes 0 s and the pod is counted in ``out_of_order``, and
  the time goes to the phase that really held the pod back.
- **Missing.** A phase needs both ends; a pod missing either gives it no sample (``n`` says
  how many pods did). A milestone earlier than the pod's creation is not part of its wait
  (a node that was already there) and counts as missing.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nodepool_operator.cloud import Instance

MILESTONES: Final = (
    "created",
    "unschedulable",
    "decided",
    "cloud_create",
    "boot_done",
    "registered",
    "ready",
    "schedulable",
    "bound",
    "running",
)
#: How each milestone reads in a table.
LABELS: Final = {
    "created": "pod created",
    "unschedulable": "Unschedulable",
    "decided": "scale decision",
    "cloud_create": "cloud create",
    "boot_done": "boot done",
    "registered": "Node registered",
    "ready": "Ready",
    "schedulable": "schedulable",
    "bound": "bound",
    "running": "Running",
}
#: Each phase as (from, to): the wait between two consecutive milestones.
PHASES: Final = tuple(itertools.pairwise(MILESTONES))
#: Taint effects that keep a pod off a node (PreferNoSchedule only steers).
_BLOCKING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass
class PodSeen:
    """What the watch showed of one pod (first times, seconds since the epoch)."""

    created: float | None = None
    unschedulable: float | None = None
    bound: float | None = None
    running: float | None = None
    node: str | None = None


@dataclass
class NodeSeen:
    """What the watch showed of one Node (first times)."""

    registered: float | None = None
    ready: float | None = None
    schedulable: float | None = None
    provider_id: str = ""


@dataclass
class ClaimSeen:
    """What the watch showed of one Karpenter NodeClaim (first times)."""

    created: float
    launched: float | None = None
    provider_id: str = ""


@dataclass(frozen=True)
class Launch:
    """The scale-up behind one Node: when it was decided, created in the cloud, booted."""

    decided: float | None
    cloud_create: float | None
    boot_done: float | None


# -- what a watched object says ----------------------------------------------------------


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler found no node for ``pod`` (``PodScheduled=False``, ``Unschedulable``)."""
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def node_ready(node: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def node_schedulable(node: Mapping[str, Any]) -> bool:
    """Ready, not cordoned and without a taint that keeps pods off (the scenarios' pools
    taint nothing, so every such taint is a start-up one: not-ready, Karpenter's
    unregistered, the bench's boot taint)."""
    spec = node.get("spec") or {}
    return (
        node_ready(node)
        and not spec.get("unschedulable")
        and not any(t.get("effect") in _BLOCKING_EFFECTS for t in spec.get("taints") or [])
    )


# -- joining the records ------------------------------------------------------------------


def nth_after(times: Iterable[float | None], n: int, t0: float) -> float | None:
    """Seconds from ``t0`` until ``n`` of ``times`` had passed (the ``n``-th earliest; ``None``
    entries are milestones not reached), or ``None`` if fewer than ``n`` were reached.

    The Karpenter benchmark's headline, "all fitting pods running", is this over the watch's
    first Running times: a poll every 0.25 s would round each side's end up by as much as a
    poll's period, as large as the differences it has to order."""
    reached = sorted(t for t in times if t is not None)
    if n < 1 or len(reached) < n:
        return None
    return reached[n - 1] - t0


def decision_before(targets: Sequence[tuple[float, int]], at: float) -> float | None:
    """The last raise of a pool's target at or before ``at`` (``targets``: each change of
    ``targetNodes`` as (time, value), oldest first, the first one the value before any
    raise): the decision a VM created at ``at`` answered. If the watch delivered every raise
    after ``at`` (it can lag behind the operator in the same process), the first raise:
    then the decision comes out of order, and the table says so."""
    raises = []
    previous = targets[0][1] if targets else 0
    for when, value in targets[1:]:
        if value > previous:
            raises.append(when)
        previous = value
    before = [t for t in raises if t <= at]
    return before[-1] if before else (raises[0] if raises else None)


def pod_timelines(
    pods: Mapping[str, PodSeen],
    nodes: Mapping[str, NodeSeen],
    launches: Mapping[str, Launch],
) -> dict[str, dict[str, float]]:
    """Each pod that ran: its milestones (only those seen, none before its creation), the
    node ones from the Node it was bound to and the launch behind that Node."""
    out: dict[str, dict[str, float]] = {}
    for name, pod in pods.items():
        if pod.created is None or pod.running is None:
            continue
        seen: dict[str, float | None] = {
            "created": pod.created,
            "unschedulable": pod.unschedulable,
            "bound": pod.bound,
            "running": pod.running,
        }
        node = nodes.get(pod.node or "")
        if node is not None:
            seen |= {
                "registered": node.registered,
                "ready": node.ready,
                "schedulable": node.schedulable,
            }
        launch = launches.get(pod.node or "")
        if launch is not None:
            seen |= {
                "decided": launch.decided,
                "cloud_create": launch.cloud_create,
                "boot_done": launch.boot_done,
            }
        out[name] = {
            m: t for m in MILESTONES if (t := seen.get(m)) is not None and t >= pod.created
        }
    return out


def our_launches(
    instances: Sequence[Instance], targets: Sequence[tuple[float, int]]
) -> dict[str, Launch]:
    """Per Node (named after its VM): the target raise it answered, and the simulated
    cloud's create and boot-done times."""
    return {
        vm.name: Launch(
            decided=decision_before(targets, vm.created_at),
            cloud_create=vm.created_at,
            boot_done=vm.launched_at,
        )
        for vm in instances
    }


def karpenter_launches(
    claims: Mapping[str, ClaimSeen],
    nodes: Mapping[str, NodeSeen],
    boot_done: Mapping[str, float],
) -> dict[str, Launch]:
    """Per Node (matched to its NodeClaim by providerID): the NodeClaim's creation (the
    decision), its ``Launched`` condition (the cloud create) and ``boot_done``'s time for
    the Node (when the bench lifted its boot taint, or when the Node appeared where the
    provider registers it only after the boot)."""
    by_provider = {c.provider_id: c for c in claims.values() if c.provider_id}
    out: dict[str, Launch] = {}
    for name, node in nodes.items():
        claim = by_provider.get(node.provider_id)
        if claim is not None:
            out[name] = Launch(claim.created, claim.launched, boot_done.get(name))
    return out


# -- the table ----------------------------------------------------------------------------


def phase_medians(timelines: Iterable[Mapping[str, float]]) -> dict[str, Any]:
    """Per phase: the median seconds over the pods that have both its ends (``n``), and
    how many pods reached its end before its start (``out_of_order``); plus the median
    total from creation to Running. See the module doc for the rules."""
    samples: dict[str, list[float]] = {f"{a}>{b}": [] for a, b in PHASES}
    early: dict[str, int] = dict.fromkeys(samples, 0)
    totals: list[float] = []
    pods = 0
    for raw in timelines:
        pods += 1
        effective: dict[str, float] = {}
        reached = float("-inf")
        for m in MILESTONES:
            if m not in raw:
                continue
            if raw[m] < reached:
                early[_phase_ending(m)] += 1
            reached = max(reached, raw[m])
            effective[m] = reached
        for a, b in PHASES:
            if a in effective and b in effective:
                samples[f"{a}>{b}"].append(effective[b] - effective[a])
        if "created" in raw and "running" in raw:
            totals.append(raw["running"] - raw["created"])
    return {
        "pods": pods,
        "phases": [
            {
                "from": a,
                "to": b,
                "median_s": _median(samples[f"{a}>{b}"]),
                "n": len(samples[f"{a}>{b}"]),
                "out_of_order": early[f"{a}>{b}"],
            }
            for a, b in PHASES
        ],
        "total": {"median_s": _median(totals), "n": len(totals)},
    }


def last_to_run(timelines: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """The phases of the pod that ran last (:func:`phase_medians` of its timeline alone,
    and its name as ``pod``): the critical path behind "all fitting pods running", which
    the medians over all pods hide (S3's second wave is 13 pods of 45)."""
    ran = {name: t for name, t in timelines.items() if "running" in t}
    if not ran:
        return {**phase_medians([]), "pod": None}
    name = max(ran, key=lambda n: (ran[n]["running"], n))
    return {**phase_medians([ran[name]]), "pod": name}


def _phase_ending(milestone: str) -> str:
    i = MILESTONES.index(milestone)
    return f"{MILESTONES[i - 1]}>{milestone}"


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def table(rows: Sequence[tuple[str, str, Mapping[str, Any]]]) -> str:
    """A Markdown table: one row per (scenario, side, :func:`phase_medians` result); each
    cell the phase's median seconds, with the pods that reached it early in brackets."""
    head = ["scenario", "side", *(f"→ {LABELS[b]}" for _, b in PHASES), "total", "pods"]
    lines = [
        "| " + " | ".join(head) + " |",
        "| --- | --- |" + " ---: |" * (len(PHASES) + 2),
    ]
    for scenario, side, result in rows:
        cells = [_cell(p) for p in result["phases"]]
        total = result["total"]["median_s"]
        lines.append(
            f"| {scenario} | {side} | "
            + " | ".join(cells)
            + f" | {'–' if total is None else f'{total:.2f}'} | {result['pods']} |"
        )
    return "\n".join(lines)


def _cell(phase: Mapping[str, Any]) -> str:
    if phase["median_s"] is None:
        return "–"
    text = f"{phase['median_s']:.2f}"
    if phase["out_of_order"]:
        text += f" [{phase['out_of_order']} early]"
    return text
