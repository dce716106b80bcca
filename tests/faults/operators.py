"""The three operators of the matrix: how to start one, its workload, and its oracles.

Each adapter answers, from the apiserver's state and the simulated cloud's records only:
is a scope converged (``mismatches``), what did it lose (``losses``), and what did it
end with (``snapshot``, for the differential check against a fault-free run).

A *scope* is what one operator instance serves: a namespace for the AppConfig example,
a label selector (plus a namespace for Instances and the Lease) for the NodePool
operator. Two instances of one operator get two scopes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kubeloop import CONFIGMAPS, NODES, NotFound, Object, Resource
from kubeloop.testing.oracles import Normalizer, ObjectKey, OpCount, State, WatchRecorder
from nodepool_operator.api import AUTOSCALERS, INSTANCES, NODEPOOLS
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers.instance import FINALIZER as INSTANCE_FINALIZER
from nodepool_operator.controllers.instance import UID_TAG
from nodepool_operator.controllers.nodepool import FINALIZER as NODEPOOL_FINALIZER
from nodepool_operator.controllers.nodepool._intent import POOL_UID_TAG
from tests import factories
from tests.faults import appconfig, tenant
from tests.faults.world import CRD_DIR, World

RUN_LABEL = "faults.kubeloop.dev/run"
LAUNCH = Path(__file__).with_name("launch.py")


@dataclass
class Scope:
    """What one operator instance serves, and what the workload wrote there."""

    id: str
    namespace: str
    cloud_state: Path
    #: The last spec the workload wrote, per object name (the lost-update oracle).
    desired: dict[str, Any] = field(default_factory=dict)
    #: Objects the workload deleted (must be gone, with all they owned).
    deleted: dict[str, str] = field(default_factory=dict)  # name -> uid
    #: ADDED/DELETED counts of the operator's children as the apiserver reported them
    #: (set by the runner for adapters with a ``child_watch``).
    children: WatchRecorder | None = None
    #: Finalizers the workload's objects are created with (another controller's, ahead
    #: of the operator's own: the ``meddle`` fault removes them while the operator
    #: removes its own).
    finalizers: tuple[str, ...] = ()

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.id}"

    def labelled(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})[RUN_LABEL] = self.id
        if self.finalizers:
            meta["finalizers"] = [*self.finalizers, *meta.get("finalizers", [])]
        return obj

    def cloud(self) -> SimulatedCloud:
        return SimulatedCloud(self.cloud_state, boot_seconds=0.5)


@dataclass(frozen=True)
class Losses:
    lost_updates: int = 0
    duplicate_vms: int = 0
    leaked_vms: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Harm:
    """What a disruption did to the workload (tests/faults/disruption.py), from the
    apiserver and the proxy's log: pods taken while their budget forbade it, pods lost,
    nodes left tainted for removal."""

    pdb_breaches: int = 0
    pods_lost: int = 0
    left_tainted: int = 0
    notes: tuple[str, ...] = ()


class OperatorAdapter:
    name: ClassVar[str]
    #: Kinds whose ``status.observedGeneration`` must never go backwards.
    generation_kinds: ClassVar[tuple[Resource, ...]]
    #: Whether its objects are cluster-scoped (watch by label, not namespace).
    cluster_scoped: ClassVar[bool] = False
    #: The finalizer it puts on each of the workload's objects before acting, if any.
    finalizer: ClassVar[str | None] = None
    #: The kind whose cluster-wide watch the ``watch-lag`` fault holds (None: the
    #: operator has no second, namespaced informer of a kind for it to lag behind).
    lag_kind: ClassVar[Resource | None] = None

    @property
    def meddle_kind(self) -> Resource:
        """The kind a second writer changes under the operator (the ``meddle`` fault)."""
        return self.generation_kinds[0]

    def scope_namespace(self, scope: Scope) -> str | None:
        """The namespace of the scope's workload objects (None: cluster-scoped)."""
        return None if self.cluster_scoped else scope.namespace

    async def unfinalized(self, world: World, scope: Scope) -> list[str]:
        """The workload's live objects that do not carry the operator's finalizer: were
        one deleted now, its cleanup (the VMs) would never run. Read from the apiserver."""
        if self.finalizer is None:
            return []
        ns = self.scope_namespace(scope)
        listed = await world.admin.list(self.meddle_kind, ns, label_selector=scope.selector)
        return [
            o["metadata"]["name"]
            for o in listed["items"]
            if o["metadata"]["name"] in scope.desired
            and self.finalizer not in (o["metadata"].get("finalizers") or [])
        ]

    async def install(self, world: World) -> None:
        raise NotImplementedError

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        raise NotImplementedError

    async def create(self, world: World, scope: Scope) -> None:
        raise NotImplementedError

    async def update(self, world: World, scope: Scope) -> None:
        raise NotImplementedError

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        raise NotImplementedError

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        """Whether the operator has made what the created objects ask for (the children,
        the VMs). The fault-free reference waits for it before the spec changes, so it
        makes everything a faulty run can make: a faulty run that creates fewer children
        (it never got to an object deleted meanwhile) is no difference, one that creates
        more is."""
        raise NotImplementedError

    async def losses(self, world: World, scope: Scope) -> Losses:
        raise NotImplementedError

    async def snapshot(self, world: World, scope: Scope) -> State:
        raise NotImplementedError

    def child_watch(self, scope: Scope) -> tuple[Resource, str | None, str | None] | None:
        """(kind, namespace, label selector) of the children to count creates and
        deletes of through a watch, or None (the cloud's records count them)."""
        return None

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        """Creates and deletes of what the operator owns (the apiserver's watch events,
        or the cloud's records), keyed by a name that is the same in every run."""
        raise NotImplementedError

    def overlaps(self, world: World, scope: Scope) -> list[str]:
        """Reconciles of one object that ran at once, as the operator's writes at the
        proxy show them (only adapters whose writes can say so)."""
        return []

    def in_scope(self, scope: Scope, namespace: str | None, name: str | None) -> bool:
        """Whether a write to (namespace, name) concerns ``scope``'s objects."""
        return namespace == scope.namespace

    async def harm(self, world: World, scope: Scope) -> Harm:
        """What the operator's disruptions did to the scope's pods (none: it drains none)."""
        return Harm()

    async def close(self, world: World, scope: Scope) -> None:
        """Stop what the adapter itself watches in ``scope`` (the runner's end)."""


async def _get(world: World, res: Resource, name: str, ns: str | None = None) -> Object | None:
    try:
        return await world.admin.get(res, name, ns)
    except NotFound:
        return None


def pool_status_mismatches(name: str, pool: Object | None, want: int) -> list[str]:
    """What a converged pool's status would not show: the pool missing, its spec not observed,
    or its current and Ready node counts other than ``want``."""
    if pool is None:
        return [f"pool {name}: missing"]
    out: list[str] = []
    status = pool.get("status") or {}
    if status.get("observedGeneration") != pool["metadata"]["generation"]:
        out.append(f"pool {name}: observedGeneration {status.get('observedGeneration')}")
    for key in ("currentNodes", "readyNodes"):
        if status.get(key) != want:
            out.append(f"pool {name}: {key} {status.get(key)} != {want}")
    return out


# -- (a) the AppConfig example -----------------------------------------------------------

APPS = 8


def _appcfg(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "examples.kubeloop.dev/v1",
        "kind": "AppConfig",
        "metadata": {"name": name},
        "spec": {"data": data},
    }


class AppConfigOperator(OperatorAdapter):
    """examples/configmap_child: ``for_(APPCONFIGS, namespace=A).owns(CONFIGMAPS)``."""

    name = "appconfig"
    generation_kinds = (appconfig.APPCONFIGS,)

    async def install(self, world: World) -> None:
        await appconfig.install_crd(world.admin)

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        args = [
            str(appconfig.EXAMPLE),
            "--kubeconfig",
            str(world.kubeconfig(client)),
            "--namespace",
            scope.namespace,
            "--no-install-crd",
            "--identity",
            client,
        ]
        if leader:
            args += ["--leader-elect", "--lease-duration", "4", "--renew-deadline", "3"]
            args += ["--retry-period", "0.5"]
        return args

    async def create(self, world: World, scope: Scope) -> None:
        for i in range(APPS):
            data = {"greeting": "hello", "index": str(i)}
            await world.user.create(
                appconfig.APPCONFIGS, scope.labelled(_appcfg(f"app-{i}", data)), scope.namespace
            )
            scope.desired[f"app-{i}"] = data

    async def update(self, world: World, scope: Scope) -> None:
        # every object gets a new spec (a new generation); one is deleted, one re-created
        for i in range(APPS):
            name = f"app-{i}"
            data = {"greeting": "bonjour", "index": str(i), "colour": "blue"}
            await world.user.patch(
                appconfig.APPCONFIGS, name, {"spec": {"data": data}}, scope.namespace
            )
            scope.desired[name] = data
        gone = await world.user.get(appconfig.APPCONFIGS, "app-1", scope.namespace)
        await world.user.delete(appconfig.APPCONFIGS, "app-1", scope.namespace)
        scope.deleted["app-1"] = gone["metadata"]["uid"]
        del scope.desired["app-1"]

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        ns = scope.namespace
        apps = {
            o["metadata"]["name"]: o
            for o in (await world.admin.list(appconfig.APPCONFIGS, ns))["items"]
        }
        children = {
            o["metadata"]["name"]: o
            for o in (await world.admin.list(CONFIGMAPS, ns, label_selector=appconfig.CHILD_LABEL))[
                "items"
            ]
        }
        out: list[str] = []
        for name, data in scope.desired.items():
            app, child = apps.get(name), children.get(name)
            if app is None:
                out.append(f"{ns}/{name}: AppConfig missing")
                continue
            gen = app["metadata"]["generation"]
            observed = (app.get("status") or {}).get("observedGeneration")
            if observed != gen:
                out.append(f"{ns}/{name}: observedGeneration {observed} != generation {gen}")
            if child is None:
                out.append(f"{ns}/{name}: ConfigMap missing")
            elif child.get("data", {}) != data:
                out.append(f"{ns}/{name}: ConfigMap data {child.get('data')} != {data}")
            elif appconfig.owner_uid(child) != app["metadata"]["uid"]:
                out.append(f"{ns}/{name}: ConfigMap controlled by another AppConfig")
        for name in scope.deleted:
            if name in apps:
                out.append(f"{ns}/{name}: deleted AppConfig still there")
            if name in children:
                out.append(f"{ns}/{name}: ConfigMap of a deleted AppConfig still there")
        return out

    async def losses(self, world: World, scope: Scope) -> Losses:
        """A lost update: the status claims a generation whose spec is not what the
        child holds, or the spec is no longer what the user last wrote."""
        lost, notes = 0, []
        for name, data in scope.desired.items():
            app = await _get(world, appconfig.APPCONFIGS, name, scope.namespace)
            child = await _get(world, CONFIGMAPS, name, scope.namespace)
            if app is None:
                lost += 1
                notes.append(f"{name}: gone")
                continue
            spec = (app.get("spec") or {}).get("data")
            claims = (app.get("status") or {}).get("observedGeneration") == app["metadata"][
                "generation"
            ]
            if spec != data:
                lost += 1
                notes.append(f"{name}: spec {spec} != last written {data}")
            elif claims and (child is None or child.get("data", {}) != data):
                lost += 1
                notes.append(f"{name}: status claims generation done, ConfigMap disagrees")
        return Losses(lost, notes=tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        norm = Normalizer(
            also_drop=(
                ("metadata", "labels", RUN_LABEL),
                "metadata.namespace",
                "metadata.ownerReferences",
            )
        )
        objects: dict[ObjectKey, Object] = {}
        for res in (appconfig.APPCONFIGS, CONFIGMAPS):
            selector = appconfig.CHILD_LABEL if res is CONFIGMAPS else None
            for obj in (await world.admin.list(res, scope.namespace, label_selector=selector))[
                "items"
            ]:
                objects[(res.key, "", obj["metadata"]["name"])] = norm(obj)
        return State(objects)

    def child_watch(self, scope: Scope) -> tuple[Resource, str | None, str | None] | None:
        return (CONFIGMAPS, scope.namespace, appconfig.CHILD_LABEL)

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        children = (
            await world.admin.list(
                CONFIGMAPS, scope.namespace, label_selector=appconfig.CHILD_LABEL
            )
        )["items"]
        return {c["metadata"]["name"] for c in children} >= set(scope.desired)

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        # From the watch, not the proxy's log: a create committed while the proxy cut the
        # connection (the client saw a reset) is in etcd, and so in the watch, all the same.
        assert scope.children is not None
        return dict(scope.children.operations)


# -- (b) NodePool + Autoscaler --------------------------------------------------------------


def _pool(name: str, target: int) -> dict[str, Any]:
    return factories.nodepool(name, target=target, max_nodes=6)


def _vm_rows(cloud: SimulatedCloud, tag: str, value: str) -> list[Any]:
    return [i for i in cloud.snapshot().instances if i.tags.get(tag) == value]


class NodePoolOperator(OperatorAdapter):
    """``nodepool-operator run`` (NodePool and Autoscaler controllers) as a process."""

    name = "nodepool"
    generation_kinds = (NODEPOOLS,)
    cluster_scoped = True
    finalizer = NODEPOOL_FINALIZER
    controllers = "nodepool,autoscaler"

    async def install(self, world: World) -> None:
        await world.blocking(world.cp.install_crds, sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        args = [
            str(LAUNCH),
            "--kubeconfig",
            str(world.kubeconfig(client)),
            "--cloud-state",
            str(scope.cloud_state),
            "--label-selector",
            scope.selector,
            "--controllers",
            self.controllers,
            "--identity",
            client,
            "--lease-namespace",
            scope.namespace,
        ]
        return [*args, "--leader-elect"] if leader else args

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        cloud = scope.cloud()
        for name, target in scope.desired.items():
            pool = await _get(world, NODEPOOLS, name)
            if pool is None:
                return False
            live = await cloud.list({POOL_UID_TAG: pool["metadata"]["uid"]})
            if len([v for v in live if v.state != "terminated"]) < target:
                return False
        return True

    def pools(self, scope: Scope) -> tuple[str, str]:
        return f"grow-{scope.id}", f"drop-{scope.id}"

    async def create(self, world: World, scope: Scope) -> None:
        grow, drop = self.pools(scope)
        await world.user.create(NODEPOOLS, scope.labelled(_pool(grow, 2)))
        await world.user.create(NODEPOOLS, scope.labelled(_pool(drop, 1)))
        autoscaler = {
            "apiVersion": "kubeloop.dev/v1alpha1",
            "kind": "Autoscaler",
            "metadata": {"name": f"as-{scope.id}"},
            "spec": {"nodePoolRef": {"name": grow}, "namespaces": [scope.namespace]},
        }
        await world.user.create(AUTOSCALERS, scope.labelled(autoscaler))
        scope.desired = {grow: 2, drop: 1}

    async def update(self, world: World, scope: Scope) -> None:
        grow, drop = self.pools(scope)
        await world.user.patch(NODEPOOLS, grow, {"spec": {"targetNodes": 3}})
        scope.desired[grow] = 3
        gone = await world.user.get(NODEPOOLS, drop)
        await world.user.delete(NODEPOOLS, drop)
        scope.deleted[drop] = gone["metadata"]["uid"]
        del scope.desired[drop]

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        out: list[str] = []
        cloud = scope.cloud()
        for name, target in scope.desired.items():
            pool = await _get(world, NODEPOOLS, name)
            out += pool_status_mismatches(name, pool, target)
            if pool is None:
                continue
            status = pool.get("status") or {}
            if status.get("scaleOperation") != "inactive":
                out.append(f"pool {name}: scaleOperation {status.get('scaleOperation')}")
            live = [
                v
                for v in await cloud.list({POOL_UID_TAG: pool["metadata"]["uid"]})
                if v.state != "terminated"
            ]
            if len(live) != target:
                out.append(f"pool {name}: {len(live)} live VMs != {target}")
            nodes = (await world.admin.list(NODES, label_selector=f"kubeloop.dev/nodepool={name}"))[
                "items"
            ]
            if len(nodes) != target:
                out.append(f"pool {name}: {len(nodes)} Nodes != {target}")
        for name, uid in scope.deleted.items():
            if await _get(world, NODEPOOLS, name) is not None:
                out.append(f"pool {name}: deleted, still there")
            live = [v for v in await cloud.list({POOL_UID_TAG: uid}) if v.state != "terminated"]
            if live:
                out.append(f"pool {name}: deleted, {len(live)} VMs still live")
        return out

    async def losses(self, world: World, scope: Scope) -> Losses:
        lost, leaked, notes = 0, 0, []
        cloud = scope.cloud()
        for name, target in scope.desired.items():
            pool = await _get(world, NODEPOOLS, name)
            if pool is None or pool["spec"].get("targetNodes") != target:
                lost += 1
                notes.append(f"pool {name}: targetNodes is not the last written {target}")
                continue
            live = [
                v
                for v in await cloud.list({POOL_UID_TAG: pool["metadata"]["uid"]})
                if v.state != "terminated"
            ]
            leaked += max(0, len(live) - target)
        for uid in scope.deleted.values():
            leaked += len(
                [v for v in await cloud.list({POOL_UID_TAG: uid}) if v.state != "terminated"]
            )
        return Losses(lost, cloud.duplicates(), leaked, tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        objects: dict[ObjectKey, Object] = {}
        cloud = scope.cloud()
        for name in [*scope.desired, *scope.deleted]:
            pool = await _get(world, NODEPOOLS, name)
            logical = name.rsplit("-", 1)[0]
            if pool is not None:
                status = pool.get("status") or {}
                objects[("nodepools", "", logical)] = {
                    "spec": pool["spec"],
                    "status": {
                        k: status.get(k) for k in ("currentNodes", "readyNodes", "scaleOperation")
                    },
                }
        for name, target in scope.desired.items():
            pool = await _get(world, NODEPOOLS, name)
            if pool is None:
                continue
            live = [
                v
                for v in await cloud.list({POOL_UID_TAG: pool["metadata"]["uid"]})
                if v.state != "terminated"
            ]
            objects[("vms", "", name.rsplit("-", 1)[0])] = {"live": len(live), "target": target}
        return State(objects)

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        """VMs the cloud created per pool (terminated ones included): Sieve's summary,
        from the cloud's records."""
        out: dict[ObjectKey, OpCount] = {}
        for vm in scope.cloud().snapshot().instances:
            pool = vm.tags.get("kubeloop.dev/nodepool", "")
            if not pool.endswith(scope.id):
                continue
            count = out.setdefault(("vms", "", pool.rsplit("-", 1)[0]), OpCount())
            count.creates += 1
            if vm.state == "terminated":
                count.deletes += 1
        return out

    def in_scope(self, scope: Scope, namespace: str | None, name: str | None) -> bool:
        # cluster-scoped pools and their Nodes carry the scope's id in their names
        return namespace == scope.namespace or bool(name and scope.id in name)


# -- (c) Instance ------------------------------------------------------------------------------

INSTANCES_PER_SCOPE = 3


class InstanceOperator(NodePoolOperator):
    """``nodepool-operator run`` with only the Instance controller (the seeds' EC2Instance)."""

    name = "instance"
    generation_kinds = (INSTANCES,)
    cluster_scoped = False
    finalizer = INSTANCE_FINALIZER
    controllers = "instance"

    async def create(self, world: World, scope: Scope) -> None:
        for i in range(INSTANCES_PER_SCOPE):
            await world.user.create(
                INSTANCES, scope.labelled(factories.instance(f"vm-{i}")), scope.namespace
            )
            scope.desired[f"vm-{i}"] = "m5.large"

    async def update(self, world: World, scope: Scope) -> None:
        # a type change replaces the VM (break before make); one Instance is deleted
        await world.user.patch(
            INSTANCES, "vm-0", {"spec": {"instanceType": "c5.large"}}, scope.namespace
        )
        scope.desired["vm-0"] = "c5.large"
        gone = await world.user.get(INSTANCES, "vm-2", scope.namespace)
        await world.user.delete(INSTANCES, "vm-2", scope.namespace)
        scope.deleted["vm-2"] = gone["metadata"]["uid"]
        del scope.desired["vm-2"]

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        cloud = scope.cloud()
        for name in scope.desired:
            obj = await _get(world, INSTANCES, name, scope.namespace)
            if obj is None or not await self._live(cloud, obj["metadata"]["uid"]):
                return False
        return True

    async def _live(self, cloud: SimulatedCloud, uid: str) -> list[Any]:
        return [v for v in await cloud.list({UID_TAG: uid}) if v.state != "terminated"]

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        out: list[str] = []
        cloud, ns = scope.cloud(), scope.namespace
        for name, itype in scope.desired.items():
            obj = await _get(world, INSTANCES, name, ns)
            if obj is None:
                out.append(f"{ns}/{name}: missing")
                continue
            status = obj.get("status") or {}
            if status.get("observedGeneration") != obj["metadata"]["generation"]:
                out.append(f"{ns}/{name}: observedGeneration {status.get('observedGeneration')}")
            live = await self._live(cloud, obj["metadata"]["uid"])
            if len(live) != 1:
                out.append(f"{ns}/{name}: {len(live)} live VMs")
            elif live[0].instance_type != itype or live[0].state != "running":
                out.append(f"{ns}/{name}: VM {live[0].instance_type} {live[0].state}")
            elif status.get("instanceId") != live[0].id:
                out.append(f"{ns}/{name}: status names {status.get('instanceId')}")
            elif status.get("state") != "running":
                out.append(f"{ns}/{name}: status.state {status.get('state')}")
        for name, uid in scope.deleted.items():
            if await _get(world, INSTANCES, name, ns) is not None:
                out.append(f"{ns}/{name}: deleted, still there")
            if await self._live(cloud, uid):
                out.append(f"{ns}/{name}: deleted, VM still live")
        return out

    async def losses(self, world: World, scope: Scope) -> Losses:
        lost, leaked, notes = 0, 0, []
        cloud, ns = scope.cloud(), scope.namespace
        for name, itype in scope.desired.items():
            obj = await _get(world, INSTANCES, name, ns)
            if obj is None or obj["spec"].get("instanceType") != itype:
                lost += 1
                notes.append(f"{name}: spec is not the last written")
                continue
            leaked += max(0, len(await self._live(cloud, obj["metadata"]["uid"])) - 1)
        for uid in scope.deleted.values():
            leaked += len(await self._live(cloud, uid))
        return Losses(lost, cloud.duplicates(), leaked, tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        objects: dict[ObjectKey, Object] = {}
        cloud, ns = scope.cloud(), scope.namespace
        for name in scope.desired:
            obj = await _get(world, INSTANCES, name, ns)
            if obj is None:
                continue
            status = obj.get("status") or {}
            live = await self._live(cloud, obj["metadata"]["uid"])
            objects[("instances", "", name)] = {
                "spec": obj["spec"],
                "status": {"state": status.get("state")},
                "vms": sorted((v.instance_type, v.state) for v in live),
            }
        return State(objects)

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        out: dict[ObjectKey, OpCount] = {}
        for vm in scope.cloud().snapshot().instances:
            owner = vm.tags.get("kubeloop.dev/instance", "")
            ns, _, name = owner.partition("/")
            if ns != scope.namespace:
                continue
            count = out.setdefault(("vms", "", name), OpCount())
            count.creates += 1
            if vm.state == "terminated":
                count.deletes += 1
        return out

    def in_scope(self, scope: Scope, namespace: str | None, name: str | None) -> bool:
        return namespace == scope.namespace


# -- (c) a cluster-scoped owner of children in two namespaces ---------------------------------

TENANTS_PER_SCOPE = 2


class TenantOperatorAdapter(OperatorAdapter):
    """tests/faults/tenant.py: a cluster-scoped Tenant owning a ConfigMap in each of two
    namespaces, reconciled slowly by four workers (issue 23, bug 2). Its own oracle: no
    write of a child answered 409 (two reconciles of one Tenant at once; tenant.py)."""

    name = "tenant"
    generation_kinds = (tenant.TENANTS,)
    cluster_scoped = True
    lag_kind = CONFIGMAPS

    def __init__(self) -> None:
        #: The second namespace of each scope.
        self.second: dict[str, str] = {}

    async def install(self, world: World) -> None:
        await world.blocking(world.cp.install_crds, [tenant.TENANT_CRD])

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        return [
            str(tenant.__file__),
            "--kubeconfig",
            str(world.kubeconfig(client)),
            "--label-selector",
            scope.selector,
            "--identity",
            client,
            "--sources",
            scope.namespace,
        ]

    def namespaces(self, scope: Scope) -> list[str]:
        return [scope.namespace, self.second[scope.id]]

    def tenants(self, scope: Scope) -> list[str]:
        return [f"t-{scope.id}-{i}" for i in range(TENANTS_PER_SCOPE)]

    async def create(self, world: World, scope: Scope) -> None:
        self.second[scope.id] = await world.blocking(world.cp.create_namespace, f"fx-{scope.id}-b")
        for i, name in enumerate(self.tenants(scope)):
            data = {"v": "1", "i": str(i)}
            obj = {
                "apiVersion": f"{tenant.GROUP}/v1",
                "kind": "Tenant",
                "metadata": {"name": name},
                "spec": {"namespaces": self.namespaces(scope), "data": data},
            }
            await world.user.create(tenant.TENANTS, scope.labelled(obj))
            scope.desired[name] = data
        for i, name in enumerate(self.tenants(scope)):
            source = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": tenant.source_name(name)},
                "data": {"src": f"s{i}"},
            }
            await world.user.create(CONFIGMAPS, scope.labelled(source), scope.namespace)

    def child_data(self, name: str, data: dict[str, str]) -> dict[str, str]:
        """What a Tenant's children hold: its data and its source's."""
        return {**data, "src": f"s{name.rsplit('-', 1)[1]}"}

    async def update(self, world: World, scope: Scope) -> None:
        names = self.tenants(scope)
        for i, name in enumerate(names):
            data = {"v": "2", "i": str(i)}
            await world.user.patch(tenant.TENANTS, name, {"spec": {"data": data}})
            scope.desired[name] = data
        gone = await world.user.get(tenant.TENANTS, names[-1])
        await world.user.delete(tenant.TENANTS, names[-1])
        scope.deleted[names[-1]] = gone["metadata"]["uid"]
        del scope.desired[names[-1]]

    async def _children(self, world: World, scope: Scope, name: str) -> dict[str, Object]:
        out: dict[str, Object] = {}
        for ns in self.namespaces(scope):
            child = await _get(world, CONFIGMAPS, tenant.child_name(name), ns)
            if child is not None:
                out[ns] = child
        return out

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        out: list[str] = []
        for name, data in scope.desired.items():
            obj = await _get(world, tenant.TENANTS, name)
            if obj is None:
                out.append(f"tenant {name}: missing")
                continue
            observed = (obj.get("status") or {}).get("observedGeneration")
            if observed != obj["metadata"]["generation"]:
                out.append(f"tenant {name}: observedGeneration {observed}")
            children = await self._children(world, scope, name)
            want = self.child_data(name, data)
            for ns in self.namespaces(scope):
                child = children.get(ns)
                if child is None or child.get("data") != want:
                    out.append(f"tenant {name}: child in {ns} {child and child.get('data')}")
        for name in scope.deleted:
            if await _get(world, tenant.TENANTS, name) is not None:
                out.append(f"tenant {name}: deleted, still there")
            if await self._children(world, scope, name):
                out.append(f"tenant {name}: deleted, children still there")
        return out

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        for name, data in scope.desired.items():
            children = await self._children(world, scope, name)
            want = self.child_data(name, data)
            if len(children) < 2 or any(c.get("data") != want for c in children.values()):
                return False
        return True

    async def losses(self, world: World, scope: Scope) -> Losses:
        lost, notes = 0, []
        for name, data in scope.desired.items():
            obj = await _get(world, tenant.TENANTS, name)
            if obj is None or (obj.get("spec") or {}).get("data") != data:
                lost += 1
                notes.append(f"tenant {name}: spec is not the last written")
        return Losses(lost, notes=tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        objects: dict[ObjectKey, Object] = {}
        for i, name in enumerate(self.tenants(scope)):
            obj = await _get(world, tenant.TENANTS, name)
            if obj is not None:
                objects[("tenants", "", f"t{i}")] = {"spec": obj["spec"]["data"]}
            children = await self._children(world, scope, name)
            for j, ns in enumerate(self.namespaces(scope)):
                if ns in children:
                    objects[("configmaps", "", f"t{i}/{j}")] = {"data": children[ns].get("data")}
        return State(objects)

    def child_watch(self, scope: Scope) -> tuple[Resource, str | None, str | None] | None:
        return (CONFIGMAPS, None, tenant.CHILD_LABEL)

    def overlaps(self, world: World, scope: Scope) -> list[str]:
        """Two reconciles of one Tenant at once: the operator's writes of its children
        answered 409 (both read the child before either wrote it), from the proxy's log."""
        spaces = set(self.namespaces(scope))
        return [
            f"{e.client} {e.verb} configmaps/{e.namespace}/{e.name} answered {e.status}: "
            "another reconcile of its Tenant wrote it since this one read it"
            for e in world.proxy.log.writes(resource="configmaps", ok=False)
            if e.namespace in spaces and e.client != "user" and e.status == 409
        ]

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        assert scope.children is not None
        out: dict[ObjectKey, OpCount] = {}
        names = {tenant.child_name(n): i for i, n in enumerate(self.tenants(scope))}
        spaces = {ns: j for j, ns in enumerate(self.namespaces(scope))}
        for (res, ns, name), count in scope.children.operations.items():
            if name in names and ns in spaces:
                out[(res, "", f"t{names[name]}/{spaces[ns]}")] = count
        return out

    def in_scope(self, scope: Scope, namespace: str | None, name: str | None) -> bool:
        return namespace in self.namespaces(scope) or scope.id in (name or "")


ADAPTERS: dict[str, OperatorAdapter] = {
    a.name: a
    for a in (AppConfigOperator(), NodePoolOperator(), InstanceOperator(), TenantOperatorAdapter())
}
