"""The NodePool controller: a pool's VMs and Nodes converge to ``spec.targetNodes``.

One pass over a pool:

1. read it from the cache (scoped by ``settings.label_selector``); a pool being deleted
   loses its Nodes and VMs, then its finalizer;
2. observe its VMs (one cloud ``list`` by the pool's uid tag; ``describe`` for recorded ids
   the list misses, since a list may lag), its Nodes and the pods bound to them (cache);
3. plan (pure): retire gone VMs and the surplus, or add intents for the missing;
4. record that plan in ``status.instances``, in one status write, before any cloud call;
5. act: create the recorded intents (same idempotency token every time), remove retired
   VMs (cordon, delete the Node, delete the VM), start stopped VMs, register running VMs
   as Nodes, and delete VMs tagged for the pool that no record knows after a grace period;
6. write the status again (skipped when unchanged) and requeue while VMs boot.

A crash anywhere repeats work, never duplicates it: intents are recorded before creates,
and retirements before removals. The controller writes ``status``, Nodes and its
finalizer, never ``spec`` (docs/ownership.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kubeloop import (
    NODES,
    PODS,
    AlreadyExists,
    Controller,
    ControllerOptions,
    Manager,
    NotFound,
    Object,
    Request,
    Result,
    generation_changed,
    update_status,
)
from nodepool_operator import failpoints
from nodepool_operator.api import (
    NODEPOOLS,
    AwsNodeClassSpec,
    InstanceRecord,
    InvalidField,
    NodeClassRef,
    NodePool,
    parse_nodepool,
)
from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudError,
    CloudProvider,
    CreateRequest,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceType,
    InvalidRequest,
    PermissionDenied,
    QuotaExceeded,
)
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers._create_gate import CreateGate
from nodepool_operator.controllers._finalizer import (
    add_finalizer,
    has_finalizer,
    remove_finalizer,
)
from nodepool_operator.controllers._intent import (
    CREATING,
    DELETING,
    POOL_UID_TAG,
    create_request,
    new_intents,
)
from nodepool_operator.controllers._node_manifest import is_ready, node_manifest, ready_condition
from nodepool_operator.controllers._plan import desired_nodes, plan
from nodepool_operator.controllers._pool_status import (
    CloudFailure,
    cloud_failure,
    invalid_spec,
    pool_status,
)
from nodepool_operator.controllers._scope import POOL_LABEL, equality_labels, node_selector
from nodepool_operator.settings import OperatorSettings

NAME: Final = "nodepool"
FINALIZER: Final = "kubeloop.dev/nodepool-cleanup"

_POD_NODE_INDEX = "nodepool:spec.nodeName"
_NODE_POOL_INDEX = "nodepool:pool"
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# While VMs boot: poll when the next one should be running, within these bounds.
_MIN_POLL, _MAX_POLL = 0.2, 5.0
# A VM past its expected boot time, or an intent to replace: look again soon.
_SOON = 1.0

log = logging.getLogger("nodepool_operator.nodepool")


def _pod_node(pod: Object) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def _node_pool(node: Object) -> list[str]:
    pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL)
    return [pool] if pool else []


def _pool_of_node(node: Object) -> list[Request]:
    return [Request(pool) for pool in _node_pool(node)]


@dataclass
class _Pass:
    """What one reconcile of one pool knows, and has done so far."""

    obj: Object
    """The pool as last read or written (its resourceVersion guards the next write)."""
    pool: NodePool
    records: list[InstanceRecord]
    nodes: dict[str, Object]
    """The pool's Nodes by name."""
    vms: dict[str, Instance] = field(default_factory=dict)
    """The pool's live VMs by id."""
    listed: list[Instance] = field(default_factory=list)
    """The pool's VMs as the cloud listed them (possibly lagging)."""
    failure: CloudFailure | None = None
    gc_wait: float | None = None
    """Seconds until an unknown VM's grace period ends, if one is waiting."""
    removed: set[str] = field(default_factory=set)
    """Ids of VMs deleted by this pass."""

    @property
    def name(self) -> str:
        return self.pool.metadata.name

    @property
    def uid(self) -> str:
        return self.pool.metadata.uid

    @property
    def generation(self) -> int:
        return self.pool.metadata.generation

    @property
    def desired(self) -> int:
        spec = self.pool.spec
        return desired_nodes(spec.target_nodes, spec.min_nodes, spec.max_nodes)

    def live(self) -> list[InstanceRecord]:
        """Records of VMs that exist and stay: an id, not being removed."""
        return [r for r in self.records if r.instance_id and r.state != DELETING]

    def update(self, name: str, **changes: Any) -> None:
        self.records = [replace(r, **changes) if r.name == name else r for r in self.records]

    def drop(self, name: str) -> None:
        self.records = [r for r in self.records if r.name != name]

    def ready(self) -> set[str]:
        """Records registered as a Ready node of a running VM."""
        return {
            r.name
            for r in self.live()
            if r.state == "running" and r.name in self.nodes and is_ready(self.nodes[r.name])
        }


class NodePoolController:
    """Converges each NodePool's VMs and Nodes; see the module docstring."""

    def __init__(self, mgr: Manager, cloud: CloudProvider, settings: OperatorSettings) -> None:
        self.mgr = mgr
        self.cloud = cloud
        self.settings = settings
        self._run_labels = equality_labels(settings.label_selector)
        self._node_selector = node_selector(self._run_labels)
        self._gate = CreateGate()
        self._types: dict[str, InstanceType] = {}

    def register(self) -> Controller:
        cache = self.mgr.cache
        # Scale-down needs "which pods are on this node"; Nodes are read per pool.
        cache.informer(PODS).add_index(_POD_NODE_INDEX, _pod_node)
        nodes = cache.informer(NODES, label_selector=self._node_selector)
        nodes.add_index(_NODE_POOL_INDEX, _node_pool)
        return (
            self.mgr.controller(NAME)
            .for_(
                NODEPOOLS,
                predicates=[generation_changed],
                label_selector=self.settings.label_selector,
            )
            # Nodes carry no ownerReference to the pool; their pool label names it.
            .watches(NODES, _pool_of_node, label_selector=self._node_selector)
            .with_options(
                ControllerOptions(max_concurrent_reconciles=self.settings.nodepool_workers)
            )
            .complete(self.reconcile)
        )

    async def reconcile(self, req: Request) -> Result:
        obj = await self.mgr.cache.get(
            NODEPOOLS, req.name, label_selector=self.settings.label_selector
        )
        if obj is None:
            return Result()
        if obj["metadata"].get("deletionTimestamp"):
            await self._finalize(obj)
            return Result()
        if not has_finalizer(obj, FINALIZER):
            obj = await add_finalizer(self.mgr.client, NODEPOOLS, obj, FINALIZER)
        try:
            pool = parse_nodepool(obj)
        except InvalidField as err:
            self.mgr.recorder.warning(obj, "InvalidSpec", str(err), action="Reconcile")
            generation = int(obj["metadata"].get("generation") or 0)
            await update_status(self.mgr.client, NODEPOOLS, obj, invalid_spec(generation, err))
            return Result()  # nothing to do until the spec changes

        p = _Pass(obj, pool, list(pool.status.instances), await self._nodes(pool.metadata.name))
        await self._observe(p)
        await self._record_plan(p)
        try:
            await self._act(p)
        except Exception:
            # Keep what the cloud already did (new ids) before the workqueue backs off.
            with contextlib.suppress(Exception):
                await self._write_status(p)
            raise
        await self._write_status(p)
        return self._next(p)

    # -- observe and plan ---------------------------------------------------------------

    async def _nodes(self, pool_name: str) -> dict[str, Object]:
        nodes = await self.mgr.cache.list(
            NODES, index=(_NODE_POOL_INDEX, pool_name), label_selector=self._node_selector
        )
        return {n["metadata"]["name"]: n for n in nodes}

    async def _busy(self, node_name: str) -> bool:
        pods = await self.mgr.cache.list(PODS, index=(_POD_NODE_INDEX, node_name))
        return any((pod.get("status") or {}).get("phase") not in _TERMINAL_PHASES for pod in pods)

    async def _observe(self, p: _Pass) -> None:
        try:
            p.listed = await self.cloud.list({POOL_UID_TAG: p.uid})
            p.vms = {vm.id: vm for vm in p.listed}
            for r in p.records:
                if r.instance_id and r.instance_id not in p.vms and r.state != DELETING:
                    with contextlib.suppress(InstanceNotFound):
                        vm = await self.cloud.describe(r.instance_id)
                        if vm.state != "terminated":
                            p.vms[vm.id] = vm
        except CloudError as err:
            self._failed(p, err)
            await self._write_status(p)
            raise

    async def _record_plan(self, p: _Pass) -> None:
        """Decide what changes and record it before acting, in one status write."""
        gone = {r.name for r in p.live() if r.instance_id not in p.vms}
        busy = {name for name in p.nodes if await self._busy(name)}
        decided = plan(p.records, p.desired, gone=gone, busy=busy)
        if decided.empty:
            return
        before = len(p.live())
        for name in decided.retire:
            p.update(name, state=DELETING)
            if name in gone:
                self._event(p, "Warning", "VMGone", f"the VM of {name} is gone; replacing it")
        if decided.add:
            p.records += new_intents(p.name, decided.add, taken={r.name for r in p.records})
            note = f"{before} -> {p.desired} nodes: creating {decided.add} VM(s)"
            self._event(p, "Normal", "ScalingUp", note)
        surplus = [n for n in decided.retire if n not in gone]
        if surplus:
            note = f"{before} -> {p.desired} nodes: removing {', '.join(surplus)}"
            self._event(p, "Normal", "ScalingDown", note)
        log.info(
            "scaling",
            extra={
                "pool": p.name,
                "live": before,
                "desired": p.desired,
                "add": decided.add,
                "retire": list(decided.retire),
            },
        )
        await self._write_status(p)

    # -- act ------------------------------------------------------------------------------

    async def _act(self, p: _Pass) -> None:
        await self._create(p)
        await self._retire(p)
        await self._restart_stopped(p)
        await self._register(p)
        await self._collect_garbage(p)

    async def _create(self, p: _Pass) -> None:
        intents = [r for r in p.records if r.state == CREATING]
        if not intents:
            return
        held = self._gate.holding(p.uid, p.generation)
        if held is not None:
            p.failure = held  # refused recently for this spec: do not ask again yet
            return
        try:
            node_class = await launching.node_class(self.mgr.client, p.pool.spec.node_class_ref)
        except launching.NodeClassUnavailable as err:
            self._failed(p, err)
            return
        listed = {vm.name: vm for vm in p.listed}
        for r in intents:
            request = create_request(
                pool_name=p.name,
                pool_uid=p.uid,
                instance_type=p.pool.spec.instance_type,
                name=r.name,
                node_class=node_class,
            )
            try:
                vm = await self.cloud.create(request)
            except IdempotencyMismatch as err:
                # Sent before with other arguments (the spec changed since): that VM
                # exists; adopt it once the list shows it.
                found = listed.get(r.name)
                if found is None:
                    self._failed(p, err)
                    return
                vm = found
            except CloudError as err:
                self._gate.refused(p.uid, p.generation, self._failed(p, err))
                return  # the next create would be refused as well
            else:
                failpoints.hit("after-cloud-create")
            if vm.state == "terminated":
                # This token's VM was terminated before its id was recorded; a token names
                # one VM for good, so a fresh intent replaces this one.
                p.drop(r.name)
                continue
            p.vms[vm.id] = vm
            p.update(r.name, instance_id=vm.id, state=vm.state)

    async def _retire(self, p: _Pass) -> None:
        for r in [r for r in p.records if r.state == DELETING]:
            await self._remove_node(p, r.name, known=r.node_name is not None)
            if r.instance_id:
                try:
                    await self.cloud.delete(r.instance_id)
                except CloudError as err:
                    self._failed(p, err)
                    return
                p.removed.add(r.instance_id)
            p.drop(r.name)

    async def _remove_node(self, p: _Pass, name: str, *, known: bool) -> None:
        """Cordon the Node, so nothing is scheduled onto it meanwhile, then delete it."""
        node = p.nodes.pop(name, None)
        if node is None and not known:
            return
        client = self.mgr.client
        with contextlib.suppress(NotFound):
            if node is not None and not (node.get("spec") or {}).get("unschedulable"):
                await client.patch(NODES, name, {"spec": {"unschedulable": True}})
            await client.delete(NODES, name)

    async def _restart_stopped(self, p: _Pass) -> None:
        for r in p.live():
            vm = p.vms.get(r.instance_id or "")
            if vm is None or vm.state != "stopped":
                continue
            try:
                await self.cloud.start(vm.id)
            except CloudError as err:
                self._failed(p, err)
                return
            self._event(p, "Warning", "VMStopped", f"VM {vm.id} ({r.name}) was stopped; starting")
            p.vms[vm.id] = replace(vm, state="pending")

    async def _register(self, p: _Pass) -> None:
        """Running VMs become Ready Nodes; a Node follows its VM's state."""
        for r in p.live():
            vm = p.vms.get(r.instance_id or "")
            if vm is None:
                continue  # gone: the next pass retires it
            running = vm.state == "running"
            node = p.nodes.get(r.name)
            if node is None and running:
                try:
                    node = await self._create_node(p, vm)
                except CloudError as err:
                    self._failed(p, err)
                    return
                self._event(p, "Normal", "Registered", f"node {r.name} for VM {vm.id}")
            elif node is not None and is_ready(node) != running:
                node = await self.mgr.client.patch(
                    NODES,
                    r.name,
                    {"status": {"conditions": [ready_condition(running)]}},
                    subresource="status",
                )
            if node is not None:
                p.nodes[r.name] = node
            p.update(r.name, state=vm.state, node_name=r.name if node is not None else None)

    async def _create_node(self, p: _Pass, vm: Instance) -> Object:
        manifest = node_manifest(
            p.pool, vm, await self._instance_type(vm.instance_type), run_labels=self._run_labels
        )
        try:
            return await self.mgr.client.create(NODES, manifest)
        except AlreadyExists:
            return manifest  # an earlier pass registered it; the cache has not shown it yet

    async def _instance_type(self, name: str) -> InstanceType | None:
        if name not in self._types:  # the catalogue rarely changes: ask again only on a miss
            self._types = {t.name: t for t in await self.cloud.instance_types()}
        return self._types.get(name)

    async def _collect_garbage(self, p: _Pass) -> None:
        """Delete VMs tagged with the pool's uid that no record knows, once older than the
        grace period (a VM just created may not be recorded yet), and Nodes labelled for
        the pool that no record knows."""
        known_ids = {r.instance_id for r in p.records if r.instance_id} | p.removed
        intents = {r.name for r in p.records if not r.instance_id}  # ids not back yet
        grace = self.settings.gc_grace_seconds
        now = time.time()
        for vm in p.listed:
            if vm.id in known_ids or vm.name in intents:
                continue
            age = now - vm.created_at
            if age < grace:
                p.gc_wait = min(p.gc_wait or math.inf, grace - age)
                continue
            try:
                await self.cloud.delete(vm.id)
            except CloudError as err:
                self._failed(p, err)
                return
            log.warning(
                "deleted a VM unknown to its pool", extra={"pool": p.name, "instance": vm.id}
            )
            self._event(
                p, "Warning", "GarbageCollected", f"deleted VM {vm.id} ({vm.name}): not recorded"
            )
        recorded = {r.name for r in p.records}
        for name in [n for n in p.nodes if n not in recorded]:
            await self._remove_node(p, name, known=True)
            self._event(p, "Warning", "OrphanNodeDeleted", f"node {name}: no VM recorded")

    # -- report -----------------------------------------------------------------------------

    async def _write_status(self, p: _Pass) -> None:
        spec = p.pool.spec
        status = pool_status(
            name=p.name,
            generation=p.generation,
            target=spec.target_nodes,
            desired=p.desired,
            min_nodes=spec.min_nodes,
            records=p.records,
            ready=p.ready(),
            failure=p.failure,
        )
        p.obj = await update_status(self.mgr.client, NODEPOOLS, p.obj, status.apply)

    def _failed(self, p: _Pass, err: CloudError) -> CloudFailure:
        failure = cloud_failure(err)
        if p.failure is None:
            p.failure = failure
        log.warning("cloud refused: %s", err, extra={"pool": p.name, "reason": failure.reason})
        self._event(p, "Warning", failure.reason, failure.message)
        return failure

    def _event(self, p: _Pass, kind: str, reason: str, note: str) -> None:
        if kind == "Warning":
            self.mgr.recorder.warning(p.obj, reason, note, action="Reconcile")
        else:
            self.mgr.recorder.normal(p.obj, reason, note, action="Reconcile")

    def _next(self, p: _Pass) -> Result:
        """Requeue when there is something to look at; raise what needs the backoff."""
        held = p.failure is not None and isinstance(
            p.failure.error, QuotaExceeded | InvalidRequest | PermissionDenied
        )
        if p.failure is not None and not held:
            # CapacityUnavailable, transient errors: the per-item backoff spaces retries.
            raise p.failure.error
        # Idle, look for leaked VMs again after one grace period.
        waits = [self.settings.gc_grace_seconds]
        now = time.time()
        booting = [
            p.vms[r.instance_id]
            for r in p.live()
            if r.instance_id in p.vms and p.vms[r.instance_id].state == "pending"
        ]
        if booting:
            eta = min(vm.created_at for vm in booting) + self.settings.boot_seconds - now
            waits.append(min(max(eta if eta > 0 else _SOON, _MIN_POLL), _MAX_POLL))
        if p.gc_wait is not None:
            waits.append(max(p.gc_wait, _MIN_POLL))
        remaining = self._gate.remaining(p.uid, p.generation)
        if remaining is not None:
            waits.append(max(remaining, _MIN_POLL))
        elif not booting and len(p.live()) != p.desired:
            waits.append(_SOON)  # e.g. an intent dropped for a spent token
        return Result(requeue_after=min(waits))

    # -- deletion ---------------------------------------------------------------------------

    async def _finalize(self, obj: Object) -> None:
        """Delete the pool's Nodes, then every VM tagged with its uid, then the finalizer."""
        if not has_finalizer(obj, FINALIZER):
            return
        meta = obj["metadata"]
        name, uid = meta["name"], meta["uid"]
        listed = await self.cloud.list({POOL_UID_TAG: uid})
        ids = {vm.id for vm in listed}
        by_name = {vm.name: vm for vm in listed}
        instance_type = str((obj.get("spec") or {}).get("instanceType") or "")
        node_class = await self._node_class_of(obj)
        for entry in (obj.get("status") or {}).get("instances") or ():
            if entry.get("instanceId"):
                ids.add(entry["instanceId"])
                continue
            request = create_request(
                pool_name=name,
                pool_uid=uid,
                instance_type=instance_type,
                name=entry["name"],
                node_class=node_class,
            )
            vm = await self._resolve_intent(request, by_name)
            if vm is not None:
                ids.add(vm.id)
        nodes, _ = await self.mgr.client.list_all(NODES, label_selector=f"{POOL_LABEL}={name}")
        for node in nodes:
            with contextlib.suppress(NotFound):
                await self.mgr.client.delete(NODES, node["metadata"]["name"])
        for instance_id in sorted(ids):
            await self.cloud.delete(instance_id)
        self.mgr.recorder.normal(
            obj, "Deleted", f"deleted {len(nodes)} node(s) and {len(ids)} VM(s)", action="Delete"
        )
        with contextlib.suppress(NotFound):
            await remove_finalizer(self.mgr.client, NODEPOOLS, obj, FINALIZER)
        self._gate.forget(uid)

    async def _node_class_of(self, obj: Object) -> AwsNodeClassSpec | None:
        """The deleted pool's node class, so a repeated create is the same request; None if
        it has none, or it is gone too (then the list alone finds the intents' VMs)."""
        ref = (obj.get("spec") or {}).get("nodeClassRef") or {}
        if not ref.get("name"):
            return None
        try:
            return await launching.node_class(self.mgr.client, NodeClassRef(name=ref["name"]))
        except launching.NodeClassUnavailable:
            return None

    async def _resolve_intent(
        self, request: CreateRequest, listed: dict[str, Instance]
    ) -> Instance | None:
        """The VM an intent without a recorded id may have launched, or None.

        The list answers the usual case (a crash after the create). When it does not, asking
        again with the same token is the one consistent answer, since a list may lag: it
        returns the VM if one was launched (which is then deleted with the rest), and a
        refusal means none was. The price: an intent the cloud never acted on may launch a
        VM that lives for a moment.
        """
        if request.name in listed:
            return listed[request.name]
        try:
            return await self.cloud.create(request)
        except IdempotencyMismatch:
            raise  # this token launched a VM the list does not show yet: try again later
        except (QuotaExceeded, CapacityUnavailable, InvalidRequest):
            return None  # refused: this token launched nothing
