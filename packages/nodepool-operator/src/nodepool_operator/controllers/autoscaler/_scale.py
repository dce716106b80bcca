"""Writing a NodePool's ``spec.targetNodes``, only through its ``scale`` subresource.

The scale subresource is the pool's public "how many" knob (``kubectl scale``), and writing
only ``spec.replicas`` there cannot clobber any other field of the pool. Every write is a PUT
carrying the resourceVersion of the GET before it, so a concurrent writer makes it fail with
409 instead of being overwritten (``kubeloop.retry_on_conflict`` reads again).

The rule that keeps the Autoscaler and people (or other tools) from fighting: a decision is
written only if the target is still the value it was made from. A different value means
someone else (or a cache that lagged behind) moved it; the write is not made and the caller
decides again from the server's value (a raise), or lets that value stand until the next look
(a lowering: a value someone else raised is never lowered).
"""

from __future__ import annotations

from kubeloop import Client, Object, retry_on_conflict
from nodepool_operator.api import NODEPOOLS

__all__ = ["write_target"]


async def write_target(client: Client, pool: str, *, expected: int, desired: int) -> int | None:
    """Set pool ``pool``'s target from ``expected`` to ``desired``; ``None`` once written,
    else the target the server has (not ``expected``: nothing was written).

    Raises:
        NotFound: the pool is gone.
        Conflict: five conflicts in a row; the workqueue's backoff takes over.
    """

    async def attempt() -> int | None:
        scale = await client.get_scale(NODEPOOLS, pool)
        current = _replicas(scale)
        if current != expected:
            return current
        scale["spec"]["replicas"] = desired
        await client.update_scale(NODEPOOLS, scale)
        return None

    return await retry_on_conflict(attempt)


def _replicas(scale: Object) -> int:
    spec = scale.setdefault("spec", {})
    replicas = spec.get("replicas", 0)
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0
