"""The fault matrix's drain paths (issue 22 item 9): the NodePool operator removing a node
that runs pods under a PodDisruptionBudget, struck mid-drain.

One adapter per path that drains: ``scaledown`` (the Autoscaler finds a node unneeded; a
bare pod holds another), ``pooldelete`` (a pool is deleted while a second pool has room),
``repair`` (a node's kubelet goes silent), ``expiry`` (``expireAfter`` set below the nodes'
age, then unset once a node is retired). Each one's ``update`` returns once a node of the
scope is tainted for removal, so a fault at ``update`` strikes mid-drain.

The oracles read the apiserver and the fault proxy's log, never the operator's counters:

- no pod taken against its budget: the operator never DELETEs a pod (the proxy's log; it
  only POSTs evictions, which the apiserver checks against the PDB), and a watch of the
  Deployment's pods never saw fewer available than the budget allows (less the pods a
  silenced kubelet took down with it: that is the failure, not the drain);
- no pod lost: the Deployment ends with every replica Running and Ready on a live node, no
  pod was deleted without the Eviction API (the pod garbage collector's, after its Node
  went), and a bare pod on a node its blocker holds ends untouched (same uid, Running);
- no node left tainted for removal: every Node of the scope still there at the end is
  free of the disruption taint.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubeloop import DEPLOYMENTS, LEASES, NODES, PODS, Deleted, Informer, Object
from kubeloop.envtest import NODE_LEASE_NAMESPACE, silenced_lease_patch
from kubeloop.testing.oracles import ObjectKey, State
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.controllers.nodepool._intent import POOL_UID_TAG
from tests import factories
from tests.e2e.disruption import DISRUPTING, PDBS, is_evicted, is_ready
from tests.faults.operators import (
    Harm,
    Losses,
    NodePoolOperator,
    Scope,
    _get,
    pool_status_mismatches,
)
from tests.faults.world import World

#: The Deployment every scenario disrupts, and how many of its pods may be down at once.
APP = "web"
MAX_UNAVAILABLE = 1
#: How long a step of the set-up may take (a 2-core machine under load).
STEP_S = 120.0


async def _until(
    check: Callable[[], Awaitable[Any]], what: str, timeout: float = STEP_S, seen: Any = None
) -> Any:
    """Poll ``check`` until it returns something true; that value. The set-up's waits: a
    timeout is a harness error (the scenario fails, naming ``what``, the last error and
    ``seen`` as it was then)."""
    deadline = time.monotonic() + timeout
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if found := await check():
                return found
        except Exception as err:  # an apiserver restart: not there yet
            error = err
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last error {error!r}; seen {seen})")


def _tainted(node: Object) -> bool:
    return any(t.get("key") == DISRUPTING for t in (node.get("spec") or {}).get("taints") or ())


def _available(pod: Object) -> bool:
    return is_ready(pod) and not pod["metadata"].get("deletionTimestamp")


def _whereabouts(pod: Object, nodes: dict[str, Object]) -> str:
    """A pod's state and its node's, for a note."""
    node = pod["spec"].get("nodeName")
    there = "gone" if node not in nodes else f"tainted={_tainted(nodes[node])}"
    return (
        f"pod {pod['metadata']['name']}: phase {(pod.get('status') or {}).get('phase')}, "
        f"ready={is_ready(pod)}, deleting={bool(pod['metadata'].get('deletionTimestamp'))}, "
        f"node {node} ({there})"
    )


class PodWatch:
    """The scope's pods as a watch of the apiserver saw them: each one's last state, each
    deleted one's final state, and, once armed, the fewest Deployment pods available."""

    def __init__(self, world: World, namespace: str) -> None:
        self.current: dict[str, Object] = {}
        self.final: dict[str, Object] = {}
        #: Deleted pods whose final state the watch missed (inferred from a relist).
        self.unknown: set[str] = set()
        self.fewest: int | None = None
        #: Pool Nodes seen tainted for removal or deleted, in the order first seen (a fast
        #: drain can begin and end between two polls: the watch sees it).
        self.struck: list[tuple[str, str]] = []  # (node, pool)
        self._informer = Informer(world.admin, PODS, namespace=namespace)
        self._informer.add_handler(self._on)
        self._nodes = Informer(world.admin, NODES, label_selector=POOL_LABEL)
        self._nodes.add_handler(self._on_node)

    async def start(self) -> None:
        for informer in (self._informer, self._nodes):
            informer.start()
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in (self._informer, self._nodes):
            await informer.stop()

    def _on_node(self, event: Any) -> None:
        name = event.obj["metadata"]["name"]
        gone = isinstance(event, Deleted) or event.obj["metadata"].get("deletionTimestamp")
        pool = (event.obj["metadata"].get("labels") or {}).get(POOL_LABEL, "")
        if (gone or _tainted(event.obj)) and (name, pool) not in self.struck:
            self.struck.append((name, pool))

    def arm(self) -> None:
        """Count from now on (the Deployment is fully available)."""
        self.fewest = self.available()

    def available(self) -> int:
        return sum(
            1
            for p in self.current.values()
            if p["metadata"].get("labels", {}).get("app") == APP and _available(p)
        )

    def _on(self, event: Any) -> None:
        name = event.obj["metadata"]["name"]
        if isinstance(event, Deleted):
            self.current.pop(name, None)
            self.final[name] = event.obj
            if event.final_state_unknown:
                self.unknown.add(name)
        else:
            self.current[name] = event.obj
        if self.fewest is not None:
            self.fewest = min(self.fewest, self.available())


@dataclass
class Workload:
    """What one scope's scenario made and expects."""

    watch: PodWatch
    replicas: int
    #: Live pools and how many Ready nodes each ends with.
    pools: dict[str, int] = field(default_factory=dict)
    #: Nodes that must be gone at the end (the repaired, the retired).
    gone: list[str] = field(default_factory=list)
    #: Bare pods (no controller) on nodes their blocker holds: name -> uid.
    bare: dict[str, str] = field(default_factory=dict)
    #: Deployment pods a silenced kubelet took down (not the drain's doing).
    involuntary: int = 0


class DrainingOperator(NodePoolOperator):
    """``nodepool-operator run`` (NodePool and Autoscaler controllers) draining a node."""

    name: ClassVar[str]
    #: The Deployment's size and each pod's CPU request.
    replicas: ClassVar[int] = 3
    cpu: ClassVar[str] = "100m"

    def __init__(self) -> None:
        self.runs: dict[str, Workload] = {}

    # -- set-up helpers ---------------------------------------------------------------------
    async def _pool(self, world: World, scope: Scope, name: str, size: int, **spec: Any) -> None:
        """Create pool ``name`` of ``size`` nodes and wait until they are Ready, untainted."""
        await world.user.create(
            NODEPOOLS, scope.labelled(factories.nodepool(name, target=size, max_nodes=6, **spec))
        )

        seen: list[str] = []

        async def ready() -> bool:
            nodes = await self._nodes(world, name)
            seen[:] = [
                f"{n['metadata']['name']} ready={is_ready(n)} "
                f"taints={[t['key'] for t in (n.get('spec') or {}).get('taints') or ()]}"
                for n in nodes
            ]
            return len(nodes) == size and all(
                is_ready(n) and not (n.get("spec") or {}).get("taints") for n in nodes
            )

        await _until(ready, f"pool {name}'s {size} nodes Ready, untainted", seen=seen)

    async def _one_pool(
        self, world: World, scope: Scope, pool: str, size: int, **spec: Any
    ) -> Workload:
        """Pool ``pool`` of ``size`` nodes running the Deployment, which it ends with."""
        await self._pool(world, scope, pool, size, **spec)
        run = await self._deploy(world, scope, {POOL_LABEL: pool})
        run.pools[pool] = size
        scope.desired = dict(run.pools)
        return run

    async def _nodes(self, world: World, pool: str) -> list[Object]:
        listed = await world.admin.list(NODES, label_selector=f"{POOL_LABEL}={pool}")
        return list(listed["items"])

    async def _deploy(self, world: World, scope: Scope, selector: dict[str, str]) -> Workload:
        """The Deployment under its budget, fully available; the scope's watch armed."""
        watch = PodWatch(world, scope.namespace)
        await watch.start()
        run = self.runs[scope.id] = Workload(watch, self.replicas)
        dep = factories.deployment(APP, self.replicas, cpu=self.cpu, node_selector=selector)
        await world.user.create(DEPLOYMENTS, dep, scope.namespace)
        pdb = factories.pdb(APP, max_unavailable=MAX_UNAVAILABLE)
        await world.user.create(PDBS, pdb, scope.namespace)

        async def up() -> bool:
            return watch.available() == self.replicas and await self._deployed(world, scope)

        await _until(up, f"the Deployment's {self.replicas} pods available")
        return run

    async def _deployed(self, world: World, scope: Scope) -> bool:
        status = (await world.admin.get(DEPLOYMENTS, APP, scope.namespace)).get("status") or {}
        return all(
            status.get(k) == self.replicas
            for k in ("replicas", "availableReplicas", "readyReplicas", "updatedReplicas")
        )

    def _pods_on(self, run: Workload) -> dict[str, int]:
        """Node -> how many of the Deployment's pods run there."""
        out: dict[str, int] = {}
        for p in run.watch.current.values():
            node = p["spec"].get("nodeName")
            if node and p["metadata"].get("labels", {}).get("app") == APP:
                out[node] = out.get(node, 0) + 1
        return out

    async def _until_draining(self, world: World, scope: Scope) -> str:
        """Wait until a node of the scope is tainted for removal (or already deleted, as a
        watch saw it): the drain has begun; its name."""
        run = self.runs[scope.id]

        seen: dict[str, Any] = {}

        pools = {*run.pools, *scope.deleted}

        async def tainted() -> str | None:
            for name, pool in run.watch.struck:
                if pool in pools:
                    return name
            # what the operator said meanwhile, for the timeout's message
            seen["pods by node"] = self._pods_on(run)
            for res in (AUTOSCALERS, NODEPOOLS):
                listed = await world.admin.list(res, label_selector=scope.selector)
                for obj in listed["items"]:
                    seen[obj["metadata"]["name"]] = obj.get("status")
            return None

        return str(await _until(tainted, "a node tainted for removal", seen=seen))

    # -- the runner's interface ---------------------------------------------------------------
    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        return scope.id in self.runs  # create() itself waits for the nodes and pods

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        run = self.runs[scope.id]
        out: list[str] = []
        if not await self._deployed(world, scope):
            out.append(f"Deployment {APP}: not all {run.replicas} replicas available")
        _, _, running = await self._running(world, scope)
        if len(running) != run.replicas:
            out.append(f"{len(running)} of {run.replicas} {APP} pods Running on live nodes")
        cloud = scope.cloud()
        for name, want in run.pools.items():
            pool = await _get(world, NODEPOOLS, name)
            out += pool_status_mismatches(name, pool, want)
            if pool is None:
                continue
            nodes = await self._nodes(world, name)
            ready = [n for n in nodes if is_ready(n)]
            if len(nodes) != want or len(ready) != want:
                out.append(f"pool {name}: {len(ready)} Ready of {len(nodes)} Nodes != {want}")
        for name, uid in scope.deleted.items():
            if await _get(world, NODEPOOLS, name) is not None:
                out.append(f"pool {name}: deleted, still there")
            if [v for v in await cloud.list({POOL_UID_TAG: uid}) if v.state != "terminated"]:
                out.append(f"pool {name}: deleted, VMs still live")
        for node in await self._left_tainted(world, scope):
            out.append(f"node {node}: still tainted {DISRUPTING}")
        for node in run.gone:
            if await _get(world, NODES, node) is not None:
                out.append(f"node {node}: still there")
        return out

    async def _running(
        self, world: World, scope: Scope
    ) -> tuple[list[Object], dict[str, Object], list[Object]]:
        """The scope's pods, every Node by name, and the Deployment's pods Running and
        Ready on a live, untainted Node (read from the apiserver: the Deployment's status
        may lag behind its pods, e.g. after an apiserver restart)."""
        pods = list((await world.admin.list(PODS, scope.namespace))["items"])
        nodes = {n["metadata"]["name"]: n for n in (await world.admin.list(NODES))["items"]}
        running = [
            p
            for p in pods
            if p["metadata"].get("labels", {}).get("app") == APP
            and _available(p)
            and (p.get("status") or {}).get("phase") == "Running"
            and p["spec"].get("nodeName") in nodes
            and not _tainted(nodes[p["spec"]["nodeName"]])
        ]
        return pods, nodes, running

    async def _left_tainted(self, world: World, scope: Scope) -> list[str]:
        run = self.runs[scope.id]
        return [
            n["metadata"]["name"]
            for pool in [*run.pools, *scope.deleted]
            for n in await self._nodes(world, pool)
            if _tainted(n)
        ]

    async def losses(self, world: World, scope: Scope) -> Losses:
        """VMs: one live per node the live pools end with, none of a deleted pool's."""
        run, cloud = self.runs[scope.id], scope.cloud()
        leaked, notes = 0, []
        for name, want in run.pools.items():
            pool = await _get(world, NODEPOOLS, name)
            if pool is None:
                continue
            uid = pool["metadata"]["uid"]
            live = [v for v in await cloud.list({POOL_UID_TAG: uid}) if v.state != "terminated"]
            leaked += max(0, len(live) - want)
        for name, uid in scope.deleted.items():
            live = [v for v in await cloud.list({POOL_UID_TAG: uid}) if v.state != "terminated"]
            leaked += len(live)
            notes += [f"pool {name} (deleted): VM {v.id} live" for v in live]
        return Losses(0, cloud.duplicates(), leaked, tuple(notes))

    async def harm(self, world: World, scope: Scope) -> Harm:
        run, ns = self.runs[scope.id], scope.namespace
        notes: list[str] = []
        # (1) taken against the budget: a DELETE of a pod by the operator, or fewer
        # available than the budget allows
        mine = [
            e for e in world.proxy.log.entries(resource="pods", namespace=ns) if e.client != "user"
        ]
        deletes = [e for e in mine if e.verb in ("delete", "deletecollection")]
        evictions = [e for e in mine if e.verb == "create" and e.subresource == "eviction"]
        accepted = sum(200 <= e.status < 300 for e in evictions)
        refused = sum(e.status == 429 for e in evictions)
        floor = run.replicas - MAX_UNAVAILABLE - run.involuntary
        fewest = run.watch.fewest if run.watch.fewest is not None else run.replicas
        breaches = len(deletes) + (fewest < floor)
        notes.append(
            f"drain: {accepted} evictions accepted, {refused} refused (429) by the budget; "
            f"fewest {APP} pods available {fewest} of {run.replicas} (floor {floor})"
        )
        notes += [f"operator {e.client} DELETEd pod {e.name} ({e.status})" for e in deletes]
        # (2) lost: not Running and Ready on a live node at the end, deleted without an
        # eviction, or a bare pod on a blocked node touched
        pods, nodes, running = await self._running(world, scope)
        lost = max(0, run.replicas - len(running))
        if lost:
            notes.append(f"{len(running)} of {run.replicas} {APP} pods Running on live nodes")
            notes += [_whereabouts(p, nodes) for p in pods if p not in running]
        # (a deletion the watch inferred from a relist, an apiserver restart's, has no
        # final state: the eviction the apiserver accepted for it, in the proxy's log, says)
        evicted = {e.name for e in evictions if 200 <= e.status < 300}
        for name, final in run.watch.final.items():
            if not is_evicted(final) and not (name in run.watch.unknown and name in evicted):
                lost += 1
                notes.append(f"pod {name} deleted without an eviction")
        by_name = {p["metadata"]["name"]: p for p in pods}
        for name, uid in run.bare.items():
            pod = by_name.get(name)
            phase = ((pod or {}).get("status") or {}).get("phase")
            if pod is None or pod["metadata"]["uid"] != uid or not _available(pod):
                lost += 1
                notes.append(f"bare pod {name} on a blocked node touched (phase {phase})")
        # (3) left tainted
        tainted = await self._left_tainted(world, scope)
        notes += [f"node {n} left tainted {DISRUPTING}" for n in tainted]
        return Harm(breaches, lost, len(tainted), tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        run = self.runs[scope.id]
        objects: dict[ObjectKey, Object] = {}
        for name in [*run.pools, *scope.deleted]:
            nodes = await self._nodes(world, name)
            objects[("pools", "", name.rsplit("-", 1)[0])] = {
                "there": await _get(world, NODEPOOLS, name) is not None,
                "nodes": len(nodes),
            }
        objects[("deployments", "", APP)] = {"available": run.watch.available()}
        return State(objects)

    async def close(self, world: World, scope: Scope) -> None:
        run = self.runs.pop(scope.id, None)
        if run is not None:
            await run.watch.stop()


class ScaleDown(DrainingOperator):
    """Three nodes, four 700m pods (two on one node, one on each other: three fit on no
    node), a bare pod beside the lone pod of one node. The Autoscaler finds both lone-pod
    nodes unneeded; the bare pod's blocker holds its node, the other one is drained."""

    name = "scaledown"
    replicas = 4
    cpu = "700m"

    async def create(self, world: World, scope: Scope) -> None:
        pool = f"sd-{scope.id}"
        run = await self._one_pool(world, scope, pool, 3)
        lone = min(sorted(self._pods_on(run).items()), key=lambda item: item[1])[0]
        bare = factories.pod("bare", node=lone, cpu="50m", grace=0)
        created = await world.user.create(PODS, bare, scope.namespace)
        run.bare["bare"] = created["metadata"]["uid"]

        async def bare_up() -> bool:
            pod = run.watch.current.get("bare")
            return pod is not None and _available(pod)

        await _until(bare_up, "the bare pod Ready")
        run.pools[pool] = 2  # the other lone pod's node goes
        scope.desired = dict(run.pools)
        run.watch.arm()

    async def update(self, world: World, scope: Scope) -> None:
        (pool,) = self.runs[scope.id].pools
        scaler = factories.autoscaler(
            f"as-{scope.id}",
            pool=pool,
            namespaces=[scope.namespace],
            frequency="1s",
            scaleDownEnabled=True,
            scaleDownUnneededTime="2s",
        )
        await world.user.create(AUTOSCALERS, scope.labelled(scaler))
        await self._until_draining(world, scope)


class PoolDeletion(DrainingOperator):
    """Pool ``old`` (two nodes) runs three pods; pool ``new`` (one node, same label) has
    room. ``old`` is deleted: both its nodes drain at once, under the budget."""

    name = "pooldelete"
    group = "faults.kubeloop.dev/group"

    async def create(self, world: World, scope: Scope) -> None:
        old, new = f"old-{scope.id}", f"new-{scope.id}"
        labels = {"labels": {self.group: scope.id}}
        await self._pool(world, scope, old, 2, **labels)
        run = await self._deploy(world, scope, {self.group: scope.id})
        await self._pool(world, scope, new, 1, **labels)
        run.pools = {old: 2, new: 1}
        scope.desired = dict(run.pools)
        run.watch.arm()

    async def update(self, world: World, scope: Scope) -> None:
        run = self.runs[scope.id]
        old = f"old-{scope.id}"
        gone = await world.user.get(NODEPOOLS, old)
        await world.user.delete(NODEPOOLS, old)
        scope.deleted[old] = gone["metadata"]["uid"]
        del run.pools[old], scope.desired[old]
        await self._until_draining(world, scope)


class Repair(DrainingOperator):
    """Three nodes, three pods; the kubelet of a node with one of them goes silent. With
    a toleration of 2 s and 50 % allowed unhealthy, the node is drained (for at most the
    3 s drain timeout: its evicted pod cannot finish terminating) and replaced."""

    name = "repair"

    async def create(self, world: World, scope: Scope) -> None:
        # (a pod evicted from a node whose kubelet is gone stays Terminating: the repair's
        # drain stops waiting for it after drainTimeout, and the node goes)
        repair = {
            "drainTimeout": "3s",
            "repair": {"toleration": "2s", "maxUnhealthyPercent": 50},
        }
        run = await self._one_pool(world, scope, f"rp-{scope.id}", 3, disruption=repair)
        run.watch.arm()

    async def update(self, world: World, scope: Scope) -> None:
        run = self.runs[scope.id]
        node, count = min(sorted(self._pods_on(run).items()), key=lambda item: item[1])
        run.involuntary = count
        run.gone.append(node)
        # its kubelet dies, the VM runs on (SimulatedKubelets.kill: no more Lease renewals)
        await world.admin.patch(LEASES, node, silenced_lease_patch(), NODE_LEASE_NAMESPACE)
        await self._until_draining(world, scope)


class Expiry(DrainingOperator):
    """Two nodes, four pods; ``expireAfter: 2s`` makes both old, and once the first is
    retired (its replacement Ready, it tainted) expiry is off again, so the roll ends."""

    name = "expiry"
    replicas = 4

    async def create(self, world: World, scope: Scope) -> None:
        run = await self._one_pool(world, scope, f"ex-{scope.id}", 2)
        run.watch.arm()

    async def update(self, world: World, scope: Scope) -> None:
        run = self.runs[scope.id]
        (pool,) = run.pools
        expire = {"spec": {"disruption": {"expireAfter": "2s"}}}
        await world.user.patch(NODEPOOLS, pool, expire)
        run.gone.append(await self._until_draining(world, scope))
        await world.user.patch(NODEPOOLS, pool, {"spec": {"disruption": {"expireAfter": None}}})


DISRUPTION_ADAPTERS: dict[str, DrainingOperator] = {
    a.name: a for a in (ScaleDown(), PoolDeletion(), Repair(), Expiry())
}
