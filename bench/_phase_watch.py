"""The watch half of the phase table (:mod:`bench.phases`): informers on one side's pods,
Nodes and scale decisions, each change stamped with the wall clock when it arrives (the
cloud's records are on the same clock: our simulated cloud writes ``time.time()``).

The apiserver's own timestamps (``creationTimestamp``, conditions' ``lastTransitionTime``)
are whole seconds, too coarse for phases of a second or less, so arrival times are used.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from bench.phases import (
    ClaimSeen,
    NodeSeen,
    PodSeen,
    node_ready,
    node_schedulable,
    unschedulable,
)
from kubeloop import NODES, PODS, Added, Client, Event, Informer, Resource, Updated


@dataclass
class PhaseWatch:
    """First times of everything the phase table needs, as this process's watches saw them."""

    pods: dict[str, PodSeen] = field(default_factory=dict)
    nodes: dict[str, NodeSeen] = field(default_factory=dict)
    claims: dict[str, ClaimSeen] = field(default_factory=dict)
    #: Our NodePool's ``targetNodes``, each change as (time, value).
    targets: list[tuple[float, int]] = field(default_factory=list)
    _informers: list[Informer] = field(default_factory=list)

    async def start(
        self,
        client: Client,
        namespace: str,
        node_selector: str,
        decisions: tuple[Resource, str, str],
    ) -> None:
        """Watch the pods of ``namespace``, the Nodes of ``node_selector``, and the scale
        decisions: ``(resource, field selector, label selector)`` of our NodePool or of
        Karpenter's NodeClaims."""
        resource, fields, labels = decisions
        handler = self._target if resource.kind == "NodePool" else self._claim
        for informer, on in (
            (Informer(client, PODS, namespace=namespace), self._pod),
            (Informer(client, NODES, label_selector=node_selector), self._node),
            (
                Informer(
                    client,
                    resource,
                    field_selector=fields or None,
                    label_selector=labels or None,
                ),
                handler,
            ),
        ):
            informer.add_handler(on)
            informer.start()
            self._informers.append(informer)
        await asyncio.gather(*(i.wait_synced() for i in self._informers))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers))

    def running(self) -> int:
        return sum(1 for p in self.pods.values() if p.running is not None)

    def _pod(self, event: Event) -> None:
        if not isinstance(event, Added | Updated):
            return
        now, pod = time.time(), event.obj
        seen = self.pods.setdefault(pod["metadata"]["name"], PodSeen(created=now))
        node = (pod.get("spec") or {}).get("nodeName")
        if node and seen.bound is None:
            seen.bound, seen.node = now, node
        if seen.unschedulable is None and not node and unschedulable(pod):
            seen.unschedulable = now
        if seen.running is None and (pod.get("status") or {}).get("phase") == "Running":
            seen.running = now

    def _node(self, event: Event) -> None:
        if not isinstance(event, Added | Updated):
            return
        now, node = time.time(), event.obj
        seen = self.nodes.setdefault(node["metadata"]["name"], NodeSeen(registered=now))
        seen.provider_id = (node.get("spec") or {}).get("providerID") or seen.provider_id
        if seen.ready is None and node_ready(node):
            seen.ready = now
        if seen.schedulable is None and node_schedulable(node):
            seen.schedulable = now

    def _target(self, event: Event) -> None:
        if not isinstance(event, Added | Updated):
            return
        value = int((event.obj.get("spec") or {}).get("targetNodes", 0))
        if not self.targets or self.targets[-1][1] != value:
            self.targets.append((time.time(), value))

    def _claim(self, event: Event) -> None:
        if not isinstance(event, Added | Updated):
            return
        now, claim = time.time(), event.obj
        seen = self.claims.setdefault(claim["metadata"]["name"], ClaimSeen(created=now))
        status = claim.get("status") or {}
        seen.provider_id = status.get("providerID") or seen.provider_id
        launched = any(
            c.get("type") == "Launched" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if seen.launched is None and launched:
            seen.launched = now
