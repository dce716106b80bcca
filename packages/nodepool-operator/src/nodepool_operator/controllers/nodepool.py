"""The NodePool controller: a pool's VMs and Nodes converge to ``spec.targetNodes``.

It never creates a Node: it launches VMs whose user data says how their kubelet registers
(:mod:`._userdata`: a nodeadm NodeConfig, Bottlerocket settings, or the simulated bootstrap),
adopts each Node that registers by its providerID (on EC2 it is named after the instance's
private DNS name, not the VM's), and from then on keeps the labels and taints the pool owns on
it in line with the spec (:mod:`._node_sync`), with its own finalizer on the Node. One pass
over a pool:

1. read it from the cache (scoped by ``settings.label_selector``); a pool being deleted
   drains its Nodes (:meth:`NodePoolController._drain_for_deletion`, bounded by
   ``spec.disruption.terminationGracePeriod``), deletes each with its VM once drained,
   then its finalizer;
2. observe its VMs (one cloud ``list`` by the pool's uid tag; ``describe`` for recorded ids
   the list misses, since a list may lag), its Nodes and the pods bound to them (cache);
3. plan (pure): adopt VMs tagged for the pool that no record knows, up to the desired
   count; retire what must go (VM gone, Node deleted by someone, Node never registered
   within ``registration_timeout_seconds``, Node unhealthy past the repair toleration:
   :mod:`._repair`, one at a time, none while more than ``maxUnhealthyPercent`` of the
   pool is unhealthy) and the surplus (records with no Node yet first, then in
   :func:`~nodepool_operator.scheduling.removal_order`: empty Nodes, then the least
   utilised whose pods fit on the others, blocked Nodes last: :mod:`._blocked`); add
   intents for the missing. The surplus Nodes chosen are tainted
   ``kubeloop.dev/disrupting:NoSchedule`` at once, so nothing new lands on them. A Node
   chosen earlier that a blocker now holds is kept (untainted) when another Node can go
   instead, so one blocked drain does not hold the scale-down;
4. record that plan in ``status.instances``, in one status write, before any cloud call;
5. act: create the recorded intents (same idempotency token every time), terminate retired
   ones (:meth:`NodePoolController._terminate`: drain through the Eviction API honouring
   PodDisruptionBudgets and do-not-disrupt pods (:mod:`._drain`), VM, Node, finalizer),
   a scale-down drain past ``spec.disruption.drainTimeout`` is given up, the Node untainted
   and kept (:mod:`._drain_deadline`), so the next pass removes another; a repair's drain
   past it goes on without the pods left (the kubelet is unreachable);
   start stopped VMs, adopt registered Nodes, and delete VMs tagged for the pool that no
   record knows after a grace period, and Nodes whose VM is gone;
6. write the status again (skipped when unchanged) and requeue while anything is in flight.

A crash anywhere repeats work, never duplicates it: intents are recorded before creates,
and retirements before removals. The controller writes ``status``, its finalizers, the
labels and taints it owns on the pool's Nodes and their drain-timed-out annotation, never
``spec`` (docs/ownership.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kubeloop import (
    NODES,
    PODS,
    Conflict,
    Controller,
    ControllerOptions,
    Invalid,
    KubeloopError,
    Manager,
    NotFound,
    Object,
    PatchType,
    Request,
    Result,
    add_finalizer,
    generation_changed,
    has_finalizer,
    remove_finalizer,
    set_condition,
    update_status,
)
from nodepool_operator import failpoints
from nodepool_operator.api import (
    NODEPOOLS,
    Disruption,
    DisruptionStatus,
    InstanceRecord,
    InvalidField,
    NodePool,
    parse_nodepool,
)
from nodepool_operator.cloud import (
    CloudError,
    CloudProvider,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceType,
    instance_id_of,
)
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers._blocked import (
    SCALE_DOWN_BLOCKED,
    blocked_nodes,
    keep_blocked,
    kube_system_budgets,
    switches,
)
from nodepool_operator.controllers._budget import (
    VOLUNTARY_REASONS,
    allowed_disruptions,
    is_disrupting,
)
from nodepool_operator.controllers._capacity import scale_down_node
from nodepool_operator.controllers._create_gate import CreateGate
from nodepool_operator.controllers._drain import (
    DISRUPTING_TAINT,
    TERMINATING_POLL,
    DrainStatus,
    disrupting_since,
    drain_node,
    has_disrupting_taint,
    pods_on,
    taint_disrupting,
    untaint_disrupting,
)
from nodepool_operator.controllers._drain_deadline import (
    DRAIN_TIMED_OUT,
    DRAIN_TIMED_OUT_AT,
    GRACE_EXPIRED,
    deletion_condition,
    drain_timeout_note,
    format_time,
    grace_expired_note,
    parse_time,
    remaining,
    resting_for,
)
from nodepool_operator.controllers._drain_deadline import Condition as DeletionCondition
from nodepool_operator.controllers._intent import (
    CREATING,
    DELETING,
    POOL_UID_TAG,
    create_request,
    idempotency_token,
    new_intents,
)
from nodepool_operator.controllers._node_manifest import (
    is_ready,
    pool_taints,
    ready_for,
)
from nodepool_operator.controllers._node_sync import sync_patch
from nodepool_operator.controllers._plan import Plan, desired_nodes, plan
from nodepool_operator.controllers._pool_status import (
    CloudFailure,
    cloud_failure,
    invalid_spec,
    pool_status,
)
from nodepool_operator.controllers._repair import (
    REPAIR_DRAIN_TIMED_OUT,
    Unhealthy,
    decide_repair,
    repair_drain_note,
    unhealthy_since,
)
from nodepool_operator.controllers._reserve import RESERVATION_BACKSTOP, lift_patch, reserved_for
from nodepool_operator.controllers._scope import POOL_LABEL, equality_labels, node_selector
from nodepool_operator.controllers._userdata import pool_user_data
from nodepool_operator.scheduling import (
    ScaleDownNode,
    Unremovable,
    is_workload,
    needs_budgets,
    node_view,
    removal_order,
)
from nodepool_operator.settings import OperatorSettings

NAME: Final = "nodepool"
FINALIZER: Final = "kubeloop.dev/nodepool-cleanup"
#: On every Node the pool adopted: deleting the Node (``kubectl delete node``) drains it and
#: terminates its VM before the Node goes (Karpenter's ``karpenter.sh/termination``).
NODE_FINALIZER: Final = "kubeloop.dev/termination"

_POD_NODE_INDEX = "nodepool:spec.nodeName"
_NODE_POOL_INDEX = "nodepool:pool"
# While VMs boot: poll when the next one should be running, within these bounds.
_MIN_POLL, _MAX_POLL = 0.2, 5.0
# A VM past its expected boot time, or an intent to replace: look again soon.
_SOON = 1.0
# A drain in progress that named no wait of its own: look again in (kubectl drain's 5 s).
# Each drain pass says when it wants the next (controllers/_drain.py: pods terminating, a
# PodDisruptionBudget refusing, a do-not-disrupt pod holding the node).
_DRAIN_POLL = 5.0

log = logging.getLogger("nodepool_operator.nodepool")


def _pod_node(pod: Object) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def _node_pool(node: Object) -> list[str]:
    pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL)
    return [pool] if pool else []


def _untainted(node: ScaleDownNode) -> ScaleDownNode:
    """``node`` without the disrupting taint: as it would be if kept."""
    taints = tuple(t for t in node.taints if t.key != DISRUPTING_TAINT.key)
    return replace(node, taints=taints)


def _scaling_down(node: Object) -> bool:
    """Whether a Node being removed goes by a scale-down (voluntary: the blockers apply), not
    because someone deleted it (``kubectl delete node``: only the pods' own holds apply)."""
    return not node["metadata"].get("deletionTimestamp") and is_ready(node)


def _waiting_for(node_name: str, status: DrainStatus) -> str:
    """What a drain waits for, in words that do not change from one pass to the next while
    it waits for the same thing (the pool's Deleting condition is not rewritten each pass)."""
    if status.blocked_by is not None:
        return status.message
    if status.pdb_blocked:
        return f"node {node_name}: {status.pdb_blocked} pod(s) held by a PodDisruptionBudget"
    return f"node {node_name}: pods terminating"


def _finished(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _disrupting(p: _Pass) -> int:
    """The pool's Nodes being disrupted, as the cluster says (taint, deletionTimestamp) or
    as this pass just decided (a record marked deleting whose Node is not tainted yet)."""
    chosen = {
        node["metadata"]["name"]
        for r in p.records
        if r.state == DELETING and (node := p.node_of(r)) is not None
    }
    return sum(1 for name, n in p.nodes.items() if is_disrupting(n) or name in chosen)


def _disruption_status(p: _Pass) -> DisruptionStatus:
    """``status.disruption``: Nodes being disrupted, and how many more may start now for
    any reason (the least over the reasons a budget can name)."""
    disrupting, pool_nodes = _disrupting(p), len(p.nodes)
    budgets = p.pool.spec.disruption.budgets
    allowed = min(
        allowed_disruptions(budgets, pool_nodes, disrupting, reason, None)
        for reason in VOLUNTARY_REASONS
    )
    return DisruptionStatus(disrupting=disrupting, allowed=allowed)


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
    by_instance: dict[str, Object] = field(default_factory=dict)
    """The pool's Nodes by the instance id of their providerID."""
    vms: dict[str, Instance] = field(default_factory=dict)
    """The pool's live VMs by id."""
    listed: list[Instance] = field(default_factory=list)
    """The pool's VMs as the cloud listed them (possibly lagging)."""
    failure: CloudFailure | None = None
    gc_wait: float | None = None
    """Seconds until an unknown VM's grace period ends, if one is waiting."""
    removed: set[str] = field(default_factory=set)
    """Ids of VMs deleted by this pass."""
    drain_wait: float | None = None
    """Seconds until a drain in progress should be looked at again."""
    dropped: set[str] = field(default_factory=set)
    """Names of records this pass removed (a status merge must not bring them back)."""
    draining: set[str] = field(default_factory=set)
    """Records whose Node is still draining."""
    waits: list[float] = field(default_factory=list)
    """Seconds until something this pass saw is due (a registration or repair deadline)."""
    blocked: dict[str, Unremovable] = field(default_factory=dict)
    """What keeps each blocked Node of the pool from a scale-down, by record name."""
    removable: list[str] = field(default_factory=list)
    """Live records whose Node can go now without leaving a pod without a place, best first."""
    held: list[str] = field(default_factory=list)
    """What holds each drain a blocker stopped in this pass (for the Ready condition)."""
    resting: set[str] = field(default_factory=set)
    """Live records whose Node's scale-down drain timed out a short while ago: not chosen."""
    kept: set[str] = field(default_factory=set)
    """Records whose scale-down drain this pass gave up (the Node stays)."""
    repair_blocked: str = ""
    """Why unhealthy nodes past their toleration are not replaced (empty: none held)."""
    empty: set[str] = field(default_factory=set)
    """Live records whose Node runs no workload pod (a scale-down of it is reason Empty)."""

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
        self.dropped.add(name)

    def node_of(self, r: InstanceRecord) -> Object | None:
        """The Node ``r``'s VM registered, found by providerID."""
        return self.by_instance.get(r.instance_id) if r.instance_id else None

    def ready(self) -> set[str]:
        """Records registered as a Ready node of a running VM."""
        ready = set()
        for r in self.live():
            node = self.node_of(r)
            if r.state == "running" and node is not None and is_ready(node):
                ready.add(r.name)
        return ready


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
            return await self._finalize(obj)
        if not has_finalizer(obj, FINALIZER):
            obj = await add_finalizer(self.mgr.client, NODEPOOLS, obj, FINALIZER)
        try:
            pool = parse_nodepool(obj)
        except InvalidField as err:
            self.mgr.recorder.warning(obj, "InvalidSpec", str(err), action="Reconcile")
            generation = int(obj["metadata"].get("generation") or 0)
            await update_status(self.mgr.client, NODEPOOLS, obj, invalid_spec(generation, err))
            return Result()  # nothing to do until the spec changes

        nodes = await self._nodes(pool.metadata.name)
        p = _Pass(obj, pool, list(pool.status.instances), nodes)
        for node in nodes.values():
            provider = (node.get("spec") or {}).get("providerID")
            if provider:
                p.by_instance[instance_id_of(provider)] = node
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

    async def _removal_order(self, p: _Pass, *, keeping: bool = False) -> list[str]:
        """The live records that have a Node, best to remove first (one rule with the
        Autoscaler's scale-down: :func:`~nodepool_operator.scheduling.removal_order`, blocked
        Nodes last). Also notes in ``p`` what blocks each Node, the scale-down's own choices
        included (a blocker may turn up after the choice), and which live ones can go now.

        ``keeping``: as if the blocked Nodes being scaled down were kept (untainted, their
        room there for the pods of the others), to find what can go instead of them."""
        live = {r.name for r in p.live()}
        record_of: dict[str, str] = {}
        for r in p.records:
            node = p.node_of(r)
            if node is not None and (r.name in live or self._scaled_down(p, r)):
                record_of[node["metadata"]["name"]] = r.name
        nodes = []
        for name, node in p.nodes.items():
            if name in record_of:
                bound = await self.mgr.cache.list(PODS, index=(_POD_NODE_INDEX, name))
                nodes.append(scale_down_node(node, bound))
                if not any(is_workload(pod) and not _finished(pod) for pod in bound):
                    p.empty.add(record_of[name])
        rules = switches(p.pool)
        views = [pod for node in nodes for pod in node.pods]
        budgets = await kube_system_budgets(self.mgr.client) if needs_budgets(views, rules) else []
        holds = {name: node_view(node).hold for name, node in p.nodes.items()}
        blocked = blocked_nodes(nodes, holds, switches=rules, budgets=budgets)
        p.blocked = {record_of[name]: why for name, why in blocked.items()}
        candidates = [n for n in nodes if record_of[n.name] in live]
        if keeping:
            candidates += [
                _untainted(n) for n in nodes if record_of[n.name] not in live and n.name in blocked
            ]
        order = removal_order(candidates, threshold=1.0, blockers=blocked)
        p.removable = [record_of[d.node] for d in order if d.removable]
        return [record_of[d.node] for d in order if record_of[d.node] in live]

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

    def _adopt_unknown(self, p: _Pass) -> bool:
        """Record VMs tagged for the pool that no record knows, up to the desired count, so
        that they serve before any is garbage-collected or a new one is launched."""
        known_ids = {r.instance_id for r in p.records if r.instance_id}
        names = {r.name for r in p.records}
        room = p.desired - len(p.live()) - sum(1 for r in p.records if r.state == CREATING)
        adopted = False
        for vm in p.listed:
            if room <= 0:
                break
            if vm.id in known_ids or vm.name in names or vm.state == "terminated":
                continue
            p.records.append(InstanceRecord(name=vm.name, instance_id=vm.id, state=vm.state))
            names.add(vm.name)
            room -= 1
            adopted = True
            self._event(p, "Normal", "Adopted", f"VM {vm.id} ({vm.name}) tagged for the pool")
        return adopted

    def _leaving(self, p: _Pass) -> dict[str, tuple[str, str]]:
        """Records that must be replaced, with the Event (reason, note) that says why."""
        now = time.time()
        leaving: dict[str, tuple[str, str]] = {}
        unhealthy: list[Unhealthy] = []
        repair = p.pool.spec.disruption.repair
        for r in p.live():
            vm = p.vms.get(r.instance_id or "")
            if vm is None:
                leaving[r.name] = ("VMGone", f"the VM of {r.name} is gone; replacing it")
                continue
            node = p.node_of(r)
            if node is not None and node["metadata"].get("deletionTimestamp"):
                note = f"node {node['metadata']['name']} of {r.name} was deleted; replacing it"
                leaving[r.name] = ("NodeDeleted", note)
            elif node is None and vm.state == "running":
                since = vm.launched_at or vm.created_at
                due = since + self.settings.registration_timeout_seconds - now
                if due <= 0:
                    note = (
                        f"VM {vm.id} ({r.name}) registered no Node within "
                        f"{self.settings.registration_timeout_seconds:g}s; replacing it"
                    )
                    leaving[r.name] = ("RegistrationTimeout", note)
                else:
                    p.waits.append(due)
            elif node is not None and vm.state == "running":
                sick = unhealthy_since(node, repair.unhealthy_conditions)
                if sick is not None:
                    unhealthy.append(Unhealthy(r.name, node["metadata"]["name"], *sick))
        self._repair(p, unhealthy, leaving)
        return leaving

    def _repair(
        self, p: _Pass, unhealthy: list[Unhealthy], leaving: dict[str, tuple[str, str]]
    ) -> None:
        """Add to ``leaving`` the unhealthy node due for a repair (:mod:`._repair`), and note
        in the pass the nodes the threshold holds back."""
        repair = p.pool.spec.disruption.repair
        for r in p.records:
            node = p.node_of(r)
            alive = r.instance_id is not None and r.instance_id in p.vms
            if r.state != DELETING or node is None or not alive:
                continue
            if node["metadata"].get("deletionTimestamp"):
                continue
            sick = unhealthy_since(node, repair.unhealthy_conditions)
            if sick is not None:  # being repaired: counts, and is the one at a time
                unhealthy.append(Unhealthy(r.name, node["metadata"]["name"], *sick, repairing=True))
        toleration = (
            repair.toleration.total_seconds()
            if repair.toleration is not None
            else self.settings.node_repair_seconds
        )
        pool_nodes = sum(1 for r in p.live() if p.node_of(r) is not None)
        pool_nodes += sum(1 for u in unhealthy if u.repairing)
        decided = decide_repair(
            unhealthy,
            pool_nodes=pool_nodes,
            toleration=toleration,
            max_unhealthy_percent=repair.max_unhealthy_percent,
            now=time.time(),
        )
        for u in decided.replace:
            note = (
                f"node {u.node} of {u.record} unhealthy ({u.why}) for more than "
                f"{toleration:g}s; draining and replacing it"
            )
            leaving[u.record] = ("NodeRepair", note)
        if decided.wait is not None:
            p.waits.append(decided.wait)
        if decided.held:
            log.warning("repair blocked", extra={"pool": p.name, "nodes": list(decided.held)})
        p.repair_blocked = decided.message

    async def _record_plan(self, p: _Pass) -> None:
        """Decide what changes and record it before acting, in one status write."""
        adopted = self._adopt_unknown(p)
        leaving = self._leaving(p)
        self._find_resting(p)
        kept = await self._keep_blocked(p)
        order = await self._removal_order(p) if len(p.live()) > p.desired else []
        decided = plan(p.records, p.desired, gone=leaving, order=order, keep=p.resting)
        decided = self._within_budget(p, decided, leaving)
        if decided.empty:
            if adopted or kept:
                await self._write_status(p)
            return
        # The chosen Nodes are tainted before anything else (the record included), so no
        # pod is bound to them from now on (Karpenter's karpenter.sh/disrupted).
        records = {r.name: r for r in p.records}
        for name in decided.retire:
            node = p.node_of(records[name]) if name not in leaving else None
            if node is not None and not node["metadata"].get("deletionTimestamp"):
                await taint_disrupting(self.mgr.client, node)
        before = len(p.live())
        for name in decided.retire:
            p.update(name, state=DELETING)
            if name in leaving:
                reason, note = leaving[name]
                self._event(p, "Warning", reason, note, about=name)
        if decided.add:
            p.records += new_intents(p.name, decided.add, taken={r.name for r in p.records})
            note = f"{before} -> {p.desired} nodes: creating {decided.add} VM(s)"
            self._event(p, "Normal", "ScalingUp", note)
        surplus = [n for n in decided.retire if n not in leaving]
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

    @staticmethod
    def _within_budget(p: _Pass, decided: Plan, leaving: Mapping[str, object]) -> Plan:
        """``decided`` with its voluntary removals of registered Nodes cut to what
        ``spec.disruption.budgets`` allows now (:mod:`._budget`), the Nodes already being
        disrupted counted from the cluster (taint or deletionTimestamp), so a restart
        changes nothing. A VM with no Node yet and what is leaving anyway (VM gone, Node
        deleted, not Ready) are not budgeted; the surplus held back goes on a later pass."""
        budgets = p.pool.spec.disruption.budgets
        disrupting, pool_nodes = _disrupting(p), len(p.nodes)
        records = {r.name: r for r in p.records}
        retire: list[str] = []
        held: list[str] = []
        for name in decided.retire:
            if name in leaving or p.node_of(records[name]) is None:
                retire.append(name)
                continue
            reason = "Empty" if name in p.empty else "Underutilized"
            if allowed_disruptions(budgets, pool_nodes, disrupting, reason, None) > 0:
                retire.append(name)
                disrupting += 1
            else:
                held.append(name)
        if held:
            log.info(
                "disruption budget reached",
                extra={"pool": p.name, "disrupting": disrupting, "held": held},
            )
        return replace(decided, retire=tuple(retire))

    @staticmethod
    def _find_resting(p: _Pass) -> None:
        """Note the live records whose Node's scale-down drain timed out less than
        :data:`RECHECK_SECONDS` ago, and when the first of them may be chosen again."""
        now = time.time()
        for r in p.live():
            node = p.node_of(r)
            annotations = (node["metadata"].get("annotations") or {}) if node else {}
            rest = resting_for(annotations, now)
            if rest > 0:
                p.resting.add(r.name)
                p.waits.append(rest)

    @staticmethod
    def _scaled_down(p: _Pass, r: InstanceRecord) -> bool:
        """Whether ``r`` is being removed by a scale-down: marked deleting, its VM alive and
        its Node Ready and not deleted by someone (the other reasons to go: VM gone, Node
        deleted, never registered, not Ready)."""
        node = p.node_of(r)
        alive = r.instance_id is not None and r.instance_id in p.vms
        return r.state == DELETING and alive and node is not None and _scaling_down(node)

    async def _keep_blocked(self, p: _Pass) -> bool:
        """Nodes chosen for a scale-down that a blocker now holds go back to the pool when
        another Node can go instead (:func:`._blocked.keep_blocked`); the plan that follows
        then picks that one. Whether any was kept."""
        retiring = [r.name for r in p.records if self._scaled_down(p, r)]
        if not retiring:
            return False
        await self._removal_order(p, keeping=True)
        alternatives = [name for name in p.removable if name not in p.resting]
        kept = keep_blocked(retiring, p.blocked, alternatives)
        records = {r.name: r for r in p.records}
        for name in kept:
            r = records[name]
            vm = p.vms.get(r.instance_id or "")
            p.update(name, state=vm.state if vm is not None else "running")
            note = f"{p.blocked[name].note}; kept, another node is removed instead"
            self._event(p, "Warning", SCALE_DOWN_BLOCKED, note)
            node = p.node_of(r)
            if node is not None:
                self.mgr.recorder.warning(node, SCALE_DOWN_BLOCKED, note, action="ScaleDown")
        return bool(kept)

    # -- act ------------------------------------------------------------------------------

    async def _act(self, p: _Pass) -> None:
        await self._create(p)
        await self._untaint_kept(p)
        await self._retire(p)
        await self._restart_stopped(p)
        await self._adopt_nodes(p)
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
        type_name = p.pool.spec.instance_type
        try:
            instance_type = await self._instance_type(type_name)
        except CloudError as err:
            self._failed(p, err)
            return
        for r in intents:
            try:
                user_data = await pool_user_data(
                    self.cloud,
                    p.pool,
                    r.name,
                    instance_type,
                    node_class,
                    run_labels=self._run_labels,
                )
            except CloudError as err:
                self._failed(p, err)
                return
            request = create_request(
                pool_name=p.name,
                pool_uid=p.uid,
                instance_type=type_name,
                name=r.name,
                node_class=node_class,
                user_data=user_data,
            )
            try:
                vm = await self.cloud.create(request)
            except IdempotencyMismatch as err:
                # Sent before with other arguments (the spec changed since): that VM
                # exists; adopt it (its Node's labels and taints are brought in line later).
                found = listed.get(r.name)
                if found is None:
                    try:
                        found = await self.cloud.find(request.idempotency_token)
                    except CloudError:
                        found = None
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
        """Terminate every record marked ``deleting``; one still draining stays recorded."""
        for r in [r for r in p.records if r.state == DELETING]:
            try:
                done = await self._terminate(p, r)
            except CloudError as err:
                self._failed(p, err)
                return
            if done:
                p.drop(r.name)
            elif r.name not in p.kept:
                p.draining.add(r.name)

    async def _terminate(self, p: _Pass, r: InstanceRecord) -> bool:
        """Remove one record's Node and VM, as Karpenter's termination does: drain the Node,
        then terminate the VM, then let the Node go (delete it, drop its finalizer). True
        when done; False while the drain is still under way (call again on a later pass).

        A Node whose VM is gone, or that someone deleted while it is not Ready, is not
        drained: its pods are removed with it (the pod garbage collector deletes pods bound
        to a Node that no longer exists, and their controllers replace them). A Node being
        repaired (not Ready) is drained first, for at most drainTimeout: its kubelet is
        unreachable, so an evicted pod may never finish terminating.
        """
        node = p.node_of(r) or p.nodes.get(r.name)
        alive = r.instance_id is not None and r.instance_id in p.vms
        # A Node someone deleted while unreachable is not drained (nothing would finish); one
        # being repaired is, for at most drainTimeout (:meth:`_drain`).
        drainable = (
            node is not None
            and alive
            and (is_ready(node) or not node["metadata"].get("deletionTimestamp"))
        )
        if drainable and node is not None and not await self._drain(p, r, node):
            return False
        if r.instance_id:
            await self.cloud.delete(r.instance_id)
            p.removed.add(r.instance_id)
        if node is not None:
            await self._release_node(p, node)
        return True

    async def _drain(self, p: _Pass, r: InstanceRecord, node: Object) -> bool:
        """One round of draining ``node`` before its VM goes (:mod:`._drain`: the
        ``kubeloop.dev/disrupting`` taint, evictions through the Eviction API honouring
        PodDisruptionBudgets, do-not-disrupt pods holding it); whether it is drained. Called
        on every pass until it is; it never waits itself."""
        client = self.mgr.client
        voluntary = _scaling_down(node)
        annotations = node["metadata"].get("annotations") or {}
        if voluntary and not has_disrupting_taint(node) and resting_for(annotations, time.time()):
            # Given up already, the record's write lost (a crash): keep it, do not re-taint.
            await self._give_up(p, r, node, "")
            return False
        if not has_disrupting_taint(node):
            await taint_disrupting(client, node)

        def warn(reason: str, note: str) -> None:
            self._event(p, "Warning", reason, note)
            if reason == "DisruptionBlocked":
                self.mgr.recorder.warning(node, reason, note, action="Drain")

        status = await drain_node(
            client,
            node["metadata"]["name"],
            warn=warn,
            voluntary=voluntary,
            switches=switches(p.pool),
            hold=node_view(node).hold,
        )
        timeout = p.pool.spec.disruption.drain_timeout
        overdue = remaining(disrupting_since(node), timeout, time.time()) <= 0
        if voluntary and not status.done and overdue:
            await self._give_up(p, r, node, status.message)
            return False
        if not voluntary and not status.done and overdue and not is_ready(node):
            # A repair: the kubelet is unreachable, so evicted pods may never finish
            # terminating. Proceed as a pool deletion past its grace period does: the Node
            # goes with them, and the pod garbage collector removes them.
            note = repair_drain_note(node["metadata"]["name"], timeout, status.message)
            self._event(p, "Warning", REPAIR_DRAIN_TIMED_OUT, note, about=r.name)
            return True
        if not status.done:
            p.drain_wait = min(p.drain_wait or math.inf, status.retry_after)
        if status.blocked_by is not None:
            p.held.append(status.message)
        return status.done

    async def _give_up(self, p: _Pass, r: InstanceRecord, node: Object, waiting: str) -> None:
        """End a scale-down drain that ran past ``drainTimeout``: the Node is annotated with
        the time (so it is not chosen again at once, even after a restart), untainted, and
        its record is live again; another candidate is chosen on the next pass."""
        name = node["metadata"]["name"]
        client = self.mgr.client
        stamp = {"metadata": {"annotations": {DRAIN_TIMED_OUT_AT: format_time(time.time())}}}
        try:
            await client.patch(NODES, name, stamp)
        except NotFound:
            return
        await untaint_disrupting(client, node)  # refused (changed meanwhile): _untaint_kept
        vm = p.vms.get(r.instance_id or "")
        p.update(r.name, state=vm.state if vm is not None else "running")
        p.kept.add(r.name)
        if waiting:
            note = drain_timeout_note(name, p.pool.spec.disruption.drain_timeout, waiting)
            self._event(p, "Warning", DRAIN_TIMED_OUT, note)
            self.mgr.recorder.warning(node, DRAIN_TIMED_OUT, note, action="Drain")
            log.warning("drain timed out", extra={"pool": p.name, "node": name})

    async def _untaint_kept(self, p: _Pass) -> None:
        """Nodes tainted for removal whose record is not being retired (a crash between the
        taint and the record, or the target raised again) are schedulable again."""
        retiring = set()
        for r in p.records:
            node = p.node_of(r) if r.state == DELETING else None
            if node is not None:
                retiring.add(node["metadata"]["name"])
        for name, node in p.nodes.items():
            deleting = bool(node["metadata"].get("deletionTimestamp"))
            if name not in retiring and not deleting and has_disrupting_taint(node):
                await untaint_disrupting(self.mgr.client, node)

    async def _release_node(self, p: _Pass, node: Object) -> None:
        """Delete the Node (if nobody has yet) and drop the termination finalizer, so it goes."""
        name = node["metadata"]["name"]
        p.nodes.pop(name, None)
        client = self.mgr.client
        try:
            if not node["metadata"].get("deletionTimestamp"):
                deleted = await client.delete(NODES, name)
                if deleted.get("kind") == "Node":
                    node = deleted
            if has_finalizer(node, NODE_FINALIZER):
                await remove_finalizer(client, NODES, node, NODE_FINALIZER)
        except NotFound:
            pass

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

    async def _adopt_nodes(self, p: _Pass) -> None:
        """A live record's Node, found by providerID, is the pool's: it gets the termination
        finalizer and the pool's labels and taints (kept in line with the spec from then on);
        the record follows its VM's state."""
        labels = dict(p.pool.spec.labels)
        taints = pool_taints(p.pool.spec)
        for r in p.live():
            vm = p.vms.get(r.instance_id or "")
            if vm is None:
                continue  # gone: the next pass retires it
            node = p.node_of(r)
            if node is not None and not node["metadata"].get("deletionTimestamp"):
                await self._sync_node(p, node, labels, taints)
                await self._end_stale_reservation(p, p.nodes.get(node["metadata"]["name"], node))
                if r.node_name is None:
                    note = f"node {node['metadata']['name']} of VM {vm.id} ({r.name})"
                    self._event(p, "Normal", "Registered", note)
            name = node["metadata"]["name"] if node is not None else None
            p.update(r.name, state=vm.state, node_name=name)

    async def _sync_node(
        self, p: _Pass, node: Object, labels: dict[str, str], taints: list[dict[str, str]]
    ) -> None:
        ops = sync_patch(node, labels, taints, finalizers=(NODE_FINALIZER,))
        if not ops:
            return
        name = node["metadata"]["name"]
        try:
            updated = await self.mgr.client.patch(NODES, name, ops, patch_type=PatchType.JSON)
        except Invalid:
            p.waits.append(_SOON)  # the Node changed since it was read: next pass, fresh read
        except NotFound:
            pass
        else:
            p.nodes[name] = updated

    async def _end_stale_reservation(self, p: _Pass, node: Object) -> None:
        """The backstop of ``reserveNewNodes``: the Autoscaler lifts a reserved Node's taint
        once its planned pods are bound; should none do it (no Autoscaler for the pool, or
        one that is down), the Node is opened :data:`RESERVATION_BACKSTOP` landing graces
        after it became Ready, so a pool never keeps a node no pod may use."""
        if reserved_for(node) is None or not is_ready(node):
            return
        backstop = RESERVATION_BACKSTOP * self.settings.pod_landing_grace_seconds
        due = backstop - (ready_for(node, time.time()) or 0.0)  # no usable time: from now
        if due > 0:
            p.waits.append(due)
            return
        name = node["metadata"]["name"]
        with contextlib.suppress(Invalid, NotFound, Conflict):  # changed meanwhile: next pass
            p.nodes[name] = await self.mgr.client.patch(
                NODES, name, lift_patch(node), patch_type=PatchType.JSON
            )
            log.info("reservation of node %s lifted by the backstop", name)

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
        # Nodes of the pool whose VM is neither recorded nor alive (a leaked VM's Node stays
        # until that VM is adopted or collected).
        recorded = {r.instance_id for r in p.records if r.instance_id}
        intents = {r.name for r in p.records if not r.instance_id}
        alive = {vm.id for vm in p.listed if vm.id not in p.removed}
        for node in list(p.nodes.values()):
            provider = (node.get("spec") or {}).get("providerID") or ""
            instance = instance_id_of(provider) if provider else ""
            name = node["metadata"]["name"]
            if instance in recorded or instance in alive or name in intents:
                continue
            await self._release_node(p, node)
            self._event(p, "Warning", "OrphanNodeDeleted", f"node {name}: its VM is gone")

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
            dropped=frozenset(p.dropped),
            held=p.held,
            repair_blocked=p.repair_blocked,
            disruption=_disruption_status(p),
        )
        p.obj = await update_status(self.mgr.client, NODEPOOLS, p.obj, status.apply)

    def _failed(self, p: _Pass, err: CloudError) -> CloudFailure:
        failure = cloud_failure(err)
        if p.failure is None:
            p.failure = failure
        log.warning("cloud refused: %s", err, extra={"pool": p.name, "reason": failure.reason})
        self._event(p, "Warning", failure.reason, failure.message)
        return failure

    def _event(self, p: _Pass, kind: str, reason: str, note: str, *, about: str = "") -> None:
        """An Event on the pool; ``about`` keeps distinct findings (one per node) apart
        instead of aggregating them as repeats of the first."""
        if kind == "Warning":
            self.mgr.recorder.warning(p.obj, reason, note, action="Reconcile", aggregate_by=about)
        else:
            self.mgr.recorder.normal(p.obj, reason, note, action="Reconcile", aggregate_by=about)

    def _next(self, p: _Pass) -> Result:
        """Requeue when there is something to look at; raise what needs the backoff."""
        remaining = self._gate.remaining(p.uid, p.generation)
        if p.failure is not None and remaining is None:
            # Errors that name no wait (transient ones): the per-item backoff spaces retries.
            # Raised as a kubeloop error: a cloud's refusal (a missing node class, a
            # throttled API) is the world's doing, reported in the Degraded condition and
            # an Event; the runtime would log any other exception as a crash with a traceback.
            raise KubeloopError(f"{p.failure.reason}: {p.failure.message}") from p.failure.error
        # Idle, look for leaked VMs again after one grace period.
        waits = [self.settings.gc_grace_seconds, *(max(w, _MIN_POLL) for w in p.waits)]
        if p.draining:
            waits.append(_DRAIN_POLL if p.drain_wait is None else max(p.drain_wait, _MIN_POLL))
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
        if remaining is not None:
            waits.append(max(remaining, _MIN_POLL))
        elif not booting and len(p.live()) != p.desired and not p.resting:
            waits.append(_SOON)  # e.g. an intent dropped for a spent token
        return Result(requeue_after=min(waits))

    # -- deletion ---------------------------------------------------------------------------

    async def _finalize(self, obj: Object) -> Result:
        """Drain the pool's Nodes, then delete each Node and its VM, then every VM tagged
        with the pool's uid, then the finalizer; see :meth:`_drain_for_deletion`."""
        if not has_finalizer(obj, FINALIZER):
            return Result()
        meta = obj["metadata"]
        name, uid = meta["name"], meta["uid"]
        listed = await self.cloud.list({POOL_UID_TAG: uid})
        alive = {vm.id for vm in listed if vm.state != "terminated"}
        ids = set(alive)
        by_name = {vm.name: vm for vm in listed}
        for entry in (obj.get("status") or {}).get("instances") or ():
            if entry.get("instanceId"):
                ids.add(entry["instanceId"])
                continue
            vm = by_name.get(entry["name"]) or await self.cloud.find(
                idempotency_token(uid, entry["name"])
            )
            if vm is not None:
                ids.add(vm.id)
        nodes, _ = await self.mgr.client.list_all(NODES, label_selector=f"{POOL_LABEL}={name}")
        grace = self._disruption(obj).termination_grace_period
        left = remaining(parse_time(meta.get("deletionTimestamp")), grace, time.time())
        draining, waits, forced = await self._drain_for_deletion(obj, nodes, alive, left <= 0)
        keep = {instance_id for instance_id, _ in draining.values()}
        for instance_id in sorted(ids - keep):
            with contextlib.suppress(InstanceNotFound):
                await self.cloud.delete(instance_id)
        if draining:
            notes = {node: note for node, (_, note) in draining.items()}
            condition = deletion_condition(notes, grace, expired=False)
            await self._deletion_status(obj, condition)
            return Result(requeue_after=max(min([*waits, left]), _MIN_POLL))
        if forced:
            note = grace_expired_note(grace, forced)
            self.mgr.recorder.warning(obj, GRACE_EXPIRED, note, action="Delete")
            notes = {node: f"node {node}: {n} pod(s) not evicted" for node, n in forced.items()}
            obj = await self._deletion_status(obj, deletion_condition(notes, grace, expired=True))
            log.warning("pool deletion stopped waiting", extra={"pool": name, "forced": forced})
        self.mgr.recorder.normal(
            obj, "Deleted", f"deleted {len(nodes)} node(s) and {len(ids)} VM(s)", action="Delete"
        )
        with contextlib.suppress(NotFound):
            await remove_finalizer(self.mgr.client, NODEPOOLS, obj, FINALIZER)
        self._gate.forget(uid)
        return Result()

    async def _drain_for_deletion(
        self, obj: Object, nodes: list[Object], alive: set[str], expired: bool
    ) -> tuple[dict[str, tuple[str, str]], list[float], dict[str, int]]:
        """One pass over a deleted pool's Nodes, all at once (each Node's pods are paced by
        their PodDisruptionBudgets, not by the pool): taint, evict, and delete each Node and
        its VM once no workload pod is left, as a scale-down does. Only the pods' own holds
        apply (do-not-disrupt, safe-to-evict "false"), as for ``kubectl delete node``: the
        pool's default blockers are for voluntary removals. A Node that is not Ready or
        whose VM is gone is not drained (its pods could never finish terminating).

        Once the grace period is ``expired``, the Node and its VM go at once with the workload
        pods left on it (the pod garbage collector deletes pods bound to a Node that is gone,
        and their controllers replace them). Returns the Nodes still draining (their VM's id
        and what they wait for), when to look again, and the pods left per Node past the
        grace period.
        """
        client = self.mgr.client
        draining: dict[str, tuple[str, str]] = {}
        waits: list[float] = []
        forced: dict[str, int] = {}
        pool_name = obj["metadata"]["name"]

        def warn(reason: str, note: str) -> None:
            self.mgr.recorder.warning(obj, reason, note, action="Delete")

        def instance_of(node: Object) -> str:
            provider = (node.get("spec") or {}).get("providerID") or ""
            return instance_id_of(provider) if provider else ""

        def drainable(node: Object) -> bool:
            return instance_of(node) in alive and is_ready(node)

        untainted: set[str] = set()
        if not expired:
            # Every Node is tainted before any is drained: a pod evicted from one must not
            # land on another about to be drained (it would be evicted twice).
            for node in nodes:
                if (
                    drainable(node)
                    and not has_disrupting_taint(node)
                    and not await taint_disrupting(client, node)
                ):
                    untainted.add(node["metadata"]["name"])
        for node in nodes:
            node_name = node["metadata"]["name"]
            instance_id = instance_of(node)
            if node_name in untainted:
                # Changed under the guarded patch (or gone): taint it on a fresh read first.
                draining[node_name] = (instance_id, f"node {node_name}: pods terminating")
                waits.append(TERMINATING_POLL)
                continue
            if drainable(node) and expired:
                # Not deleted one by one (the operator never deletes pods, only evicts):
                # they go with their VM, and the pod garbage collector removes them.
                left = [p for p in await pods_on(client, node_name) if p.workload]
                if left:
                    forced[node_name] = len(left)
            elif drainable(node):
                status = await drain_node(client, node_name, warn=warn, voluntary=False)
                if not status.done:
                    draining[node_name] = (instance_id, _waiting_for(node_name, status))
                    waits.append(status.retry_after)
                    continue
            if instance_id:
                with contextlib.suppress(InstanceNotFound):
                    await self.cloud.delete(instance_id)
            with contextlib.suppress(NotFound):
                deleted = await client.delete(NODES, node_name)
                if deleted.get("kind") == "Node":
                    node = deleted
                await remove_finalizer(client, NODES, node, NODE_FINALIZER)
            log.info("pool node removed", extra={"pool": pool_name, "node": node_name})
        return draining, waits, forced

    def _disruption(self, obj: Object) -> Disruption:
        """The pool's ``spec.disruption``; the defaults when its spec is invalid (a pool that
        bypassed admission must still be deletable)."""
        try:
            return parse_nodepool(obj).spec.disruption
        except InvalidField:
            return Disruption()

    async def _deletion_status(self, obj: Object, condition: DeletionCondition) -> Object:
        """Write the pool's ``Deleting`` condition; the pool as written (or as given, if it
        is gone)."""
        type_, state, reason, message = condition

        def mutate(status: dict[str, Any]) -> None:
            conditions = status.get("conditions")
            if not isinstance(conditions, list):
                conditions = status["conditions"] = []
            generation = int(obj["metadata"].get("generation") or 0)
            set_condition(conditions, type_, state, reason, message, generation)

        try:
            return await update_status(self.mgr.client, NODEPOOLS, obj, mutate)
        except NotFound:
            return obj
