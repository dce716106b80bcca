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

Pure: a function of the slots, the pool's Nodes (how long each has been Ready) and the
unbound pods' views, as observe read them at the boundary (``scheduling.read_pending``: a pod's
``status.nominatedNodeName`` is its view's ``nominated``, and its verdict says what the
scheduler made of it under the nomination): no object is read here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodepool_operator.scheduling import PodView, nomination_patch

__all__ = ["Nomination", "Nominations", "nominations"]


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
    nodes: Container[str],
    pods: Mapping[str, PodView],
    ready_for: Callable[[str], float | None],
    grace: float,
) -> Nominations:
    """The nominations for the named ``slots`` (node name -> planned pod keys, plan order).

    ``vms``: the names of the pool's VMs as recorded; ``nodes``: the names of its registered
    Nodes (a slot named by neither is gone: its VM was replaced or removed); ``pods``: the
    views of the unbound pods of the watched namespaces by key (a key missing is bound or
    gone); ``ready_for(name)``: seconds that registered Node has been Ready (``None``: not
    Ready). A pod in two slots (planned again by a later scale-up) belongs to the first."""
    writes: list[Nomination] = []
    done: list[str] = []
    next_due: float | None = None
    seen: set[str] = set()
    for name, keys in slots.items():
        mine = [k for k in keys if k not in seen]
        seen.update(keys)
        waiting = {k: pods[k] for k in mine if k in pods}
        registered = name in nodes
        if not waiting:
            done.append(name)
            continue
        gone = not registered and name not in vms
        if not registered and not gone:  # not registered yet
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
            left = grace - held
            next_due = left if next_due is None else min(next_due, left)
        writes += [
            Nomination(key, name, patch)
            for key, pod in waiting.items()
            # none: ours to write; another node: the scheduler's own, left alone
            if pod.nominated is None and (patch := nomination_patch(pod, name))
        ]
    return Nominations(tuple(writes), tuple(done), next_due)
