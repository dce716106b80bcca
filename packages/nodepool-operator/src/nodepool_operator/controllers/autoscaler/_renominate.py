"""Renomination: a nomination the scheduler drops while its node opens is written back at once.

Why: the gates of a scale-up's nodes fall together (:mod:`._nominations`), but each lift is
its own Node event, and every one sends the waiting pods to a scheduling attempt. A pod tried
before its own node's lift has reached kube-scheduler fails, and the failure clears its
nomination (v1.37.2, ``handleSchedulingFailure``): on two loaded cores, tens of the 120 pods
of S2 lose theirs while 20 lifts go through. Such a pod goes to the scheduler's backoff queue
and is tried again once the active queue is empty; without its nomination it lands wherever
its score says, often in the room held for another pod of the plan, which is then stranded.
The Autoscaler's next pass would write it back, but a pass plans (tens of milliseconds with
the exact search) and sees only the drops it has been told of so far, so the scheduler wins
the race for many of them. This controller answers each drop alone: one write per dropped
nomination, as soon as its watch event arrives.

What it may write: only a nomination the Autoscaler made to a node already open (its
:meth:`Renominations.expect`, after each pass), only on an unbound pod whose nomination is now
empty, and at most :data:`TRIES` times per pod and node, so a pod that truly no longer fits
there (the scheduler clears it on every try) costs three writes, not a loop; the Autoscaler's
landing guard plans again for it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Final

from kubeloop import (
    PODS,
    Cache,
    Client,
    Conflict,
    Event,
    Invalid,
    NotFound,
    PatchType,
    Request,
    Result,
    Updated,
)
from nodepool_operator.controllers._indexes import pod_node
from nodepool_operator.controllers.autoscaler._decode import pod_key
from nodepool_operator.scheduling import nomination_patch, pod_view

__all__ = ["TRIES", "Renominations", "Renominator", "nomination_dropped"]

#: How many times one pod's nomination to one node is written back.
TRIES: Final = 3

log = logging.getLogger("nodepool_operator.autoscaler")


def _nominated(obj: object) -> str:
    status = obj.get("status") if isinstance(obj, Mapping) else None
    value = status.get("nominatedNodeName") if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else ""


def nomination_dropped(event: Event) -> bool:
    """An unbound pod's nomination was cleared (the scheduler's failed attempt)."""
    return (
        isinstance(event, Updated)
        and bool(_nominated(event.old))
        and not _nominated(event.new)
        and not pod_node(event.new)
    )


class Renominations:
    """The nominations the Autoscalers hold on open nodes, and the writes-back made."""

    def __init__(self) -> None:
        self._wanted: dict[str, dict[str, str]] = {}  # Autoscaler -> pod key -> node
        self._tries: dict[tuple[str, str], int] = {}

    def expect(self, scaler: str, held: Iterable[tuple[str, str]]) -> None:
        """What Autoscaler ``scaler`` holds now: (pod key, node) pairs."""
        wanted = dict(held)
        if wanted:
            self._wanted[scaler] = wanted
        else:
            self._wanted.pop(scaler, None)
        live = {(k, n) for w in self._wanted.values() for k, n in w.items()}
        self._tries = {kn: t for kn, t in self._tries.items() if kn in live}

    def forget(self, scaler: str) -> None:
        self.expect(scaler, ())

    def take(self, key: str) -> str | None:
        """The node to write pod ``key``'s nomination back to, counted as a try; None when no
        Autoscaler holds one for it or its tries are spent."""
        node = next((n for w in self._wanted.values() if (n := w.get(key)) is not None), None)
        if node is None or self._tries.get((key, node), 0) >= TRIES:
            return None
        self._tries[(key, node)] = self._tries.get((key, node), 0) + 1
        return node


class Renominator:
    """The reconciler: one pod whose nomination was dropped, written back if it is held."""

    def __init__(self, client: Client, cache: Cache, held: Renominations) -> None:
        self._client = client
        self._cache = cache
        self._held = held

    async def reconcile(self, req: Request) -> Result:
        pod = await self._cache.get(PODS, req.name, req.namespace)
        if pod is None:
            return Result()
        view = pod_view(pod)
        if view.nominated is not None or view.node_name or view.terminating:
            return Result()
        node = self._held.take(pod_key(pod))
        patch = None if node is None else nomination_patch(view, node)
        if patch is None:
            return Result()
        meta = pod["metadata"]
        # bound, renominated or changed since (409/422), or gone: nothing to write back
        with contextlib.suppress(NotFound, Invalid, Conflict):
            await self._client.patch(
                PODS,
                meta["name"],
                patch,
                meta["namespace"],
                patch_type=PatchType.MERGE,
                subresource="status",
            )
            log.debug("nomination written back", extra={"pod": meta["name"], "node": node})
        return Result()
