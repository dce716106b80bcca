"""The Autoscaler controller: raises a NodePool's targetNodes when pods wait for room.

One reconcile, for one Autoscaler:

1. read the Autoscaler, its NodePool, the pending pods of its namespaces and the pool's Nodes
   from the cache (``Ready=False, reason=NodePoolNotFound`` if the pool is missing; the pool's
   watch brings the Autoscaler back when it appears, so there is nothing to retry);
2. keep the pods the scheduler marked ``Unschedulable`` (:func:`~nodepool_operator.scheduling.
   classify`), and wait until the burst they came in has gone quiet (:mod:`._batching`);
3. set aside pods that wait on a missing Secret, ConfigMap or claim (:mod:`._pending`);
4. plan by simulation (:func:`~nodepool_operator.scheduling.plan_scale_up`): room on the
   pool's nodes first, then its booting nodes (target minus registered nodes), then new
   template nodes, first-fit-decreasing, within the smaller of the two maxNodes;
5. raise ``targetNodes`` through the scale subresource, re-planned against the target the
   server has (:mod:`._scale`); or, with scale-down enabled, lower it when nodes have been
   empty for ``scaleDownUnneededTime``; nodes a blocker keeps (:mod:`._blocked`) are never
   unneeded, and are listed in ``status.unremovableNodes`` with a ScaleDownBlocked Event;
6. write status only if it changed, and emit TriggeredScaleUp / NotTriggerScaleUp Events, each
   distinct one once (:mod:`._report`);
7. for a pool with ``reserveNewNodes``, let each planned pod onto the new node planned for it
   and open a reserved node once its pods are bound (:mod:`._reserve`).

It then runs again after ``frequency``; pod, node and pool events bring it back sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from kubeloop import (
    NODES,
    PODS,
    Conflict,
    Controller,
    ControllerOptions,
    Invalid,
    Manager,
    NotFound,
    Object,
    PatchType,
    Request,
    Result,
    generation_changed,
    set_condition,
    update_status,
)
from nodepool_operator.api import (
    AUTOSCALERS,
    MAX_POOL_NODES,
    NODEPOOLS,
    Autoscaler,
    InvalidField,
    NodePool,
    parse_autoscaler,
    parse_nodepool,
)
from nodepool_operator.controllers._batching import FirstSeen, batch_wait
from nodepool_operator.controllers._blocked import (
    SCALE_DOWN_BLOCKED,
    blocked_nodes,
    kube_system_budgets,
    switches,
    unremovable_nodes,
)
from nodepool_operator.controllers._capacity import (
    DAEMONSETS,
    PoolNodes,
    pool_nodes,
    pool_template,
)
from nodepool_operator.controllers._decision import (
    NotTriggered,
    decision_text,
    next_unneeded_due,
    not_triggered,
    scale_down_target,
    scale_down_text,
    set_aside,
    track_unneeded,
)
from nodepool_operator.controllers._landing import Landing
from nodepool_operator.controllers._node_manifest import ready_for
from nodepool_operator.controllers._pending import blocked
from nodepool_operator.controllers._provision import Provisioning, observe, requested, timed_out
from nodepool_operator.controllers._references import look_up
from nodepool_operator.controllers._report import Reporter
from nodepool_operator.controllers._reserve import (
    Reservation,
    lift_due,
    lift_patch,
    reserved_for,
    toleration_patch,
)
from nodepool_operator.controllers._scale import ScaleOutcome, lower_target, raise_target
from nodepool_operator.controllers._scope import equality_labels, node_selector
from nodepool_operator.controllers._watch import (
    BY_NAMESPACE,
    BY_NODE,
    BY_POOL,
    Routes,
    autoscaler_namespaces,
    autoscaler_pool,
    node_changed,
    node_pool,
    pod_moved,
    pod_namespace,
    pod_node,
)
from nodepool_operator.scheduling import (
    DaemonSetView,
    FitReason,
    NodeTemplate,
    PodReason,
    PodRef,
    ScaleUpPlan,
    Unremovable,
    classify,
    crowded_out,
    daemonset_view,
    needs_budgets,
    node_view,
    plan_scale_up,
    pod_ref,
    pod_view,
    removal_order,
)
from nodepool_operator.settings import OperatorSettings

__all__ = ["AutoscalerController"]

log = logging.getLogger("nodepool_operator.autoscaler")

READY: Final = "Ready"
# Reasons of the Ready condition.
WATCHING: Final = "Watching"
NODEPOOL_NOT_FOUND: Final = "NodePoolNotFound"
INVALID_SPEC: Final = "InvalidSpec"
INVALID_NODEPOOL: Final = "InvalidNodePool"
#: Condition: whether the pool's requested nodes arrive (False while backing off after they
#: did not register within the max provision time).
PROVISIONING: Final = "Provisioning"
PROVISION_TIMED_OUT: Final = "ProvisionTimedOut"
PROVISIONING_OK: Final = "ScaleUpAllowed"
#: Another Autoscaler (the older one) already scales this pool: two writers of one
#: targetNodes would undo each other's decisions, so the younger one is refused.
CONFLICTING_AUTOSCALER: Final = "ConflictingAutoscaler"
#: How often a refused Autoscaler looks again (it takes over once the other one is gone).
_REFUSED_RECHECK: Final = 30.0
#: Pods that are not pending at all (not counted in status.pendingPods).
_GONE: Final = (PodReason.BOUND, PodReason.TERMINATING, PodReason.FINISHED)


@dataclass
class _Memory:
    """What one Autoscaler's reconciles remember between runs. Lost on a restart, harmlessly:
    the next look plans again, empty nodes start their unneeded time again, in-flight nodes
    get a full provision time again and not-taken pods one more node."""

    planned_at: float | None = None
    unneeded_since: dict[str, float] = field(default_factory=dict)
    provisioning: Provisioning = field(default_factory=Provisioning)
    landing: Landing = field(default_factory=Landing)
    reservation: Reservation = field(default_factory=Reservation)
    blocked: dict[str, Unremovable] = field(default_factory=dict)
    """What keeps each blocked node of the pool from scale-down, as last reported."""


@dataclass(frozen=True, slots=True)
class _Look:
    """Everything one reconcile read, for planning."""

    scaler: Autoscaler
    pool: NodePool
    pool_obj: Object
    template: NodeTemplate
    nodes: PoolNodes
    pending: int
    candidates: tuple[Object, ...]
    unbound: Mapping[str, Object]
    """Pending pods of the scaler's namespaces by uid (candidates or not)."""
    node_objs: tuple[Object, ...]
    """The pool's Node objects, as the cache has them."""


class AutoscalerController:
    """Wires and runs the Autoscaler controller; see the module docstring."""

    def __init__(
        self,
        mgr: Manager,
        settings: OperatorSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mgr = mgr
        self.settings = settings
        self._clock = clock
        self._first_seen = FirstSeen(clock)
        self._memory: dict[str, _Memory] = {}
        self._report = Reporter(mgr.recorder)
        cache, selector = mgr.cache, settings.label_selector
        # The operator's scope labels are on every Node it registers (see _scope), so the Node
        # watch is scoped like the NodePool one, and the node template carries them too.
        self._scope_labels = equality_labels(selector)
        self._node_selector = node_selector(self._scope_labels)
        # The informers the builder below (and the NodePool controller) use for the same kind,
        # scope and selector: one watch each, and these indexes serve the map functions and the
        # reconcile alike.
        self._autoscalers = cache.informer(AUTOSCALERS, label_selector=selector)
        self._nodes = cache.informer(NODES, label_selector=self._node_selector)
        self._pods = cache.informer(PODS)
        # DaemonSets (every namespace): their pods take room on every node they land on.
        self._daemonsets = cache.informer(DAEMONSETS)

    def register(self) -> Controller:
        self._autoscalers.add_index(BY_NAMESPACE, autoscaler_namespaces)
        self._autoscalers.add_index(BY_POOL, autoscaler_pool)
        self._nodes.add_index(BY_POOL, node_pool)
        self._pods.add_index(BY_NAMESPACE, pod_namespace)
        self._pods.add_index(BY_NODE, pod_node)
        self._pods.add_handler(self._first_seen.observe)
        routes = Routes(self._autoscalers.store, self._nodes.store)
        selector = self.settings.label_selector
        return (
            self.mgr.controller("autoscaler")
            .for_(AUTOSCALERS, predicates=[generation_changed], label_selector=selector)
            .watches(PODS, routes.for_pod, predicates=[pod_moved])
            .watches(
                NODES,
                routes.for_node,
                predicates=[node_changed],
                label_selector=self._node_selector,
            )
            .watches(
                NODEPOOLS, routes.for_pool, predicates=[generation_changed], label_selector=selector
            )
            .with_options(
                ControllerOptions(max_concurrent_reconciles=self.settings.autoscaler_workers)
            )
            .complete(self.reconcile)
        )

    # -- reconcile ---------------------------------------------------------------------

    async def reconcile(self, req: Request) -> Result:
        # Through the cache, not the store: a read right after our own status write waits
        # for the watch to bring that write back, so the next write does not conflict.
        obj = await self.mgr.cache.get(
            AUTOSCALERS, req.name, label_selector=self.settings.label_selector
        )
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self._memory.pop(req.name, None)
            self._report.forget(req.name)
            return Result()
        try:
            scaler = parse_autoscaler(obj)
        except InvalidField as err:
            # Admission should have refused it; a spec fix is a generation change, which
            # brings the Autoscaler back: nothing to retry until then.
            await self._not_ready(obj, INVALID_SPEC, str(err))
            return Result()
        memory = self._memory.setdefault(req.name, _Memory())
        owner = self._pool_owner(obj, scaler.spec.node_pool_ref.name)
        if owner is not None:
            pool_name = scaler.spec.node_pool_ref.name
            note = f"NodePool {pool_name} is already scaled by Autoscaler {owner}; this one is idle"
            await self._not_ready(obj, CONFLICTING_AUTOSCALER, note)
            return Result(requeue_after=_REFUSED_RECHECK)
        look = await self._look(obj, scaler)
        if look is None:
            return Result()
        now = self._clock()
        wait = batch_wait(
            (self._first_seen.since(p) for p in look.candidates),
            now=now,
            window=self.settings.batch_window_seconds,
            planned_at=memory.planned_at,
        )
        if wait > 0:
            log.debug("gathering a burst of %d candidates for %.2fs", len(look.candidates), wait)
            return Result(requeue_after=wait)
        memory.planned_at = now
        return await self._decide(obj, look, memory, now)

    def _pool_owner(self, obj: Object, pool_name: str) -> str | None:
        """The name of the Autoscaler that scales ``pool_name`` if it is another one: of all
        live Autoscalers naming the pool, the oldest (then the first by name) owns it."""

        def age(o: Object) -> tuple[str, str]:
            meta = o["metadata"]
            return (str(meta.get("creationTimestamp") or ""), str(meta["name"]))

        rivals = [
            o
            for o in self._autoscalers.store.by_index(BY_POOL, pool_name)
            if not o["metadata"].get("deletionTimestamp")
        ]
        if not rivals:
            return None
        first = min([obj, *rivals], key=age)
        name = str(first["metadata"]["name"])
        return None if name == obj["metadata"]["name"] else name

    async def _look(self, obj: Object, scaler: Autoscaler) -> _Look | None:
        """Read what planning needs; ``None`` (with the reason in status) if it cannot plan."""
        pool_name = scaler.spec.node_pool_ref.name
        pool_obj = await self.mgr.cache.get(
            NODEPOOLS, pool_name, label_selector=self.settings.label_selector
        )
        if pool_obj is None:
            await self._pool_not_found(obj, pool_name)
            return None
        daemonsets = self._daemonset_views()
        try:
            pool = parse_nodepool(pool_obj)
            template = pool_template(pool, scope_labels=self._scope_labels, daemonsets=daemonsets)
        except ValueError as err:  # InvalidField is a ValueError too
            await self._not_ready(obj, INVALID_NODEPOOL, f"NodePool {pool_name}: {err}")
            return None
        candidates, unbound = list[Object](), dict[str, Object]()
        for namespace in scaler.spec.namespaces:
            for pod in self._pods.store.by_index(BY_NAMESPACE, namespace):
                verdict = classify(pod)
                if verdict.reason not in _GONE:
                    unbound[_uid(pod)] = pod
                if verdict.candidate:
                    candidates.append(pod)
        node_objs = tuple(self._nodes.store.by_index(BY_POOL, pool_name))
        nodes = pool_nodes(
            node_objs,
            lambda node: self._pods.store.by_index(BY_NODE, node),
            daemonsets=daemonsets,
            booting_taints=template.taints,
        )
        return _Look(
            scaler,
            pool,
            pool_obj,
            template,
            nodes,
            len(unbound),
            tuple(candidates),
            unbound,
            node_objs,
        )

    def _daemonset_views(self) -> list[DaemonSetView]:
        views = []
        for daemonset in self._daemonsets.store.list():
            try:
                views.append(daemonset_view(daemonset))
            except ValueError as err:  # the API validates quantities; count it as nothing
                log.warning("ignoring a DaemonSet: %s", err)
        return views

    async def _decide(self, obj: Object, look: _Look, memory: _Memory, now: float) -> Result:
        lookup = await look_up(self.mgr.client, look.candidates)
        stuck = [(pod_ref(p), why) for p in look.candidates if (why := blocked(p, lookup))]
        spec = look.scaler.spec
        pool_name = spec.node_pool_ref.name
        settings = self.settings
        uids = {_uid(p): p for p in look.candidates}
        by_ref = {pod_ref(p): p for p in look.candidates}
        landing_due = memory.landing.look(
            candidates=uids.keys(),
            ready=look.nodes.ready,
            registered=look.nodes.registered,
            now=now,
            grace=settings.pod_landing_grace_seconds,
            template=look.template,
        )
        # Interchangeable pods: the scheduler may have bound others to the planned nodes.
        held = memory.landing.excluded(uids) | memory.landing.waiting(uids)
        memory.landing.release(u for u in held if crowded_out(uids[u], look.nodes.room))
        not_taken = sorted(pod_ref(uids[u]) for u in memory.landing.excluded(uids))
        settling = {pod_ref(uids[u]) for u in memory.landing.waiting(uids)}
        stuck_refs = {ref for ref, _ in stuck} | set(not_taken) | settling
        eligible = [p for p in look.candidates if pod_ref(p) not in stuck_refs]
        aside = (*_not_taken_group(not_taken), *set_aside(stuck))
        try:
            provision_note = await self._check_provisioning(obj, look, memory, now)
            planner = _planner(look, eligible, memory, now)
            plan, outcome = await self._scale(look, memory, planner, now)
        except NotFound:  # the pool went away after we read it
            await self._pool_not_found(obj, pool_name)
            return Result()
        head: str | None = None
        scaled_at: str | None = None
        if provision_note is not None:
            head, scaled_at = provision_note, _now_rfc3339()
        if outcome.written:
            if outcome.after < outcome.before:
                head = scale_down_text(outcome.before, outcome.after, spec.scale_down_unneeded_time)
            else:
                memory.provisioning = requested(
                    memory.provisioning, registered=look.nodes.registered, now=now
                )
                memory.landing.planned(_on_new_capacity(plan, by_ref), outcome.after)
                if look.pool.spec.reserve_new_nodes:
                    memory.reservation.planned(
                        _new_node_slots(plan, by_ref),
                        known=[r.name for r in look.pool.status.instances],
                    )
            what = head or plan.summary
            log.info(
                "NodePool %s targetNodes %d -> %d: %s",
                pool_name,
                outcome.before,
                outcome.after,
                what,
            )
            self._report.scaled(obj, look.pool_obj, outcome, what)
            scaled_at = _now_rfc3339()
        elif not memory.provisioning.backing_off(now):
            # Pods the plan puts on nodes already booting wait for them too.
            memory.landing.planned(
                _on_new_capacity(plan, by_ref),
                max(look.pool.spec.target_nodes, look.pool.spec.min_nodes),
            )
        if head is None and memory.provisioning.backing_off(now) and plan.scale_up:
            head = (
                f"no scale up (target {look.pool.spec.target_nodes}): provisioning timed out, "
                "scale-up backed off"
            )
        self._report.not_triggered(obj, not_triggered(plan, aside), by_ref)
        generation = obj["metadata"].get("generation", 0)
        decision = decision_text(plan, aside, head=head, settling=len(settling))
        provisioning = memory.provisioning
        backing_off = provisioning.backing_off(now)
        unremovable = unremovable_nodes(memory.blocked)

        def mutate(status: dict[str, Any]) -> None:
            status["pendingPods"] = look.pending
            status["unschedulablePods"] = len(look.candidates)
            status["lastDecision"] = decision
            status["observedGeneration"] = generation
            if unremovable:
                status["unremovableNodes"] = unremovable
            else:
                status.pop("unremovableNodes", None)
            if scaled_at is not None:
                status["lastScaleTime"] = scaled_at
            message = f"scaling NodePool {pool_name} for pods in {', '.join(spec.namespaces)}"
            conditions = _conditions(status)
            set_condition(conditions, READY, "True", WATCHING, message, generation)
            if backing_off:
                set_condition(
                    conditions,
                    PROVISIONING,
                    "False",
                    PROVISION_TIMED_OUT,
                    f"NodePool {pool_name}: requested nodes did not register within "
                    f"{settings.max_node_provision_seconds:g}s; scale-up backed off",
                    generation,
                )
            elif any(c.get("type") == PROVISIONING for c in conditions):
                set_condition(
                    conditions,
                    PROVISIONING,
                    "True",
                    PROVISIONING_OK,
                    f"NodePool {pool_name}: scale-up allowed",
                    generation,
                )

        await self._write_status(obj, mutate)
        waits = [spec.frequency.total_seconds()]
        lift_due_in = await self._hold_reservations(look, memory)
        if lift_due_in is not None:
            waits.append(lift_due_in)
        due = next_unneeded_due(
            memory.unneeded_since, now, spec.scale_down_unneeded_time.total_seconds()
        )
        if due is not None:
            waits.append(due)
        if landing_due is not None:
            waits.append(landing_due)
        if provisioning.since is not None:
            waits.append(
                max(0.0, provisioning.since + settings.max_node_provision_seconds - now) + 0.05
            )
        if provisioning.backoff_until is not None and backing_off:
            waits.append(max(0.0, provisioning.backoff_until - now) + 0.05)
        return Result(requeue_after=min(waits))

    async def _hold_reservations(self, look: _Look, memory: _Memory) -> float | None:
        """Reserved new nodes (``_reserve``): give the plan's slots their nodes' names, let
        each planned pod onto its node, and open a node once its pods are bound (or it has
        been Ready for the landing grace). Returns the seconds until the next lift is due."""
        reserved = [(n, name) for n in look.node_objs if (name := reserved_for(n)) is not None]
        reservation = memory.reservation
        if not reserved and not reservation.slots:
            return None
        records = [r.name for r in look.pool.status.instances]
        slots = reservation.assign(records)
        live = {*records, *(n["metadata"]["name"] for n in look.node_objs)}
        reservation.forget([name for name in slots if name not in live])  # its VM was replaced
        client = self.mgr.client
        for name, uids in slots.items():
            for uid in uids:
                pod = look.unbound.get(uid)
                if pod is None or name not in live or (uid, name) in reservation.granted:
                    continue
                patch = toleration_patch(pod, name)
                if patch is None:
                    continue
                meta = pod["metadata"]
                # gone, or its tolerations changed meanwhile: the next pass looks again
                with contextlib.suppress(NotFound, Invalid):
                    await client.patch(
                        PODS, meta["name"], patch, meta["namespace"], patch_type=PatchType.JSON
                    )
                    reservation.granted.add((uid, name))
        grace = self.settings.pod_landing_grace_seconds
        now = time.time()
        opened: list[str] = []
        next_due: float | None = None
        for node, name in reserved:
            held = ready_for(node, now)
            slot = slots.get(name)
            if lift_due(slot=slot, waiting=look.unbound.keys(), ready_for=held, grace=grace):
                with contextlib.suppress(NotFound, Invalid, Conflict):
                    await client.patch(
                        NODES, node["metadata"]["name"], lift_patch(node), patch_type=PatchType.JSON
                    )
                    opened.append(name)
            elif held is not None:
                next_due = min(grace - held, next_due if next_due is not None else grace)
        reservation.forget(opened)
        return None if next_due is None else max(0.05, next_due)

    async def _check_provisioning(
        self, obj: Object, look: _Look, memory: _Memory, now: float
    ) -> str | None:
        """Follow the pool's in-flight nodes; when they have made no progress for the max
        provision time, stop counting them: lower the target back to the registered nodes,
        back off, and say so (Event, condition). Returns the decision's head if it did."""
        pool = look.pool.spec
        effective = max(pool.target_nodes, pool.min_nodes)
        registered = look.nodes.registered
        memory.provisioning = observe(
            memory.provisioning, in_flight=effective - registered, registered=registered, now=now
        )
        failed = timed_out(
            memory.provisioning,
            now=now,
            timeout=self.settings.max_node_provision_seconds,
            backoff=self.settings.scale_up_backoff_seconds,
        )
        if failed is None:
            return None
        memory.provisioning = failed
        memory.reservation.drop_unnamed()  # their VMs will not come
        pool_name = look.scaler.spec.node_pool_ref.name
        desired = max(registered, pool.min_nodes)
        outcome = await lower_target(
            self.mgr.client, pool_name, expected=pool.target_nodes, desired=desired
        )
        wait = (failed.backoff_until or now) - now
        note = (
            f"NodePool {pool_name}: {effective - registered} requested node(s) did not register "
            f"within {self.settings.max_node_provision_seconds:g}s; no longer counted as in "
            f"flight, target {outcome.before} -> {outcome.after}, scale-up backed off for "
            f"{wait:g}s"
        )
        log.warning(note)
        for target in (obj, look.pool_obj):
            self.mgr.recorder.warning(target, PROVISION_TIMED_OUT, note, action="ScaleUp")
        return (
            f"provisioning timed out: target {outcome.before} -> {outcome.after}, "
            "scale-up backed off"
        )

    async def _scale(
        self,
        look: _Look,
        memory: _Memory,
        plan_for: Callable[[int], Awaitable[ScaleUpPlan]],
        now: float,
    ) -> tuple[ScaleUpPlan, ScaleOutcome]:
        """Raise the target if the plan needs new nodes (not while backing off); else, with
        scale-down on, lower it when nodes have been unneeded long enough. Returns the plan as
        made against the target the server had, and what was written."""
        target = look.pool.spec.target_nodes
        plan = await plan_for(target)
        if plan.scale_up and memory.provisioning.backing_off(now):
            memory.unneeded_since.clear()
            return plan, ScaleOutcome(target, target)
        if plan.scale_up:
            memory.unneeded_since.clear()

            async def desired_for(current: int) -> int:
                return (await plan_for(current)).desired_target

            outcome = await raise_target(
                self.mgr.client, look.scaler.spec.node_pool_ref.name, desired_for
            )
            return await plan_for(outcome.before), outcome
        if not look.scaler.spec.scale_down_enabled:
            memory.unneeded_since.clear()
            memory.blocked.clear()
            return plan, ScaleOutcome(target, target)
        return plan, await self._scale_down(look, memory, plan, now)

    async def _scale_down(
        self, look: _Look, memory: _Memory, plan: ScaleUpPlan, now: float
    ) -> ScaleOutcome:
        # Empty nodes, and nodes below the utilisation threshold whose pods the simulation
        # places on the others, blocked ones never: the rule the NodePool controller removes
        # nodes by.
        blocked = await self._blocked(look, memory)
        order = removal_order(
            look.nodes.candidates,
            threshold=self.settings.scale_down_utilization_threshold,
            blockers=blocked,
        )
        unneeded = tuple(d.node for d in order if d.removable)
        memory.unneeded_since = track_unneeded(memory.unneeded_since, unneeded, now)
        spec = look.scaler.spec
        target = look.pool.spec.target_nodes
        desired = scale_down_target(
            target=target,
            min_nodes=look.pool.spec.min_nodes,
            nodes=replace(look.nodes, empty=unneeded),
            unneeded_since=memory.unneeded_since,
            now=now,
            unneeded_seconds=spec.scale_down_unneeded_time.total_seconds(),
            pods_need_room=bool(plan.placements),
        )
        if desired is None:
            return ScaleOutcome(target, target)
        outcome = await lower_target(
            self.mgr.client, spec.node_pool_ref.name, expected=target, desired=desired
        )
        if outcome.written:
            # Which nodes go is the NodePool controller's choice: every empty node starts over.
            memory.unneeded_since.clear()
        return outcome

    async def _blocked(self, look: _Look, memory: _Memory) -> dict[str, Unremovable]:
        """What keeps each candidate node from scale-down (the pool's switches, kube-system's
        PodDisruptionBudgets when a kube-system pod is on one); a ScaleDownBlocked Event on
        each Node whose blocker is new or changed."""
        rules = switches(look.pool)
        views = [pod for node in look.nodes.candidates for pod in node.pods]
        client = self.mgr.client
        budgets = await kube_system_budgets(client) if needs_budgets(views, rules) else []
        holds = {view.name: view.hold for view in map(node_view, look.node_objs)}
        blocked = blocked_nodes(look.nodes.candidates, holds, switches=rules, budgets=budgets)
        objs = {str(n["metadata"]["name"]): n for n in look.node_objs}
        for name, why in sorted(blocked.items()):
            if memory.blocked.get(name) != why and name in objs:
                recorder = self.mgr.recorder
                recorder.warning(objs[name], SCALE_DOWN_BLOCKED, why.note, action="ScaleDown")
                log.info("scale-down blocked: %s", why.note)
        memory.blocked = blocked
        return blocked

    # -- status -----------------------------------------------------------------------

    async def _pool_not_found(self, obj: Object, pool: str) -> None:
        selector = self.settings.label_selector
        scope = f" with labels {selector}" if selector else ""
        await self._not_ready(obj, NODEPOOL_NOT_FOUND, f"NodePool {pool}{scope} not found")

    async def _not_ready(self, obj: Object, reason: str, message: str) -> None:
        generation = obj["metadata"].get("generation", 0)

        def mutate(status: dict[str, Any]) -> None:
            status["observedGeneration"] = generation
            set_condition(_conditions(status), READY, "False", reason, message, generation)

        await self._write_status(obj, mutate)

    async def _write_status(self, obj: Object, mutate: Callable[[dict[str, Any]], None]) -> None:
        """Write status if it changed. An Autoscaler deleted meanwhile needs no status (and
        its deletion event ends its reconciles), so that is not an error."""
        with contextlib.suppress(NotFound):
            await update_status(self.mgr.client, AUTOSCALERS, obj, mutate)


def _planner(
    look: _Look, pods: Sequence[Object], memory: _Memory, now: float
) -> Callable[[int], Awaitable[ScaleUpPlan]]:
    """The plan for ``pods`` as a function of the pool's target, so that it can be made again
    against the target the server has (booting nodes = target - registered nodes).

    Plans are made against ``max(targetNodes, minNodes)``, the size the NodePool controller
    keeps. A pool backing off after a failed provisioning has no nodes in flight: its phantom
    nodes must not hide the need.

    A plan can take tens of milliseconds (the exact search's budget), so it is made in a
    worker thread, where the interpreter's switch interval keeps the event loop answering
    watches and probes meanwhile; and once per target, since the pass asks for the plan at
    the cached target, at the server's, and again after the write."""
    spec = look.scaler.spec
    max_nodes = min(look.pool.spec.max_nodes, spec.max_nodes or MAX_POOL_NODES)
    min_nodes = look.pool.spec.min_nodes
    views = [pod_view(p) for p in pods]
    backing_off = memory.provisioning.backing_off(now)

    made: dict[int, ScaleUpPlan] = {}

    def plan(effective: int) -> ScaleUpPlan:
        return plan_scale_up(
            views,
            template=look.template,
            existing_nodes=look.nodes.room,
            in_flight=0 if backing_off else effective - look.nodes.registered,
            current_target=effective,
            max_nodes=max_nodes,
        )

    async def plan_for(target: int) -> ScaleUpPlan:
        effective = max(target, min_nodes)
        if effective not in made:
            made[effective] = await asyncio.to_thread(plan, effective)
        return made[effective]

    return plan_for


def _uid(pod: Object) -> str:
    return str(pod["metadata"].get("uid") or "")


def _on_new_capacity(plan: ScaleUpPlan, pods: Mapping[PodRef, Object]) -> list[str]:
    """The uids of the pods ``plan`` put on booting or new nodes."""
    return [
        _uid(pods[p.pod])
        for p in plan.placements
        if p.pod in pods and not p.node.startswith("existing:")
    ]


def _new_node_slots(plan: ScaleUpPlan, pods: Mapping[PodRef, Object]) -> list[tuple[str, ...]]:
    """The uids of the pods ``plan`` put on each new node, in the new nodes' order."""
    slots: dict[int, list[str]] = {}
    for p in plan.placements:
        if p.pod in pods and p.node.startswith("new:"):
            slots.setdefault(int(p.node.removeprefix("new:")), []).append(_uid(pods[p.pod]))
    return [tuple(slots[i]) for i in sorted(slots)]


def _not_taken_group(pods: Sequence[PodRef]) -> tuple[NotTriggered, ...]:
    if not pods:
        return ()
    detail = "a new node planned for it became Ready and did not take it"
    return (NotTriggered(str(FitReason.NOT_TAKEN), detail, tuple(pods)),)


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    return conditions


def _now_rfc3339() -> str:
    # metav1.Time: seconds precision, UTC.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
