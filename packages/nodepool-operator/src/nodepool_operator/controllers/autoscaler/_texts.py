"""What the Autoscaler tells people, and when it scales down: pure functions of the plan.

The texts are functions of the state alone (no times, no counters that move by themselves), so a
stable cluster gives the same ``lastDecision`` and the same Event notes on every look: status is
not rewritten and Events aggregate instead of piling up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from nodepool_operator.api import format_duration
from nodepool_operator.controllers._capacity import PoolNodes
from nodepool_operator.controllers.autoscaler._pending import Blocked
from nodepool_operator.scheduling import PodRef, ScaleUpPlan

__all__ = [
    "NotTriggered",
    "decision_text",
    "next_unneeded_due",
    "not_triggered",
    "scale_down_target",
    "scale_down_text",
    "set_aside",
    "track_unneeded",
]

#: ``status.lastDecision``'s schema limit.
DECISION_MAX: Final = 1024
#: Pod names an Autoscaler Event lists before "and N more".
_NAMED_PODS: Final = 3
#: Set-aside groups ``lastDecision`` describes before "+N more".
_GROUPS: Final = 3


@dataclass(frozen=True, slots=True)
class NotTriggered:
    """Pods that did not trigger scale-up, for one reason and detail.

    ``reason`` is a :class:`~nodepool_operator.scheduling.FitReason`, ``MaxNodesReached`` or a
    :class:`~._pending.Blocker`, e.g. ``TooBig`` / ``memory 120Gi > 96Gi``.
    """

    reason: str
    detail: str
    pods: tuple[PodRef, ...]

    @property
    def note(self) -> str:
        """The Autoscaler's Event note, naming a few of the pods."""
        names = ", ".join(str(p) for p in self.pods[:_NAMED_PODS])
        more = len(self.pods) - _NAMED_PODS
        if more > 0:
            names += f" and {more} more"
        return f"{self.reason}: {_count(len(self.pods))} ({self.detail}): {names}"

    @property
    def pod_note(self) -> str:
        """The note of the Event on each pod."""
        return f"pod didn't trigger scale-up: {self.reason}: {self.detail}"


def set_aside(blocked: Iterable[tuple[PodRef, Blocked]]) -> tuple[NotTriggered, ...]:
    """The pods left out before planning, grouped by what they wait on."""
    by_cause: dict[tuple[str, str], list[PodRef]] = {}
    for pod, why in blocked:
        by_cause.setdefault((str(why.reason), why.detail), []).append(pod)
    return tuple(
        NotTriggered(reason, detail, tuple(sorted(pods)))
        for (reason, detail), pods in sorted(by_cause.items())
    )


def not_triggered(plan: ScaleUpPlan, aside: tuple[NotTriggered, ...]) -> tuple[NotTriggered, ...]:
    """Every group of pods no scale-up helps: the plan's groups, then those set aside."""
    return (*(NotTriggered(str(g.reason), g.detail, g.pods) for g in plan.unschedulable), *aside)


def decision_text(
    summary: str,
    target: int,
    aside: tuple[NotTriggered, ...],
    *,
    planned: bool,
    head: str | None = None,
    settling: int = 0,
    consolidation: str | None = None,
) -> str:
    """``status.lastDecision``: the plan's ``summary`` (made at ``target``; ``planned``: it
    placed or turned down a pod) plus the pods set aside before planning.

    E.g. ``no scale up (target 0); 1 pod MissingSecret (secret "db" not found)``. ``head``
    replaces the summary's first part, e.g. with what a scale-down did. ``settling`` counts
    the pods left out while the scheduler binds them to nodes that just became Ready;
    ``consolidation``, what holds a replacement back or which one is under way
    (:func:`._replacing.replace_note`).
    """
    first, *groups = summary.split("; ")
    if head is None:
        head = first
        if (aside or settling) and not planned:
            head = f"no scale up (target {target})"  # not "no pending pods"
    if settling:
        groups.append(f"{_count(settling)} waiting for the scheduler on new Ready nodes")
    if consolidation:
        groups.append(consolidation)
    described = [f"{_count(len(g.pods))} {g.reason} ({g.detail})" for g in aside[:_GROUPS]]
    parts = [head, *groups, *described]
    hidden = len(aside) - _GROUPS
    if hidden > 0:
        parts.append(f"+{hidden} more reason{'' if hidden == 1 else 's'}")
    text = "; ".join(parts)
    return text if len(text) <= DECISION_MAX else text[: DECISION_MAX - 3] + "..."


def scale_down_text(
    before: int, after: int, unneeded: timedelta, *, optimum: int | None = None
) -> str:
    """E.g. ``scale down 3 -> 1: nodes unneeded for 10m`` (empty, or under the utilisation
    threshold with pods that fit on the others); with the ``optimum`` of a consolidation,
    e.g. ``scale down 4 -> 3: nodes unneeded for 10m (consolidation: the pods fit on 3
    nodes)``."""
    text = f"scale down {before} -> {after}: nodes unneeded for {format_duration(unneeded)}"
    if optimum is not None:
        text += f" (consolidation: the pods fit on {optimum} node{'' if optimum == 1 else 's'})"
    return text


def track_unneeded(
    since: Mapping[str, float], empty: Iterable[str], now: float
) -> dict[str, float]:
    """When each currently empty node was first seen empty; nodes no longer empty drop out, so
    a node that runs a pod even briefly starts its unneeded time again."""
    return {name: since.get(name, now) for name in empty}


def scale_down_target(
    *,
    target: int,
    min_nodes: int,
    nodes: PoolNodes,
    unneeded_since: Mapping[str, float],
    now: float,
    unneeded_seconds: float,
    pods_need_room: bool,
) -> int | None:
    """The lower target when empty nodes have been unneeded long enough, else ``None``.

    Conservative on purpose, scale-down being the opt-in half:

    * never while pods wait that the pool could hold (they may be about to land on the empty
      nodes);
    * never while the pool is not settled (nodes booting, more nodes than the target, or a
      node being drained, i.e. a scale-down still being carried out), so each empty node is
      taken away once;
    * never below ``min_nodes``.

    Only the count is decided here; the nodes counted are named on their Node
    (:mod:`..._unneeded`) and the NodePool controller removes those first.
    """
    if pods_need_room or nodes.leaving or nodes.registered != target or nodes.ready != target:
        return None
    due = [n for n in nodes.empty if now - unneeded_since.get(n, now) >= unneeded_seconds]
    desired = max(min_nodes, target - len(due))
    return desired if desired < target else None


def next_unneeded_due(
    unneeded_since: Mapping[str, float], now: float, unneeded_seconds: float
) -> float | None:
    """Seconds until the next empty node has been unneeded long enough, or ``None``."""
    if not unneeded_since:
        return None
    return max(0.0, min(unneeded_seconds - (now - t) for t in unneeded_since.values()))


def _count(n: int) -> str:
    return f"{n} pod{'' if n == 1 else 's'}"
