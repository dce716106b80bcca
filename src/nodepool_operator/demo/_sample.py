"""One look at the demo's world: pods, the pool, its Nodes, the cloud and the operator's writes.

:func:`take_sample` is pure: the driver hands it what its watch cache, the cloud file and the
metrics registry hold at one instant, so the live view, the chart and the figures all read the
same numbers and can be tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodepool_operator.cloud import Instance
from nodepool_operator.demo._apiactivity import ApiActivity
from nodepool_operator.demo._workload import POOL_LABEL, Role, role_of


@dataclass(frozen=True)
class PodCounts:
    """Pods of one namespace (or of one kind) that are not bound yet, and those that are."""

    pending: int = 0
    scheduled: int = 0


@dataclass(frozen=True)
class Sample:
    """The demo's world ``t`` seconds after the burst of pods was created.

    "Scheduled" means bound: ``spec.nodeName`` is set; "running" that the node's kubelet
    (kwok) runs it.
    """

    t: float
    by_namespace: dict[str, PodCounts] = field(default_factory=dict)
    #: The pods that fit a node of the pool and are in a watched namespace.
    fitting: PodCounts = field(default_factory=PodCounts)
    #: Pods that must not cause a scale-up but that the scheduler bound into spare room.
    extras_bound: tuple[str, ...] = ()
    #: ``namespace/name -> note`` of the Autoscaler's latest NotTriggerScaleUp Event on each
    #: demo pod: its own account of why that pod does not get a node.
    not_triggered: dict[str, str] = field(default_factory=dict)
    #: The pods that must not cause a scale-up and did not: in a watched namespace, those the
    #: Autoscaler said so about (NotTriggerScaleUp); in an unwatched one, all (it never looks).
    not_triggering: tuple[str, ...] = ()
    #: The notes of the Autoscaler's scale Events (TriggeredScaleUp, ScaleDown), oldest first:
    #: one per write of targetNodes, unlike ``last_decision``, which the next look overwrites.
    scale_events: tuple[str, ...] = ()
    target_nodes: int = 0
    current_nodes: int = 0
    ready_nodes: int = 0
    nodes: int = 0
    scale_operation: str = "inactive"
    vms: int = 0
    vms_running: int = 0
    #: Demo pods that run (phase Running, with a pod IP): kwok runs the pods bound to pool nodes.
    running: int = 0
    api: ApiActivity = field(default_factory=ApiActivity)
    last_decision: str = ""

    @property
    def pending(self) -> int:
        """Demo pods not bound yet, whatever the reason."""
        return sum(c.pending for c in self.by_namespace.values())

    @property
    def converged(self) -> bool:
        """Every pod that fits is bound."""
        return self.fitting.pending == 0 and self.fitting.scheduled > 0


def take_sample(
    t: float,
    *,
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    pool: Mapping[str, Any] | None,
    autoscaler: Mapping[str, Any] | None,
    vms: Sequence[Instance],
    api: ApiActivity,
    events: Sequence[Mapping[str, Any]] = (),
) -> Sample:
    """Count what the demo shows. ``pods`` may include pods of others; only the demo's count.

    ``nodes`` are the pool's Nodes, ``vms`` the live VMs tagged for the pool, ``events``
    (events.k8s.io/v1) are searched for the Autoscaler's NotTriggerScaleUp on pods.
    """
    notes = not_triggered_notes(events)
    by_namespace: dict[str, list[int]] = {}
    fitting = [0, 0]
    running = 0
    extras: list[str] = []
    not_triggering: list[str] = []
    for pod in pods:
        role = role_of(pod)
        if role is None or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        bound = 1 if pod.get("spec", {}).get("nodeName") else 0
        namespace = str(pod["metadata"].get("namespace", ""))
        key = f"{namespace}/{pod['metadata']['name']}"
        by_namespace.setdefault(namespace, [0, 0])[bound] += 1
        status = pod.get("status") or {}
        running += status.get("phase") == "Running" and bool(status.get("podIP"))
        if role is Role.FITS:
            fitting[bound] += 1
            continue
        if bound:
            extras.append(key)
        if role is Role.UNWATCHED or key in notes:
            not_triggering.append(key)
    pool_nodes = [n for n in nodes if n.get("metadata", {}).get("labels", {}).get(POOL_LABEL)]
    spec = (pool or {}).get("spec", {})
    status = (pool or {}).get("status", {})
    return Sample(
        t=t,
        by_namespace={ns: PodCounts(*counts) for ns, counts in sorted(by_namespace.items())},
        fitting=PodCounts(*fitting),
        extras_bound=tuple(sorted(extras)),
        not_triggered=notes,
        not_triggering=tuple(sorted(not_triggering)),
        scale_events=scale_notes(events),
        target_nodes=int(spec.get("targetNodes", 0)),
        current_nodes=int(status.get("currentNodes", 0)),
        ready_nodes=sum(1 for n in pool_nodes if node_ready(n)),
        nodes=len(pool_nodes),
        scale_operation=str(status.get("scaleOperation", "inactive")),
        vms=len(vms),
        vms_running=sum(1 for vm in vms if vm.state == "running"),
        running=running,
        api=api,
        last_decision=str((autoscaler or {}).get("status", {}).get("lastDecision") or ""),
    )


NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
_SCALED = frozenset({"TriggeredScaleUp", "ScaleDown"})


def scale_notes(events: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The notes of the Autoscaler's scale Events about itself, by time.

    It records each scale on the Autoscaler and on the pool; the Autoscaler's copy is enough.
    """
    scaled = [
        (str(e.get("eventTime") or ""), str(e.get("note", "")))
        for e in events
        if e.get("reason") in _SCALED and (e.get("regarding") or {}).get("kind") == "Autoscaler"
    ]
    return tuple(note for _, note in sorted(scaled))


def not_triggered_notes(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``namespace/name -> note`` of the latest NotTriggerScaleUp Event on each Pod."""
    latest: dict[str, tuple[str, str]] = {}
    for event in events:
        regarding = event.get("regarding") or {}
        if event.get("reason") != NOT_TRIGGER_SCALE_UP or regarding.get("kind") != "Pod":
            continue
        key = f"{regarding.get('namespace', '')}/{regarding.get('name', '')}"
        # eventTime is RFC 3339 in UTC with a fixed width, so strings order like times.
        when = str(event.get("eventTime") or "")
        if key not in latest or when >= latest[key][0]:
            latest[key] = (when, str(event.get("note", "")))
    return {key: note for key, (_, note) in sorted(latest.items())}


def node_ready(node: Mapping[str, Any]) -> bool:
    """The Node's ``Ready`` condition is ``True``."""
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
