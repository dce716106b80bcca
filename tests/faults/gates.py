"""The fault matrix's gated new nodes (issue 25): an Autoscaler scales a pool up, and goes
away while the new nodes register gated.

The NodePool controller bootstraps every new node of a pool an Autoscaler scales with the
reservation taint ``autoscaling.kubeloop.dev/reserved=<node>:NoSchedule`` (the gate); the
Autoscaler lifts the gates once its nominations are written. Here the user deletes the
Autoscaler after the new VMs were created gated and before their Nodes register (the VMs
boot for a few seconds), so no Autoscaler will ever lift those gates. Another controller's
finalizer holds the Autoscaler (a GitOps tool's, say): it stays there, being deleted, for
the whole run, which its controller must treat as gone. What opens the nodes is the NodePool
controller's backstop, :data:`RESERVATION_BACKSTOP` landing graces after each became Ready
(the operator runs with a 2 s landing grace). The scope's ``update`` returns once every new
Node has registered gated, so a fault at ``update`` strikes while only the backstop can open
them (a killed operator restarts knowing nothing: the backstop reads the Node's Ready time).

The oracles read the apiserver (with :mod:`.disruption`'s, whose drain counters stay 0 here):
every gate is eventually lifted (a Node of the pool still gated is a mismatch, and counts in
``left_tainted``), the Deployment's pods all bind and run, the pool has as many Ready Nodes
as the Autoscaler asked for. Set-up steps that did not happen as described (a Node that
registered before the Autoscaler was deleted, a new VM whose bootstrap carries no gate) fail
the scenario as a harness error: it would not test what it says.
"""

from __future__ import annotations

from typing import Any

from kubeloop import DEPLOYMENTS, Object, remove_finalizer, retry_on_conflict
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.cloud import NodeBootstrap
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._reserve import RESERVED_KEY, reservation_taint, reserved_for
from nodepool_operator.controllers.nodepool._intent import POOL_UID_TAG
from tests import factories
from tests.faults.disruption import APP, DrainingOperator, PodWatch, Workload, _until
from tests.faults.operators import Harm, Scope, _get
from tests.faults.world import World

#: The user's other controller holding the Autoscaler once it is deleted.
HOLD = "faults.kubeloop.dev/hold"
#: How long a new VM boots: the Autoscaler is deleted meanwhile, before its Node registers.
BOOT_S = 5.0
#: The operator's pod landing grace; the backstop opens a gated node 4 of them after Ready.
LANDING_GRACE_S = 2.0


def _gated(node: Object) -> bool:
    return reserved_for(node_fields(node)) is not None


class GatedScaleUp(DrainingOperator):
    """A pool at 0 nodes and its Autoscaler; a Deployment of three 700m pods (two fit on a
    node) makes it scale up. Once the new VMs exist, gated, the Autoscaler is deleted (held
    by :data:`HOLD`); ``update`` returns when their Nodes have registered gated."""

    name = "gated"
    replicas = 3
    cpu = "700m"

    def __init__(self) -> None:
        super().__init__()
        #: Per scope: the new VMs seen bootstrapped gated while the Autoscaler was there.
        self.gated: dict[str, list[str]] = {}

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        args = super().argv(world, scope, client, leader=leader)
        return [*args, "--boot-seconds", str(BOOT_S), "--landing-grace", str(LANDING_GRACE_S)]

    def _names(self, scope: Scope) -> tuple[str, str]:
        return f"gt-{scope.id}", f"as-{scope.id}"

    async def create(self, world: World, scope: Scope) -> None:
        pool, scaler = self._names(scope)
        await world.user.create(NODEPOOLS, scope.labelled(factories.nodepool(pool, max_nodes=4)))
        autoscaler = factories.autoscaler(
            scaler, pool=pool, namespaces=[scope.namespace], frequency="1s"
        )
        autoscaler["metadata"]["finalizers"] = [HOLD]
        await world.user.create(AUTOSCALERS, scope.labelled(autoscaler))
        watch = PodWatch(world, scope.namespace)
        await watch.start()
        run = self.runs[scope.id] = Workload(watch, self.replicas)
        dep = factories.deployment(
            APP, self.replicas, cpu=self.cpu, node_selector={POOL_LABEL: pool}
        )
        await world.user.create(DEPLOYMENTS, dep, scope.namespace)

        seen: dict[str, Any] = {}

        async def created() -> list[Any]:
            """The pool's VMs, once the Autoscaler raised its target and they all exist."""
            obj = await _get(world, NODEPOOLS, pool)
            target = int(((obj or {}).get("spec") or {}).get("targetNodes") or 0)
            if obj is None or not target:
                return []
            vms = await scope.cloud().list({POOL_UID_TAG: obj["metadata"]["uid"]})
            live = [v for v in vms if v.state != "terminated"]
            seen.update(target=target, vms=[v.name for v in live])
            return live if len(live) == target else []

        vms = await _until(created, f"pool {pool} scaled up, its VMs created", seen=seen)
        for vm in vms:
            boot = NodeBootstrap.decode(vm.user_data)
            if boot is None or reservation_taint(vm.name) not in boot.taints:
                raise AssertionError(f"VM {vm.name} of pool {pool} was not bootstrapped gated")
        self.gated[scope.id] = [vm.name for vm in vms]
        run.pools[pool] = len(vms)
        scope.desired = dict(run.pools)

    async def update(self, world: World, scope: Scope) -> None:
        pool, scaler = self._names(scope)
        registered = [n["metadata"]["name"] for n in await self._nodes(world, pool)]
        if registered:
            raise AssertionError(
                f"Nodes {registered} registered before the Autoscaler was deleted (boot "
                f"{BOOT_S} s): the Autoscaler may have lifted their gates itself"
            )
        await world.user.delete(AUTOSCALERS, scaler)
        # nobody writes the target from now on: the Nodes the pool ends with
        target = int((await world.admin.get(NODEPOOLS, pool))["spec"]["targetNodes"])
        self.runs[scope.id].pools[pool] = target
        scope.desired = {pool: target}

        seen: list[str] = []

        # (a VM the Autoscaler asked for after create() returned may have been created once
        # it was deleted: then it registers open, rightly)
        gated = self.gated[scope.id]

        async def registered_gated() -> bool:
            nodes = {n["metadata"]["name"]: n for n in await self._nodes(world, pool)}
            seen[:] = [f"{name} gated={_gated(n)}" for name, n in nodes.items()]
            return len(nodes) == target and all(n in nodes and _gated(nodes[n]) for n in gated)

        await _until(registered_gated, f"pool {pool}'s Nodes {gated} registered gated", seen=seen)

    async def _still_gated(self, world: World, scope: Scope) -> list[str]:
        pool, _ = self._names(scope)
        return [n["metadata"]["name"] for n in await self._nodes(world, pool) if _gated(n)]

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        out = await super().mismatches(world, scope)
        out += [
            f"node {n}: still gated ({RESERVED_KEY})" for n in await self._still_gated(world, scope)
        ]
        return out

    async def harm(self, world: World, scope: Scope) -> Harm:
        harm = await super().harm(world, scope)
        gated = await self._still_gated(world, scope)
        notes = [f"node {n} left gated ({RESERVED_KEY})" for n in gated]
        return Harm(
            harm.pdb_breaches, harm.pods_lost, harm.left_tainted + len(gated), (*harm.notes, *notes)
        )

    async def close(self, world: World, scope: Scope) -> None:
        """Let the held Autoscaler go (the scenario is over)."""
        await super().close(world, scope)
        self.gated.pop(scope.id, None)
        _, scaler = self._names(scope)

        async def release() -> Object | None:
            obj = await _get(world, AUTOSCALERS, scaler)
            return (
                None if obj is None else await remove_finalizer(world.admin, AUTOSCALERS, obj, HOLD)
            )

        await retry_on_conflict(release)


GATE_ADAPTERS: dict[str, GatedScaleUp] = {GatedScaleUp.name: GatedScaleUp()}
