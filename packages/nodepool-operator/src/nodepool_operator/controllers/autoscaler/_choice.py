"""One pool per pod: when several Autoscalers watch a pending pod's namespace, which one scales.

Every Autoscaler reconciles on its own, so none can tell the others what to do. Each computes
the same choice instead, from what all of them observe in the informer cache (every
Autoscaler, its pool's node template, its pool's size), and scales only for the pods it wins.
The order is cluster-autoscaler's expanders chained (priority, then least-waste) and
Karpenter's NodePool weight:

1. the options: each live Autoscaler watching the pod's namespace, not idle behind another
   one on its pool, whose pool's new node would take the pod, and whose pool can still grow
   or has nodes on the way (a pool at its maximum with every node registered can do nothing
   for a pod the scheduler could not place: cluster-autoscaler drops such node groups before
   its expander runs);
2. the highest ``spec.weight``;
3. the least waste: the fraction of the new node's CPU plus the fraction of its memory that
   the pod leaves unused (cluster-autoscaler's least-waste score, per pod so that each
   Autoscaler scores each pod alike whatever else it is planning);
4. the first by name.

The weight is the Autoscaler's, not the NodePool's: the Autoscaler is the scaling policy
(which pods, how far, at what priority) while a NodePool is the set of VMs its controller keeps
and reads no policy; two pools of one shape can serve different teams at different priorities.
The losers set the pod aside with the winner's name and why (:data:`SERVED_ELSEWHERE`).

Pure: a pod, the options, and out comes the winner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from nodepool_operator.api import MAX_POOL_NODES, Autoscaler, NodePool
from nodepool_operator.scheduling import (
    NodeTemplate,
    PodRef,
    PodView,
    pod_fits_template,
    zone_templates,
)

__all__ = ["SERVED_ELSEWHERE", "Option", "Won", "option", "served_elsewhere", "waste", "winner"]

#: The set-aside reason of a pod another Autoscaler scales for.
SERVED_ELSEWHERE: Final = "ScaledByOtherAutoscaler"


@dataclass(frozen=True, slots=True)
class Option:
    """One Autoscaler as the choice sees it.

    Attributes:
        name: the Autoscaler's name.
        pool: its NodePool's name.
        can_grow: its pool is below its maximum, or has nodes on the way.
        zones: the zones its pool can launch into (``status.zones``); a pod fits the pool
            when it fits its template in one of them.
    """

    name: str
    pool: str
    weight: int
    namespaces: frozenset[str]
    template: NodeTemplate
    can_grow: bool
    zones: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Won:
    """The Autoscaler that scales for a pod, and why it beat the runner-up."""

    option: Option
    why: str


def option(scaler: Autoscaler, pool: NodePool, template: NodeTemplate, registered: int) -> Option:
    """``scaler`` as an option, its pool read from the cache with ``registered`` Nodes."""
    spec = pool.spec
    top = min(spec.max_nodes, scaler.spec.max_nodes or MAX_POOL_NODES)
    target = max(spec.target_nodes, spec.min_nodes)
    return Option(
        name=scaler.metadata.name,
        pool=scaler.spec.node_pool_ref.name,
        weight=scaler.spec.weight,
        namespaces=frozenset(scaler.spec.namespaces),
        template=template,
        can_grow=target < top or registered < target,
        zones=tuple(pool.status.zones),
    )


def waste(pod: PodView, template: NodeTemplate) -> float:
    """The fraction of a new ``template`` node's CPU plus that of its memory left unused by
    ``pod`` alone: 0 for a pod that fills the node, near 2 for a tiny pod on a big node."""
    room, asks = template.allocatable, pod.requests
    cpu = 1 - asks.cpu / room.cpu if room.cpu > 0 else 0.0
    memory = 1 - asks.memory / room.memory if room.memory > 0 else 0.0
    return cpu + memory


def _rank(pod: PodView, o: Option) -> tuple[int, float, str]:
    return (-o.weight, waste(pod, o.template), o.name)


def winner(pod: PodView, options: Sequence[Option]) -> Won | None:
    """Which of ``options`` scales for ``pod``; ``None`` if none can."""
    able = sorted(
        (
            o
            for o in options
            if pod.ref.namespace in o.namespaces
            and o.can_grow
            and any(pod_fits_template(pod, t) for t in zone_templates(o.template, o.zones))
        ),
        key=lambda o: _rank(pod, o),
    )
    if not able:
        return None
    first = able[0]
    if len(able) == 1:
        return Won(first, "the only Autoscaler whose pool can take it")
    second = able[1]
    if first.weight != second.weight:
        why = f"weight {first.weight} > {second.weight}"
    else:
        ours, theirs = waste(pod, first.template), waste(pod, second.template)
        if ours != theirs:
            why = f"less waste {ours:.2f} < {theirs:.2f}"
        else:
            why = f"equal weight and waste, first by name before {second.name}"
    return Won(first, why)


def served_elsewhere(
    pods: Sequence[PodView], own: Option, rivals: Sequence[Option]
) -> dict[tuple[str, str], list[PodRef]]:
    """The pods of ``pods`` a rival wins, by (reason, detail); ``own`` scales for the rest. A
    pod no option can take stays with ``own``, whose plan says why."""
    theirs: dict[tuple[str, str], list[PodRef]] = {}
    if not rivals:
        return theirs
    options = [own, *(r for r in rivals if r.name != own.name)]
    for pod in pods:
        won = winner(pod, options)
        if won is None or won.option.name == own.name:
            continue
        other = won.option
        detail = f"Autoscaler {other.name} scales NodePool {other.pool} for it: {won.why}"
        theirs.setdefault((SERVED_ELSEWHERE, detail), []).append(pod.ref)
    return theirs
