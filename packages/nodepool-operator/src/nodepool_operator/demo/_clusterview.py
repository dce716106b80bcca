"""The demo's own eyes on the cluster: watches, on a client of its own, of what it shows.

Separate from the operator's cache and client on purpose: the demo looks as ``kubectl get -w``
would, so what it reports is what the API server holds, and its reads never count as the
operator's API traffic. Watches rather than polling: redrawing four times a second costs the
API server nothing after the initial lists.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubeloop import EVENTS, NODES, PODS, Client, Event, Informer
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.demo._workload import DEMO_LABEL, POOL_LABEL, POOL_NAME


class ClusterView:
    """Watches the demo's pods, the pool, its Autoscaler, its Nodes and Events."""

    def __init__(self, client: Client) -> None:
        by_name = f"metadata.name={POOL_NAME}"
        self._pods = Informer(client, PODS, label_selector=DEMO_LABEL)
        self._nodes = Informer(client, NODES, label_selector=f"{POOL_LABEL}={POOL_NAME}")
        self._pools = Informer(client, NODEPOOLS, field_selector=by_name)
        self._autoscalers = Informer(client, AUTOSCALERS, field_selector=by_name)
        # Events have no labels to select on, and field selectors on events.k8s.io differ
        # between versions; the demo's cluster has few, so watch them all and filter here.
        self._events = Informer(client, EVENTS)
        self._all = (self._pods, self._nodes, self._pools, self._autoscalers, self._events)
        #: UIDs of the demo pods the API server marked evicted (see :func:`evicted_by_api`),
        #: kept after the pods are gone: the store forgets a deleted pod, this does not.
        self.evicted: set[str] = set()
        self._pods.add_handler(self._note_eviction)

    def _note_eviction(self, event: Event) -> None:
        if evicted_by_api(event.obj):
            self.evicted.add(str(event.obj.get("metadata", {}).get("uid", "")))

    async def start(self, timeout: float) -> None:
        """Start every watch and wait until each has listed once."""
        for informer in self._all:
            informer.start()
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(i.wait_synced() for i in self._all))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._all))

    def pods(self) -> list[dict[str, Any]]:
        return self._pods.store.list()

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes.store.list()

    def events(self) -> list[dict[str, Any]]:
        return self._events.store.list()

    def pool(self) -> dict[str, Any] | None:
        return self._pools.store.get(POOL_NAME)

    def autoscaler(self) -> dict[str, Any] | None:
        return self._autoscalers.store.get(POOL_NAME)


#: The condition the API server puts on a pod it evicts through the Eviction API, before it
#: deletes it (Kubernetes' pod disruption conditions, on by default since 1.31).
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_BY_API = "EvictionByEvictionAPI"


def evicted_by_api(pod: dict[str, Any]) -> bool:
    """The API server evicted this pod: its ``DisruptionTarget`` condition says the Eviction
    API did (not, say, a taint manager or preemption)."""
    return any(
        c.get("type") == DISRUPTION_TARGET
        and c.get("status") == "True"
        and c.get("reason") == EVICTION_BY_API
        for c in (pod.get("status") or {}).get("conditions") or []
    )
