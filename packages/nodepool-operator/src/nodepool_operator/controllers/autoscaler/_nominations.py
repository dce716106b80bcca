"""Nominations: the plan holds by default, through the pods' status, not their spec.

Why: kube-scheduler places pending pods in queue order and scores each alone, so the new
nodes of a tight plan fill in the scheduler's layout, not the plan's, and a stranded pod costs
a second scale-up a boot later (S2 in ``docs/benchmarks.md``: 0 -> 20 -> 24 under
MostAllocated). kube-scheduler v1.37.2 tries a pod's ``status.nominatedNodeName`` before any
other node and its nominator holds the nominee's room on that node against pods of the same
or lower priority (``scheduling/_nominate.py``, ``docs/simulation.md`` "Nominated nodes").

How: the plan's new-node slots (the pod keys planned onto each new node, named after the
pool's new VMs in the order the NodePool controller recorded them: the bookkeeping of
:class:`~nodepool_operator.controllers._reserve.Reservation`) become nominations once each
node has registered, never before: the scheduler does not know the name until then.

A nomination is fragile: every failed scheduling attempt of the pod clears it (v1.37.2's
``handleSchedulingFailure`` with the preemption plugin's empty nomination), and with a Node in
the cluster every node that registers or turns Ready sends the waiting pods to such an
attempt. A node that opens the moment it is Ready (the lifecycle controller lifts its not-ready
taint within a second) is then filled in the scheduler's order before a nomination lands. So
the NodePool controller bootstraps the new nodes of an autoscaled pool *gated*: they register
with the reservation taint (``_reserve``), which none of the waiting pods tolerates. While it
stands, kube-scheduler's queueing hint for that taint skips the pods on each node event, so
nothing clears a nomination: a gated node's slot is nominated as soon as its Node registers.
The gates of a scale-up fall together, once all its nodes are Ready (or the first has waited
``hold``), in the order kube-scheduler will try their pods (:func:`in_queue_order`); the caller
lifts a gate only if every nomination of its slot took. "Ready" here is the scheduler's:
the Ready condition and no start-up taint left (``ready_for``, the caller's
``_node_manifest.open_for``). The kind of pod kube-scheduler tries first gets no nomination
at all (:func:`lead_kind`): the lifts take tens of milliseconds to land, and the pods tried
meanwhile, the head of the queue, would lose theirs. A Ready gated node is opened even if
the plan's pods have gone elsewhere, and at the latest after the landing grace (the decide
step's lift), so a gate never strands room.

A nomination the scheduler drops after all (a pod tried while its node's gate was still up,
just after another node opened) is written again on the next pass, for as long as the node is
not Ready or Ready for less than the landing grace. A pod the scheduler nominated elsewhere
itself (preemption, or its own expectation while binding) is left alone. Once a slot is done
(its pods bound anywhere or gone, its node gone, or Ready for the landing grace) a nomination
of ours still standing is withdrawn: it would hold room on that node for as long as it stands.

Pure: a function of the slots, the pool's Nodes (how long each has been Ready) and the
unbound pods' views, as observe read them at the boundary (``scheduling.read_pending``: a pod's
``status.nominatedNodeName`` is its view's ``nominated``, and its verdict says what the
scheduler made of it under the nomination): no object is read here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodepool_operator.scheduling import PodView, Resources, nomination_patch

__all__ = ["Nomination", "Nominations", "in_queue_order", "lead_kind", "nominations"]


@dataclass(frozen=True, slots=True)
class Nomination:
    """Nominate pod ``pod`` (key) to Node ``node`` (``None``: withdraw ours): a merge patch of
    its status subresource."""

    pod: str
    node: str | None
    patch: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Nominations:
    """What one pass writes, the gated nodes to open once those writes took (by node name),
    the slots that are done (by node name), and the seconds until the next slot's grace ends
    (``None``: none counting down)."""

    writes: tuple[Nomination, ...]
    opens: tuple[str, ...]
    done: tuple[str, ...]
    next_due: float | None
    held: tuple[tuple[str, str], ...] = ()
    """(pod key, node) of the planned pods waiting for a registered node that is open or
    opens now: the nominations :mod:`._renominate` writes back when the scheduler drops them."""


def nominations(
    slots: Mapping[str, Sequence[str]],
    *,
    vms: Collection[str],
    nodes: Container[str],
    pods: Mapping[str, PodView],
    ready_for: Callable[[str], float | None],
    grace: float,
    gated: Container[str] = frozenset(),
    hold: float = 0.0,
    free: Mapping[str, Resources] | None = None,
    queued_at: Mapping[str, float] | None = None,
    unheld: Container[str] = frozenset(),
) -> Nominations:
    """The nominations for the named ``slots`` (node name -> planned pod keys, plan order).

    ``vms``: the names of the pool's VMs as recorded; ``nodes``: the names of its registered
    Nodes (a slot named by neither is gone: its VM was replaced or removed); ``pods``: the
    views of the unbound pods of the watched namespaces by key (a key missing is bound or
    gone); ``ready_for(name)``: seconds that registered Node has been Ready (``None``: not
    Ready); ``gated``: the registered Nodes still carrying their gate (the reservation
    taint); ``hold``: how long a Ready gated node waits for the other slots' nodes, so that
    the gates fall together, in the order kube-scheduler will try their pods (``queued_at``: when
    each pod was first seen unschedulable, see :func:`in_queue_order`); ``free``: the room
    the pods bound to each registered Node leave.
    On an open node a pod is nominated again only while that room, less what the node's
    other nominees hold, still takes it: a pod crowded out of its planned node is the landing
    guard's to plan again, and nominating it there would only have the scheduler clear it at
    its next try, a write each time. A pod in two slots (planned again by a later scale-up)
    belongs to the first. The pods of ``unheld`` (:func:`lead_kind`) are never nominated; when
    no gated or coming slot holds any other, there is no nomination to keep and each gate
    falls as soon as its node is Ready, without waiting for the others."""
    writes: list[Nomination] = []
    done: list[str] = []
    due: list[float] = []
    holding: list[tuple[str, str]] = []
    seen: set[str] = set()
    ready_gates: dict[str, tuple[dict[str, PodView], float]] = {}
    coming = False  # a live slot whose node is not open-able yet (not registered or not Ready)
    guarded = False  # a nomination to keep behind a gate (else a gate may fall on its own)
    for name, keys in slots.items():
        mine = [k for k in keys if k not in seen]
        seen.update(keys)
        present = {k: pods[k] for k in mine if k in pods}
        waiting = {k: pod for k, pod in present.items() if k not in unheld}
        registered = name in nodes
        if not present:
            done.append(name)
            continue
        gone = not registered and name not in vms
        if not registered and not gone:  # not registered yet
            coming = True
            guarded = guarded or bool(waiting)
            continue
        held = ready_for(name) if registered else None
        if gone or (held is not None and held >= grace):
            done.append(name)
            writes += [
                Nomination(key, None, patch)
                for key, pod in waiting.items()
                if pod.nominated == name and (patch := nomination_patch(pod, None))
            ]
            continue
        if held is not None:
            due.append(grace - held)
        if name in gated:
            # behind its gate a nomination is safe (no Node event sends the pods to an
            # attempt), so it is written as soon as the Node registered: when the gates fall,
            # only the lifts are left to do
            writes += _nominate(name, waiting)
            guarded = guarded or bool(waiting)
            if held is None:
                coming = True
            else:
                ready_gates[name] = (present, held)
            continue
        room = None if free is None else free.get(name)
        writes += _nominate(name, waiting, room)
        holding += [(key, name) for key in waiting]
    opens: list[str] = []
    if ready_gates:
        longest = max(held for _, held in ready_gates.values())
        if coming and guarded and longest < hold:
            due.append(hold - longest)  # the other nodes have until then to be Ready
        else:
            first = queued_at or {}

            def queued(name: str) -> float:
                return min((first.get(k, math.inf) for k in ready_gates[name][0]), default=0.0)

            for name in sorted(ready_gates, key=queued):
                opens.append(name)
                holding += [(key, name) for key in ready_gates[name][0] if key not in unheld]
    return Nominations(
        tuple(writes), tuple(opens), tuple(done), min(due, default=None), tuple(holding)
    )


def _nominate(
    name: str, waiting: Mapping[str, PodView], room: Resources | None = None
) -> list[Nomination]:
    """Nominate the ``waiting`` pods without a nomination to ``name``, those that fit in
    ``room`` (when given) once the nominees still standing there hold theirs."""
    if room is not None:
        for pod in waiting.values():
            if pod.nominated == name:
                room = room - pod.requests
    out: list[Nomination] = []
    for key, pod in waiting.items():
        # none: ours to write; another node: the scheduler's own, left alone
        if pod.nominated is not None:
            continue
        if room is not None:
            if not pod.requests.fits_in(room):
                continue
            room = room - pod.requests
        if patch := nomination_patch(pod, name):
            out.append(Nomination(key, name, patch))
    return out


def in_queue_order(
    slots: Sequence[Sequence[str]], pods: Mapping[str, PodView], seen: Mapping[str, float]
) -> list[tuple[str, ...]]:
    """``slots`` (pod keys per new node, in the nodes' order) with interchangeable pods dealt
    out in the order kube-scheduler will try them: the first slot gets the earliest of each
    kind, and so on; each slot keeps how many of each kind it holds.

    Why: when the gates fall, every waiting pod is sent to an attempt at the first lift, and
    kube-scheduler tries them by priority, then by the time of their last failure, which for
    a pod held off by the gates is its first (``seen``: when the watch first showed it
    unschedulable, in the same order). The gates are lifted one after the other in the
    slots' order, so a pod tried before its own node's lift has arrived (and loses its
    nomination) becomes rare. Pods are interchangeable when no node tells them apart and
    nothing refers to their labels: the same request, node constraints, priority, host ports
    and volume zones, and no pod of the plan with pod (anti-)affinity or spread constraints.
    """
    views = [pods[k] for slot in slots for k in slot if k in pods]
    if not _interchangeable(views):
        return [tuple(slot) for slot in slots]

    queues: dict[tuple[object, ...], list[str]] = {}
    for slot in slots:
        for key in slot:
            if key in pods:
                queues.setdefault(_kind(pods[key]), []).append(key)
    for keys in queues.values():
        keys.sort(key=lambda k: seen.get(k, math.inf))
    taken = {k: iter(keys) for k, keys in queues.items()}
    return [
        tuple(next(taken[_kind(pods[key])]) if key in pods else key for key in slot)
        for slot in slots
    ]


def lead_kind(
    slots: Sequence[Sequence[str]], pods: Mapping[str, PodView], seen: Mapping[str, float]
) -> frozenset[str]:
    """The keys of the planned pods that get no nomination: those of the kind kube-scheduler
    will try first when the gates fall (the kind of the pod first seen unschedulable), when
    the plan's pods are interchangeable within their kinds and all of one priority; else none.

    Why: the gates cannot fall at once (each is a write of its own; twenty take tens of
    milliseconds at the apiserver), and the first lift sends every waiting pod to an
    attempt, in queue order. A nominated pod tried while its own node is still gated loses
    its nomination, and its room is then anyone's. The pods at the head of the queue are the
    ones tried meanwhile, so they are left without a nomination: nothing to lose. They land
    where the nominations of the others leave room, and, being alike, they cannot strand each
    other: the plan left room for each of them on some new node, and any of them fits any
    such room. That needs the others' nominations to hold that room against them, which the
    nominator does only for pods of the same or a higher priority: so one priority for all.
    The pods behind them in the queue are nominated, and come to their attempts after the
    lifts have landed (S2 in ``docs/benchmarks.md``: 60 pods of 900m / 3100Mi first, then 60
    of 3500m / 28Gi)."""
    views = {k: pods[k] for slot in slots for k in slot if k in pods}
    if not views or not _interchangeable(list(views.values())):
        return frozenset()
    if len({v.priority for v in views.values()}) > 1:
        return frozenset()
    first = min(views, key=lambda k: (seen.get(k, math.inf), k))
    lead = _kind(views[first])
    return frozenset(k for k, v in views.items() if _kind(v) == lead)


def _interchangeable(views: Sequence[PodView]) -> bool:
    """Whether pods of one :func:`_kind` may stand in for each other: none of the plan's pods
    refers to other pods' labels (pod affinity, anti-affinity, spread constraints)."""
    return not any(v.affinity or v.anti_affinity or v.spread for v in views)


def _kind(view: PodView) -> tuple[object, ...]:
    """What tells pods apart for a node: request, node constraints, priority, host ports and
    volume zones."""
    return (view.requests, view.constraints, view.priority, view.host_ports, view.volume_terms)
