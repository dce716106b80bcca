"""A consolidation's replacement, followed from one pass to the next.

Why: in some spread layouts no node's pods fit on the others, though the pods need fewer
nodes (:func:`~nodepool_operator.scheduling.consolidate` finds a :class:`~nodepool_operator.
scheduling.Replacement`: drain these nodes once that many new ones are up). A drain alone
never gets there; trading nodes for fewer new ones does, and the trade spans several passes:

1. the nodes to drain are tracked unneeded like any other (``scaleDownUnneededTime``) and
   named on their Nodes once due; then one write raises the target by the new nodes;
2. while those boot nothing is lowered, and the threshold rule does not look: the new nodes,
   empty until the drain, are where the drained pods are to go, not nodes to take away; a
   wait longer than the max provision time (a node registered but never Ready) drops it;
3. once they are Ready, the ordinary consolidation (the named nodes first) frees the nodes to
   drain onto them, and the target goes down. If it frees none of them (pods took the room
   meanwhile), the replacement is dropped and no other starts for a while
   (:data:`REST_FACTOR` times the unneeded time): the new nodes then go by the rules every
   node goes by, and the pool does not launch and remove nodes in a loop.

kube-scheduler, not the plan, places the drained pods: under ``LeastAllocated`` a pod the plan
put beside another node's pods may land on the new node instead, and the next node's pods
then have no place (the pool back where it started, its pods moved for nothing). So a
replacement dropped with the pool no smaller than when it began remembers the pool's
workload (:func:`layout`: the shapes of the pods on its nodes), and none starts again until
that changes: the same layout would fail the same way.

The drain goes as the pool's disruption budget allows: with a budget of one node, one node at
a time, each lowering writing the target the next pass expects. A replacement ends when its
nodes are gone, or early when the target is none it wrote (a provisioning timeout, a hand),
which rests it too. A target it wrote before the last still counts: right after a write the
cache may show the one before, and ending then would take the names off the nodes to drain
before the NodePool controller read them (it would remove the empty new node instead).
Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Final

from nodepool_operator.api import format_duration
from nodepool_operator.scheduling import Resources, ScaleDownNode

__all__ = [
    "REST_FACTOR",
    "Layout",
    "Replacing",
    "layout",
    "replace_note",
    "replace_text",
    "under_way",
]

#: How long, in unneeded times, no replacement starts after one was dropped.
REST_FACTOR: Final = 3

Layout = tuple[Resources, ...]
"""A pool's workload pods' requests, sorted (:func:`layout`)."""


@dataclass(frozen=True, slots=True)
class Replacing:
    """A replacement under way: the nodes to drain once the new nodes are Ready, the target
    it last wrote, the target before its raise (``start``: no smaller at its end, it
    failed), and when it raised it (``since``, on the decision's monotonic clock)."""

    drain: tuple[str, ...]
    target: int
    start: int
    since: float = 0.0
    wrote: tuple[int, ...] = ()
    """Every target it wrote before ``target``: the cache may show the one before the last
    for a moment after a write."""


def layout(nodes: Iterable[ScaleDownNode]) -> Layout:
    """The pool's workload as a replacement sees it: each node's workload pods' requests, as
    one sorted tuple (names left out: a Deployment's new pods are the same workload)."""
    requests = (pod.requests for node in nodes for pod in node.workload)
    return tuple(
        sorted(requests, key=lambda r: (r.cpu, r.memory, r.ephemeral_storage, r.pods, r.extended))
    )


def under_way(
    replacing: Replacing | None, *, target: int, candidates: Collection[str]
) -> tuple[Replacing | None, bool]:
    """``replacing`` as it stands now, and whether it ended before its drain. It stands while
    the pool's target is the one it last wrote; its nodes still to drain are those still
    among the pool's ``candidates`` (Ready, not leaving: the NodePool controller took the
    others, or they went); with none left it is done."""
    if replacing is None:
        return None, False
    if target != replacing.target and target not in replacing.wrote:
        return None, True
    left = tuple(name for name in replacing.drain if name in candidates)
    return (replace(replacing, drain=left) if left else None), False


def replace_text(
    before: int, after: int, drain: Sequence[str], unneeded: timedelta, optimum: int
) -> str:
    """E.g. ``scale up 3 -> 4 to replace 2 nodes unneeded for 10m (a, b) with 1 new node
    (consolidation: the pods fit on 2 nodes)``."""
    new = after - before
    return (
        f"scale up {before} -> {after} to replace {len(drain)} nodes unneeded for "
        f"{format_duration(unneeded)} ({', '.join(drain)}) with {new} new "
        f"node{'' if new == 1 else 's'} (consolidation: the pods fit on {optimum} "
        f"node{'' if optimum == 1 else 's'})"
    )


def replace_note(replacing: Replacing | None, *, resting: bool, failed: bool) -> str | None:
    """What ``status.lastDecision`` says of replacements, when something holds one back or
    one is under way (a text that stays the same from pass to pass while the state does: the
    status is written only when it changes). ``resting``: one was dropped a short while ago;
    ``failed``: the pool's workload is one a replacement failed for."""
    if replacing is not None:
        return f"replacing {len(replacing.drain)} nodes ({', '.join(replacing.drain)})"
    if resting:
        return "no replacement for now: the last one was dropped"
    if failed:
        return (
            "no replacement: one failed for this workload (the scheduler put the moved pods "
            "elsewhere); none until it changes"
        )
    return None
