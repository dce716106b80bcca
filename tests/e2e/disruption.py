"""What the disruption tests (drain, blockers, pool deletion, budgets, repair) share: the
objects they create, the oracles that watch the apiserver while the operator works (every
request its client sent, a Deployment's pods, a pool's Nodes), and the waits for a pool's
Nodes to be usable.

The oracles read only what the apiserver says or what the operator's client was told, never
the operator's own state: a test asserts on what the cluster saw.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from kubeloop import DEPLOYMENTS, NODES, PODS, Client, Deleted, Informer, NotFound, Object, Resource
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.test_autoscaler import events_about

DISRUPTING = "kubeloop.dev/disrupting"
DO_NOT_DISRUPT = "kubeloop.dev/do-not-disrupt"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
UNNEEDED = "autoscaling.kubeloop.dev/unneeded-since"
CANDIDATE = "autoscaling.kubeloop.dev/deletion-candidate"
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
DEPLOYMENTS_RES = DEPLOYMENTS


# -- the objects ---------------------------------------------------------------------------


def pool(name: str, target: int) -> dict[str, Any]:
    """A pool of ``target`` m5.large Nodes, at most 5."""
    return factories.nodepool(name, target=target, max_nodes=5)


def pod(name: str, pool_name: str, **meta: Any) -> dict[str, Any]:
    """A 100m pod pinned to ``pool_name``'s Nodes, gone at once when deleted; ``meta`` are
    its labels or annotations."""
    return factories.pod(name, node_selector={POOL_LABEL: pool_name}, grace=0, cpu="100m", **meta)


def deployment(replicas: int) -> dict[str, Any]:
    """Deployment ``web`` of ``replicas`` 100m pods labelled ``app=web``."""
    return factories.deployment("web", replicas)


def budget(max_unavailable: int) -> dict[str, Any]:
    """PodDisruptionBudget ``web`` over the ``app=web`` pods."""
    return factories.pdb("web", max_unavailable=max_unavailable)


# -- reading the cluster -------------------------------------------------------------------


def is_ready(obj: Object) -> bool:
    """The object (a Node or a Pod) has condition Ready=True."""
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_ready_untainted(node: Object) -> bool:
    """Ready with no taint at all: kube-controller-manager lifts node.kubernetes.io/not-ready
    (and unschedulable's taint) a little after the change, and a spread with
    nodeTaintsPolicy Honor leaves a tainted node out of the skew."""
    return is_ready(node) and not (node.get("spec") or {}).get("taints")


def is_evicted(obj: Object) -> bool:
    """A pod's final state says the Eviction API removed it."""
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI"
        for c in conditions
    )


async def nodes_of(env: OperatorEnv, name: str) -> list[Object]:
    return list((await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}"))["items"])


async def ready_nodes(
    env: OperatorEnv, name: str, count: int, *, untainted: bool = False
) -> list[Object]:
    """Pool ``name``'s Ready (and, with ``untainted``, untainted) Nodes if there are exactly
    ``count`` of them, else none: a predicate for ``env.eventually``."""
    usable = is_ready_untainted if untainted else is_ready
    found = [n for n in await nodes_of(env, name) if usable(n)]
    return found if len(found) == count else []


async def settled_nodes(env: OperatorEnv, name: str, count: int) -> list[str]:
    """Wait for pool ``name`` to have exactly ``count`` Nodes, all Ready and untainted;
    their names, sorted."""

    async def settled() -> list[str]:
        found = await nodes_of(env, name)
        ready = sorted(n["metadata"]["name"] for n in found if is_ready_untainted(n))
        return ready if len(found) == count and len(ready) == count else []

    return await env.eventually(settled, f"{count} Ready, untainted nodes", timeout=120)


async def available(env: OperatorEnv, namespace: str, count: int) -> bool:
    """Deployment ``web`` reports ``count`` available replicas."""
    status = (await env.client.get(DEPLOYMENTS_RES, "web", namespace)).get("status") or {}
    return status.get("availableReplicas") == count


async def pool_gone(env: OperatorEnv, name: str) -> bool:
    try:
        await env.client.get(NODEPOOLS, name)
    except NotFound:
        return True
    return False


async def events(env: OperatorEnv, name: str, reason: str) -> list[str]:
    return await events_about(env.client, name, "default", reason)


# -- watching while the operator works -------------------------------------------------------


class Requests:
    """Every request the operator's client made: (verb, resource, subresource, code) counts."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str, str, int]] = Counter()

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        self.seen[(verb, resource.plural if resource else "", subresource or "", code)] += 1

    def evictions(self, *, refused: bool = False) -> int:
        """Evictions the server accepted (2xx), or refused with 429 (a PDB)."""
        return sum(
            n
            for (verb, res, sub, code), n in self.seen.items()
            if (verb, res, sub) == ("create", "pods", "eviction")
            and (code == 429 if refused else 200 <= code < 300)
        )

    def pod_deletes(self) -> int:
        return sum(
            n for (verb, res, _, _), n in self.seen.items() if (verb, res) == ("delete", "pods")
        )


class DeploymentPods:
    """A watch on the Deployment's pods and its status, from before the scale-down: every
    pod's node, which pods were deleted, and the fewest available replicas ever reported."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.nodes: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.available: list[int] = []
        self._pods = Informer(client, PODS, namespace=namespace, label_selector="app=web")
        self._deployments = Informer(client, DEPLOYMENTS_RES, namespace=namespace)
        self._pods.add_handler(self._pod)
        self._deployments.add_handler(self._deployment)

    async def start(self) -> None:
        for informer in (self._pods, self._deployments):
            informer.start()
        await asyncio.gather(self._pods.wait_synced(), self._deployments.wait_synced())

    async def stop(self) -> None:
        await self._pods.stop()
        await self._deployments.stop()

    def _pod(self, event: Any) -> None:
        name = event.obj["metadata"]["name"]
        if isinstance(event, Deleted):
            self.deleted.add(name)
        elif node := event.obj["spec"].get("nodeName"):
            self.nodes[name] = node

    def _deployment(self, event: Any) -> None:
        status = event.obj.get("status") or {}
        if status.get("observedGeneration"):
            self.available.append(int(status.get("availableReplicas") or 0))


class PodWatch:
    """Every event of the Deployment's pods, from before the disruption: the fewest pods
    available (Ready, not terminating) at any point, each deleted pod's final state and
    resourceVersion, and each pod's node."""

    def __init__(self, env: OperatorEnv, namespace: str) -> None:
        self.current: dict[str, Object] = {}
        self.final: dict[str, Object] = {}
        self.nodes: dict[str, str] = {}
        self.available: list[int] = []
        self._informer = Informer(env.client, PODS, namespace=namespace, label_selector="app=web")
        self._informer.add_handler(self._on)

    async def start(self) -> None:
        self._informer.start()
        await self._informer.wait_synced()
        # The initial list arrives pod by pod: count from the synced state on.
        self.available = self.available[-1:]

    async def stop(self) -> None:
        await self._informer.stop()

    def _on(self, event: Any) -> None:
        obj = event.obj
        name = obj["metadata"]["name"]
        if node := obj["spec"].get("nodeName"):
            self.nodes[name] = node
        if isinstance(event, Deleted):
            self.current.pop(name, None)
            self.final[name] = obj
        else:
            self.current[name] = obj
        self.available.append(
            sum(
                1
                for p in self.current.values()
                if is_ready(p) and not p["metadata"].get("deletionTimestamp")
            )
        )


class NodeWatch:
    """The resourceVersion at which each Node was first seen deleted (deletionTimestamp set,
    or gone), each Node's taints over time, and the Nodes the Autoscaler ever named
    unneeded."""

    def __init__(self, env: OperatorEnv, selector: str) -> None:
        self.deleted_at: dict[str, int] = {}
        self.tainted: dict[str, list[bool]] = {}
        self.named: set[str] = set()
        self.soft: set[str] = set()
        self._informer = Informer(env.client, NODES, label_selector=selector)
        self._informer.add_handler(self._on)

    async def start(self) -> None:
        self._informer.start()
        await self._informer.wait_synced()

    async def stop(self) -> None:
        await self._informer.stop()

    def _on(self, event: Any) -> None:
        meta = event.obj["metadata"]
        name = meta["name"]
        if isinstance(event, Deleted) or meta.get("deletionTimestamp"):
            self.deleted_at.setdefault(name, int(meta["resourceVersion"]))
        if UNNEEDED in (meta.get("annotations") or {}):
            self.named.add(name)
        taints = (event.obj.get("spec") or {}).get("taints") or ()
        if any(t.get("key") == CANDIDATE and t.get("effect") == "PreferNoSchedule" for t in taints):
            self.soft.add(name)
        has = any(t.get("key") == DISRUPTING for t in taints)
        seen = self.tainted.setdefault(name, [])
        if not seen or seen[-1] != has:
            seen.append(has)
