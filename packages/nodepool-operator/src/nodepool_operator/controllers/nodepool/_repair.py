"""Which unhealthy nodes a pool replaces now, and which it holds back. Pure.

Replacing an unhealthy node is right when the node is broken and wrong when the network
around it is: an availability zone's impairment makes every node of the zone NotReady at
once, and replacing them all would evict (and lose) a third of the cluster's pods for
nothing. So, as Karpenter's node repair: a node must stay unhealthy for the toleration
before it is replaced, none is while more than ``max_unhealthy_percent`` of the pool is
unhealthy, and one at a time otherwise (a node being repaired counts as the one).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from kubeloop import Object
from nodepool_operator.api import format_duration
from nodepool_operator.controllers._unneeded import parse_time

__all__ = [
    "REPAIR_BLOCKED",
    "REPAIR_DRAIN_TIMED_OUT",
    "RepairDecision",
    "Unhealthy",
    "decide_repair",
    "repair_drain_note",
    "unhealthy_since",
]

#: Pool condition type: True while unhealthy nodes past their toleration are held back.
REPAIR_BLOCKED: Final = "RepairBlocked"
#: Event reason when a repair's drain ran past drainTimeout and the node goes anyway.
REPAIR_DRAIN_TIMED_OUT: Final = "RepairDrainTimedOut"
_NAMED = 10


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """One unhealthy node of the pool."""

    record: str
    node: str
    since: float
    """When it became unhealthy (seconds since the epoch)."""
    why: str
    """What is wrong, e.g. ``Ready=Unknown``."""
    repairing: bool = False
    """Already being drained and replaced."""


@dataclass(frozen=True, slots=True)
class RepairDecision:
    replace: tuple[Unhealthy, ...] = ()
    """Nodes to drain and replace now (at most one)."""
    held: tuple[str, ...] = ()
    """Nodes past their toleration that the threshold holds back."""
    message: str = ""
    """Why they are held (empty when none is)."""
    wait: float | None = None
    """Seconds until the next node's toleration ends, if one is still tolerated."""


def decide_repair(
    unhealthy: Sequence[Unhealthy],
    *,
    pool_nodes: int,
    toleration: float,
    max_unhealthy_percent: int,
    now: float,
) -> RepairDecision:
    """What to repair among ``unhealthy`` (every unhealthy node of a pool of ``pool_nodes``
    nodes, those being repaired included), at ``now``."""
    due = sorted(
        (u for u in unhealthy if not u.repairing and now - u.since >= toleration),
        key=lambda u: (u.since, u.node),
    )
    waits = [u.since + toleration - now for u in unhealthy if now - u.since < toleration]
    wait = min(waits) if waits else None
    if not due:
        return RepairDecision(wait=wait)
    share = 100 * len(unhealthy) / max(pool_nodes, 1)
    if share > max_unhealthy_percent:
        names = [u.node for u in due]
        shown = ", ".join(names[:_NAMED]) + (
            f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        )
        message = (
            f"{len(unhealthy)} of {pool_nodes} nodes unhealthy ({share:.0f}%) > "
            f"maxUnhealthyPercent {max_unhealthy_percent}%: not replacing {shown}"
        )
        return RepairDecision(held=tuple(names), message=message, wait=wait)
    if any(u.repairing for u in unhealthy):
        return RepairDecision(wait=wait)  # one at a time: the next once this one is gone
    return RepairDecision(replace=(due[0],), wait=wait)


def unhealthy_since(node: Object, condition_types: Collection[str]) -> tuple[float, str] | None:
    """Since when, and why, ``node`` is unhealthy: its Ready condition False or Unknown, or
    one of ``condition_types`` True (the earliest such change); None when healthy or when
    it says not since when (a fresh registration has not reported yet)."""
    found: list[tuple[float, str]] = []
    for cond in (node.get("status") or {}).get("conditions") or ():
        kind, state = cond.get("type"), cond.get("status")
        bad = (kind == "Ready" and state != "True") or (kind in condition_types and state == "True")
        since = parse_time(cond.get("lastTransitionTime")) if bad else None
        if since is not None:
            found.append((since, f"{kind}={state}"))
    return min(found) if found else None


def repair_drain_note(node: str, timeout: timedelta, waiting: str) -> str:
    """The Event note when a repair stops waiting for an unhealthy node's drain."""
    note = (
        f"node {node} (unhealthy) not drained within drainTimeout "
        f"{format_duration(timeout)}; replacing it with the pods left on it"
    )
    return f"{note}: {waiting}" if waiting else note
