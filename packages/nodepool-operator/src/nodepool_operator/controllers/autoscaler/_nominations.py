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
node has registered, never before: the scheduler does not know the name until then, and the
attempt a Node's registration causes (it registers tainted not-ready) would drop it anyway.
A nomination the scheduler drops (each failed attempt clears it, and every node that opens
sends the pods waiting for closed ones to such an attempt) is written again on the next
pass, for as long as the node is not Ready or Ready for less than the landing grace. A pod the
scheduler nominated elsewhere itself (preemption, or its own expectation while binding) is
left alone. Once a slot is done (its pods bound anywhere or gone, its node gone, or Ready for
the landing grace) a nomination of ours still standing is withdrawn: it would hold room on
that node for as long as it stands.

Pure: a function of the slots, the pool's Nodes and the unbound pods as read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeloop import Object
from nodepool_operator.scheduling import PodReason, classify, nomination_patch

__all__ = ["Nomination", "Nominations", "candidate", "nominations"]


@dataclass(frozen=True, slots=True)
class Nomination:
    """Nominate pod ``pod`` (key) to Node ``node`` (``None``: withdraw ours): a merge patch of
    its status subresource."""

    pod: str
    node: str | None
    patch: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Nominations:
    """What one pass writes, the slots that are done (by node name), and the seconds until
    the next slot's grace ends (``None``: none counting down)."""

    writes: tuple[Nomination, ...]
    done: tuple[str, ...]
    next_due: float | None


def nominations(
    slots: Mapping[str, Sequence[str]],
    *,
    vms: Collection[str],
    nodes: Mapping[str, Object],
    pods: Mapping[str, Object],
    ready_for: Callable[[Object], float | None],
    grace: float,
) -> Nominations:
    """The nominations for the named ``slots`` (node name -> planned pod keys, plan order).

    ``vms``: the names of the pool's VMs as recorded; ``nodes``: its registered Nodes by
    name (a slot named by neither is gone: its VM was replaced or removed); ``pods``: the
    unbound pods of the watched namespaces by key (a key missing is bound or gone);
    ``ready_for(node)``: seconds it has been Ready (``None``: not Ready). A pod in two slots
    (planned again by a later scale-up) belongs to the first."""
    writes: list[Nomination] = []
    done: list[str] = []
    next_due: float | None = None
    seen: set[str] = set()
    for name, keys in slots.items():
        mine = [k for k in keys if k not in seen]
        seen.update(keys)
        waiting = {k: pods[k] for k in mine if k in pods}
        node = nodes.get(name)
        if not waiting:
            done.append(name)
            continue
        gone = node is None and name not in vms
        if node is None and not gone:  # not registered yet
            continue
        held = None if node is None else ready_for(node)
        if gone or (held is not None and held >= grace):
            done.append(name)
            writes += [
                Nomination(key, None, patch)
                for key, pod in waiting.items()
                if _nominated(pod) == name and (patch := nomination_patch(pod, None))
            ]
            continue
        if held is not None:
            left = grace - held
            next_due = left if next_due is None else min(next_due, left)
        writes += [
            Nomination(key, name, patch)
            for key, pod in waiting.items()
            # empty: ours to write; another node: the scheduler's own, left alone
            if _nominated(pod) == "" and (patch := nomination_patch(pod, name))
        ]
    return Nominations(tuple(writes), tuple(done), next_due)


def _nominated(pod: Object) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def candidate(pod: Object, nodes: Container[str] | None = None) -> bool:
    """Whether ``pod`` is a scale-up candidate, a pod nominated to one of ``nodes`` (the
    pool's Nodes; ``None``: any) included when the scheduler's verdict under the nomination
    is still Unschedulable.

    Why: :func:`~nodepool_operator.scheduling.classify` leaves a nominated pod out (it will
    land where preemption made room). A pod we nominated to a new node still waits for the
    capacity the plan made for it: left out, the plan would not count it, and scale-down
    would take its node, where nothing is bound yet, for empty."""
    verdict = classify(pod)
    if verdict.reason is not PodReason.NOMINATED:
        return verdict.candidate
    if nodes is not None and _nominated(pod) not in nodes:
        return False
    status = {**(pod.get("status") or {}), "nominatedNodeName": ""}
    return classify({**pod, "status": status}).candidate
