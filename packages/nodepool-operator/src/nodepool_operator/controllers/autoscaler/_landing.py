"""Pods the simulation put on new nodes that did not take them: reported, not scaled for again.

The plan places a pod on a booting or new node only if the simulation says that node would take
it. If the node registers, becomes Ready and the scheduler still does not bind the pod, the
simulation and the scheduler disagree about that pod (a taint added at start-up, a constraint
the simulation does not model). Scaling for it again would add a node per round up to maxNodes
(cluster-autoscaler's FilterOutSchedulable guards against the same runaway). So each pod the
plan put on new capacity is remembered with the target it waited for; once the pool has that
many Ready nodes and the scheduler has had ``grace`` seconds to bind it, the pod is
*not taken*: set aside with a reason until it is scheduled, deleted, or the pool's node template
changes (not its targetNodes: the Autoscaler's own raise must not erase what it waits for).

The scheduler may bind other, interchangeable pods to those nodes than the ones the plan chose.
A remembered pod that then fits no Ready node only for want of room was crowded out, not
refused: the caller releases it (:meth:`Landing.release`) and plans for it again like any other pod.

Pure: the state is a value, the clock an argument.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Awaiting", "Landing"]


@dataclass(frozen=True, slots=True)
class Awaiting:
    """A pod (by uid) waiting for the pool to reach ``target`` Ready nodes; ``ready_at``: when
    it first had them."""

    target: int
    ready_at: float | None = None


@dataclass
class Landing:
    """Per Autoscaler: pods awaiting the nodes planned for them, and those not taken."""

    awaiting: dict[str, Awaiting] = field(default_factory=dict)
    not_taken: set[str] = field(default_factory=set)
    template: object = None
    """The node template the verdicts were made for (compared by equality)."""
    settling: set[str] = field(default_factory=set)
    """Pods whose planned nodes are Ready, the scheduler's grace still running: they wait
    for the scheduler, not for capacity, so they drive no scale-up meanwhile."""

    def look(
        self,
        *,
        candidates: Collection[str],
        ready: int,
        registered: int,
        now: float,
        grace: float,
    ) -> float | None:
        """Update from a look at the pool; return the seconds until the next pod's grace
        ends (``None`` if none is counting down). Pods no longer unschedulable drop out. (A
        new node template starts a new :class:`Landing`: no verdict holds for it.)"""
        self.not_taken &= set(candidates)
        self.settling = set()
        next_due: float | None = None
        for uid in list(self.awaiting):
            wait = self.awaiting[uid]
            if uid not in candidates:
                del self.awaiting[uid]
                continue
            if ready < wait.target or registered < wait.target:
                if wait.ready_at is not None:  # a node went away again: wait afresh
                    self.awaiting[uid] = Awaiting(wait.target)
                continue
            ready_at = now if wait.ready_at is None else wait.ready_at
            self.awaiting[uid] = Awaiting(wait.target, ready_at)
            left = ready_at + grace - now
            if left <= 0:
                del self.awaiting[uid]
                self.not_taken.add(uid)
            else:
                self.settling.add(uid)
                next_due = left if next_due is None else min(next_due, left)
        return next_due

    def planned(self, pods_on_new_capacity: Iterable[str], target: int) -> None:
        """Remember pods the plan put on booting or new nodes, waiting for ``target`` nodes
        (a pod already waiting keeps its first target)."""
        for uid in pods_on_new_capacity:
            if uid and uid not in self.not_taken:
                self.awaiting.setdefault(uid, Awaiting(target))

    def release(self, uids: Iterable[str]) -> None:
        """Forget ``uids``: they wait for capacity again, not for the scheduler."""
        for uid in uids:
            self.awaiting.pop(uid, None)
            self.not_taken.discard(uid)
            self.settling.discard(uid)

    def excluded(self, uids: Mapping[str, object]) -> set[str]:
        """The uids among ``uids`` that are not taken."""
        return {uid for uid in uids if uid in self.not_taken}

    def waiting(self, uids: Mapping[str, object]) -> set[str]:
        """The uids among ``uids`` settling: left out of the plan, not reported."""
        return {uid for uid in uids if uid in self.settling}
