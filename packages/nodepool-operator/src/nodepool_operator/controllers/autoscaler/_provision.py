"""How long the Autoscaler counts requested-but-unregistered nodes as "in flight".

Nodes a pool was asked for but that have not registered are capacity on the way: the plan puts
pods on them instead of asking for more (kubernetes/kubernetes#43709). Capacity that never comes
(a quota, a stockout, a VM that never boots) must stop counting, or its phantom nodes hide the
need forever. As cluster-autoscaler's ``max-node-provision-time`` (15 minutes): when the pool
has made no progress (no new Node registered) for that long, the wait has failed; the
Autoscaler then lowers the target back to the registered nodes (cluster-autoscaler's
``DecreaseTargetSize``), with an Event and a ``Provisioning=False`` condition, and does not
scale the pool up again for a backoff that doubles with each failure (5 min to 30 min).

Pure: the state is a value, the clock an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

__all__ = ["Provisioning", "observe", "timed_out"]

#: The longest backoff after repeated failures (cluster-autoscaler's max node group backoff).
MAX_BACKOFF_SECONDS: Final = 1800.0


@dataclass(frozen=True, slots=True)
class Provisioning:
    """The wait for one pool's in-flight nodes.

    Attributes:
        since: when the current wait started or last made progress; ``None``: nothing in flight.
        registered: registered Nodes at ``since``; more means progress.
        backoff_until: no scale-up for the pool before this time.
        failures: consecutive timed-out waits (the backoff doubles with each).
    """

    since: float | None = None
    registered: int = 0
    backoff_until: float | None = None
    failures: int = 0

    def backing_off(self, now: float) -> bool:
        return self.backoff_until is not None and now < self.backoff_until


def observe(state: Provisioning, *, in_flight: int, registered: int, now: float) -> Provisioning:
    """``state`` after a look at the pool: the clock starts when nodes are in flight, and
    restarts whenever another Node registers (progress). Nothing in flight ends the wait and,
    if a Node registered, the run of failures."""
    if in_flight <= 0:
        # Only a Node that registered proves provisioning works again; a target lowered
        # after a failure leaves nothing in flight but proves nothing.
        failures = 0 if registered > state.registered else state.failures
        return replace(state, since=None, registered=registered, failures=failures)
    if state.since is None or registered > state.registered:
        return replace(state, since=now, registered=registered)
    return state


def requested(state: Provisioning, *, registered: int, now: float) -> Provisioning:
    """``state`` after the Autoscaler raised the target: the new nodes get their full time."""
    return replace(state, since=now, registered=registered)


def timed_out(
    state: Provisioning, *, now: float, timeout: float, backoff: float
) -> Provisioning | None:
    """The state after a failed wait, if the wait has lasted ``timeout`` without progress;
    else ``None``. The backoff is ``backoff`` doubled per earlier failure, at most
    :data:`MAX_BACKOFF_SECONDS`."""
    if state.since is None or now - state.since < timeout:
        return None
    wait = min(backoff * 2**state.failures, max(MAX_BACKOFF_SECONDS, backoff))
    return Provisioning(None, state.registered, now + wait, state.failures + 1)
