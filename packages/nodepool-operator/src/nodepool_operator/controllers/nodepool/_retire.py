"""A record being retired, step by step as :mod:`.act` removes it: whether its Node is
drained first (:func:`termination`), what to do before the drain (:func:`before_drain`) and
after each round of it (:func:`after_drain`: done, wait, give up, or force past
``drainTimeout``)."""

from __future__ import annotations

from datetime import timedelta
from enum import Enum
from typing import Literal

from nodepool_operator.controllers.nodepool._drain import DrainStatus
from nodepool_operator.controllers.nodepool._drain_deadline import remaining
from nodepool_operator.controllers.nodepool.records import PoolNode

__all__ = ["Verdict", "after_drain", "before_drain", "termination"]


def termination(node: PoolNode | None, alive: bool) -> Literal["drain", "remove"]:
    """Whether a retiring record's Node is drained before its VM goes, as Karpenter's
    termination does. A Node whose VM is gone, or that someone deleted while it is not
    Ready, is not (its pods could never finish terminating; the pod garbage collector
    deletes pods bound to a Node that no longer exists). A Node being repaired (not Ready)
    is, for at most drainTimeout."""
    if node is not None and alive and (node.ready or not node.deleting):
        return "drain"
    return "remove"


def before_drain(node: PoolNode, now: float) -> Literal["give_up", "taint", "drain"]:
    """A scale-down's Node found untainted while it rests: given up already, the record's
    write lost (a crash): keep it, do not re-taint. Otherwise taint it first if it is not."""
    if node.scaling_down and not node.tainted and node.resting(now):
        return "give_up"
    return "drain" if node.tainted else "taint"


class Verdict(Enum):
    DONE = "done"
    """Drained: its VM and Node go."""
    WAIT = "wait"
    """Still draining: look again later."""
    GIVE_UP = "give_up"
    """A scale-down past drainTimeout: the Node is kept, untainted, and rests."""
    FORCE = "force"
    """A repair past drainTimeout: its kubelet is unreachable, so evicted pods may never
    finish terminating; the Node goes with them (as a pool deletion past its grace)."""


def after_drain(node: PoolNode, status: DrainStatus, timeout: timedelta, now: float) -> Verdict:
    """What one round of draining ``node`` leads to."""
    if status.done:
        return Verdict.DONE
    overdue = remaining(node.disrupting_since, timeout, now) <= 0
    if node.scaling_down and overdue:
        return Verdict.GIVE_UP
    if not node.scaling_down and overdue and not node.ready:
        return Verdict.FORCE
    return Verdict.WAIT
