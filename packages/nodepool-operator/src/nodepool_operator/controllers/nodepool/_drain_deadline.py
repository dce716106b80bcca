"""When a drain stops waiting, and what is said about it. Pure.

Two waits are bounded, each counted from a time the cluster keeps (so a restart of the
operator neither restarts nor forgets them):

* deleting a pool drains its nodes for at most ``spec.disruption.terminationGracePeriod``
  from the pool's ``deletionTimestamp``; then the nodes and VMs go anyway, with the pods
  left on them (Karpenter's terminationGracePeriod), said in an Event and the pool's
  ``Deleting`` condition;
* a scale-down drains a node for at most ``spec.disruption.drainTimeout`` from the
  ``timeAdded`` of its ``kubeloop.dev/disrupting`` taint; then the node is untainted and
  kept, annotated :data:`DRAIN_TIMED_OUT_AT` with the time, and not chosen again for
  :data:`RECHECK_SECONDS`, so the scale-down moves on to another candidate instead of
  draining the same node again at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Final, Literal

from nodepool_operator.api import DELETING_CONDITION, format_duration
from nodepool_operator.controllers._unneeded import (  # the stamp, shared with the Autoscaler
    DRAIN_TIMED_OUT_AT,
    RECHECK_SECONDS,
    parse_time,
    rest_left,
)

__all__ = [
    "DRAINING",
    "DRAIN_TIMED_OUT",
    "GRACE_EXPIRED",
    "deletion_condition",
    "drain_timeout_note",
    "grace_expired_note",
    "remaining",
    "resting_for",
]

#: Event reason (pool and node) when a scale-down drain is given up.
DRAIN_TIMED_OUT: Final = "DrainTimedOut"
#: Event and condition reason when a pool's deletion stops waiting for its drains.
GRACE_EXPIRED: Final = "TerminationGracePeriodExpired"
#: Condition reason while a pool's deletion waits for its nodes to drain.
DRAINING: Final = "Draining"

Condition = tuple[str, Literal["True", "False", "Unknown"], str, str]
_MAX_MESSAGE = 32768
_NAMED = 5


def remaining(since: float | None, limit: timedelta, now: float) -> float:
    """Seconds left of a wait of ``limit`` that began at ``since`` (≤ 0: it is over). A wait
    whose start is unknown has all of it left: it is never cut short on a guess."""
    if since is None:
        return limit.total_seconds()
    return since + limit.total_seconds() - now


def resting_for(annotations: Mapping[str, str], now: float) -> float:
    """Seconds until a node whose scale-down drain timed out may be chosen again (0: it may,
    or it never timed out)."""
    return rest_left(parse_time(annotations.get(DRAIN_TIMED_OUT_AT)), now)


def _named(draining: Mapping[str, str]) -> str:
    names = sorted(draining)
    text = "; ".join(draining[n] or n for n in names[:_NAMED])
    if len(names) > _NAMED:
        text += f"; and {len(names) - _NAMED} more node(s)"
    return text


def deletion_condition(
    draining: Mapping[str, str], grace: timedelta, *, expired: bool
) -> Condition:
    """The pool's ``Deleting`` condition: ``draining`` maps each node still draining to what
    it waits for (a PodDisruptionBudget, a do-not-disrupt pod, pods terminating)."""
    period = format_duration(grace)
    if expired:
        message = f"terminationGracePeriod {period} ran out; deleting the nodes anyway"
        if draining:
            message += f": {_named(draining)}"
        return (DELETING_CONDITION, "True", GRACE_EXPIRED, message[:_MAX_MESSAGE])
    message = f"draining {len(draining)} node(s) for at most {period}: {_named(draining)}"
    return (DELETING_CONDITION, "True", DRAINING, message[:_MAX_MESSAGE])


def grace_expired_note(grace: timedelta, forced: Mapping[str, int]) -> str:
    """The Event note when a pool's deletion stops waiting: ``forced`` maps each node not
    drained in time to the workload pods still on it, not evicted."""
    pods = sum(forced.values())
    nodes = ", ".join(sorted(forced))
    return (
        f"terminationGracePeriod {format_duration(grace)} ran out with {len(forced)} node(s) "
        f"not drained ({nodes}): removing the nodes and VMs with {pods} pod(s) not evicted "
        "(the pod garbage collector deletes them)"
    )


def drain_timeout_note(node: str, timeout: timedelta, waiting: str) -> str:
    """The Event note when a scale-down gives up draining ``node``."""
    note = (
        f"node {node} not drained within drainTimeout {format_duration(timeout)}; "
        f"untainted and kept, another node is tried (not this one for "
        f"{format_duration(timedelta(seconds=RECHECK_SECONDS))})"
    )
    return f"{note}: {waiting}" if waiting else note
