"""Writing a NodePool's ``spec.targetNodes``: through its ``scale`` subresource, or, when
its ``spec.zoneTargets`` change with it, in one update of the pool.

The scale subresource is the pool's public "how many" knob (``kubectl scale``), and writing
only ``spec.replicas`` there cannot clobber any other field of the pool. Every write is a PUT
carrying the resourceVersion of the GET before it, so a concurrent writer makes it fail with
409 instead of being overwritten (``kubeloop.retry_on_conflict`` reads again).

The rule that keeps the Autoscaler and people (or other tools) from fighting: a decision is
written only if the target is still the value it was made from. A different value means
someone else (or a cache that lagged behind) moved it; the write is not made and the caller
decides again from the server's value (a raise), or lets that value stand until the next look
(a lowering: a value someone else raised is never lowered).

The zone targets (how many of the pool's nodes each zone needs for the plan to hold) go in the
same write as the target they belong to, an update of the NodePool itself carrying the
resourceVersion of its GET: the NodePool controller never sees a raised target without the
zones it was raised for, nor zone targets without their nodes.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubeloop import Client, Object, retry_on_conflict
from nodepool_operator.api import NODEPOOLS

__all__ = ["write_target"]


async def write_target(
    client: Client,
    pool: str,
    *,
    expected: int,
    desired: int,
    zone_targets: Mapping[str, int] | None = None,
) -> int | None:
    """Set pool ``pool``'s target from ``expected`` to ``desired`` (and its
    ``spec.zoneTargets`` to ``zone_targets``, unless ``None``); ``None`` once written, else
    the target the server has (not ``expected``: nothing was written).

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

    async def with_zones(zones: Mapping[str, int]) -> int | None:
        obj = await client.get(NODEPOOLS, pool)
        spec = obj.setdefault("spec", {})
        current = _target(spec)
        if current != expected:
            return current
        spec["targetNodes"] = desired
        if zones:
            spec["zoneTargets"] = dict(zones)
        else:
            spec.pop("zoneTargets", None)
        await client.update(NODEPOOLS, obj)
        return None

    if zone_targets is not None:
        zones = zone_targets
        return await retry_on_conflict(lambda: with_zones(zones))
    return await retry_on_conflict(attempt)


def _replicas(scale: Object) -> int:
    spec = scale.setdefault("spec", {})
    replicas = spec.get("replicas", 0)
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0


def _target(spec: Mapping[str, object]) -> int:
    target = spec.get("targetNodes", 0)
    return target if isinstance(target, int) and not isinstance(target, bool) else 0
