"""A pool being deleted: each Node tainted, drained and removed with its VM, bounded by
``spec.disruption.terminationGracePeriod`` (:func:`plan_deletion`), then which VMs go, the
pool's Deleting condition, the Events and whether the finalizer goes
(:func:`deletion_outcome`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from nodepool_operator.controllers.nodepool._drain import TERMINATING_POLL, DrainStatus
from nodepool_operator.controllers.nodepool._drain_deadline import (
    GRACE_EXPIRED,
    Condition,
    deletion_condition,
    grace_expired_note,
    remaining,
)
from nodepool_operator.controllers.nodepool._events import Event, normal
from nodepool_operator.controllers.nodepool._outcome import MIN_POLL
from nodepool_operator.controllers.nodepool.records import PoolNode

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Deleted

__all__ = [
    "DeletionOutcome",
    "DeletionPlan",
    "Step",
    "deletion_outcome",
    "plan_deletion",
    "untainted_wait",
    "waiting_for",
]


Step = Literal["drain", "force", "remove"]


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """One pass over a deleted pool's Nodes, all at once (each Node's pods are paced by
    their PodDisruptionBudgets, not by the pool)."""

    expired: bool
    """``terminationGracePeriod`` is over: Nodes go with the pods left on them."""
    left: float
    """Seconds of it left."""
    taint: tuple[str, ...] = ()
    """Nodes to taint before any is drained: a pod evicted from one must not land on
    another about to be drained (it would be evicted twice)."""
    steps: tuple[tuple[PoolNode, Step], ...] = ()
    """Each Node and what happens to it: drained (then removed once no workload pod is
    left), removed with the pods still on it (counted first), or removed at once."""


def plan_deletion(deleted: Deleted, now: float) -> DeletionPlan:
    """Taint, evict, and delete each Node and its VM once no workload pod is left, as a
    scale-down does; only the pods' own holds apply (as for ``kubectl delete node``). A Node
    that is not Ready or whose VM is gone is not drained (its pods could never finish
    terminating). Past the grace period, each Node goes with the pods left on it (the pod
    garbage collector deletes pods bound to a Node that is gone)."""
    left = remaining(deleted.deleted_at, deleted.grace, now)
    expired = left <= 0

    def drainable(node: PoolNode) -> bool:
        return node.instance_id in deleted.alive and node.ready

    taint = (
        () if expired else tuple(n.name for n in deleted.nodes if drainable(n) and not n.tainted)
    )
    steps: list[tuple[PoolNode, Step]] = []
    for node in deleted.nodes:
        if not drainable(node):
            steps.append((node, "remove"))
        else:
            steps.append((node, "force" if expired else "drain"))
    return DeletionPlan(expired=expired, left=left, taint=taint, steps=tuple(steps))


def waiting_for(node_name: str, status: DrainStatus) -> str:
    """What a drain waits for, in words that do not change from one pass to the next while
    it waits for the same thing (the pool's Deleting condition is not rewritten each pass)."""
    if status.blocked_by is not None:
        return status.message
    if status.pdb_blocked:
        return f"node {node_name}: {status.pdb_blocked} pod(s) held by a PodDisruptionBudget"
    return f"node {node_name}: pods terminating"


def untainted_wait(node_name: str) -> tuple[str, float]:
    """A Node the taint patch missed (changed under it, or gone): taint it on a fresh read
    first; what it waits for, and when to look again."""
    return f"node {node_name}: pods terminating", TERMINATING_POLL


@dataclass(frozen=True, slots=True)
class DeletionOutcome:
    terminate: tuple[str, ...]
    """VM ids to terminate now (all but those of Nodes still draining)."""
    condition: Condition | None
    """The pool's Deleting condition to write, if any."""
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    """Still draining: look again then. None: the finalizer goes."""


def deletion_outcome(
    deleted: Deleted,
    decided: DeletionPlan,
    draining: Mapping[str, tuple[str, str]],
    waits: Sequence[float],
    forced: Mapping[str, int],
) -> DeletionOutcome:
    """After the pass over a deleted pool's Nodes: which VMs go, the condition, the Events,
    and whether the finalizer goes. ``draining``: each Node still draining (its VM's id and
    what it waits for); ``forced``: the pods left per Node past the grace period."""
    keep = {instance_id for instance_id, _ in draining.values()}
    terminate = tuple(sorted(deleted.ids - keep))
    grace = deleted.grace
    if draining:
        notes = {node: note for node, (_, note) in draining.items()}
        return DeletionOutcome(
            terminate,
            deletion_condition(notes, grace, expired=False),
            requeue_after=max(min([*waits, decided.left]), MIN_POLL),
        )
    events: list[Event] = []
    condition = None
    if forced:
        events.append(
            Event("Warning", GRACE_EXPIRED, grace_expired_note(grace, forced), action="Delete")
        )
        notes = {node: f"node {node}: {n} pod(s) not evicted" for node, n in forced.items()}
        condition = deletion_condition(notes, grace, expired=True)
    note = f"deleted {len(deleted.nodes)} node(s) and {len(deleted.ids)} VM(s)"
    events.append(normal("Deleted", note, action="Delete"))
    return DeletionOutcome(terminate, condition, tuple(events))
