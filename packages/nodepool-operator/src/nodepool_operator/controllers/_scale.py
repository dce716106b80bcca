"""Writing a NodePool's ``spec.targetNodes``, only through its ``scale`` subresource.

The scale subresource is the pool's public "how many" knob (``kubectl scale``), and writing
only ``spec.replicas`` there cannot clobber any other field of the pool. Every write is a PUT
carrying the resourceVersion of the GET before it, so a concurrent writer makes it fail with
409 instead of being overwritten; on a conflict the scale is read again and the decision made
again against the new value (``kubeloop.retry_on_conflict``).

The rule that keeps the Autoscaler and people (or other tools) from fighting: it raises a
target only to a value above the current one, and lowers one only if it is still the value
its scale-down decision was based on. A value someone else raised meanwhile is never lowered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kubeloop import Client, Object, retry_on_conflict
from nodepool_operator.api import NODEPOOLS

__all__ = ["ScaleOutcome", "lower_target", "raise_target"]


@dataclass(frozen=True, slots=True)
class ScaleOutcome:
    """The pool's target before and after; equal when nothing was written."""

    before: int
    after: int

    @property
    def written(self) -> bool:
        return self.after != self.before


async def raise_target(
    client: Client, pool: str, desired_for: Callable[[int], Awaitable[int]]
) -> ScaleOutcome:
    """Raise pool ``pool``'s target to ``await desired_for(current)`` if that is higher.

    ``desired_for`` gets the target as the server has it now, so a plan made from a cache that
    lags behind is re-made against the real value (booting nodes counted from it), and it is
    asked again after every conflict.

    Raises:
        NotFound: the pool is gone.
        Conflict: five conflicts in a row; the workqueue's backoff takes over.
    """

    async def attempt() -> ScaleOutcome:
        scale = await client.get_scale(NODEPOOLS, pool)
        current = _replicas(scale)
        desired = await desired_for(current)
        if desired <= current:
            return ScaleOutcome(current, current)
        scale["spec"]["replicas"] = desired
        await client.update_scale(NODEPOOLS, scale)
        return ScaleOutcome(current, desired)

    return await retry_on_conflict(attempt)


async def lower_target(client: Client, pool: str, *, expected: int, desired: int) -> ScaleOutcome:
    """Lower pool ``pool``'s target from ``expected`` to ``desired``.

    Nothing is written unless the target is still ``expected``: a different value means
    someone else changed it after the scale-down was decided, and their value stands until the
    next decision. A conflict is re-checked the same way, never blindly retried.
    """

    async def attempt() -> ScaleOutcome:
        scale = await client.get_scale(NODEPOOLS, pool)
        current = _replicas(scale)
        if current != expected or desired >= current:
            return ScaleOutcome(current, current)
        scale["spec"]["replicas"] = desired
        await client.update_scale(NODEPOOLS, scale)
        return ScaleOutcome(current, desired)

    return await retry_on_conflict(attempt)


def _replicas(scale: Object) -> int:
    spec = scale.setdefault("spec", {})
    replicas = spec.get("replicas", 0)
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0
