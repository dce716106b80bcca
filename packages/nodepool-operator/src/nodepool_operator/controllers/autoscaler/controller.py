"""The Autoscaler controller: raises a NodePool's targetNodes when pods wait for room, and
with scale-down on lowers it when nodes are unneeded.

One reconcile, for one Autoscaler, is a recipe of three steps, each called once:

1. **observe** (:meth:`.observe.Observer.observe`): the Autoscaler, its NodePool, the pending
   pods of its namespaces (each read once, at the boundary) and the pool's Nodes, from the
   cache; once the burst the candidates came in has gone quiet (:mod:`._batching`), what they
   reference, live. One frozen record, or why there is nothing to plan yet: a burst still
   gathering (look again shortly), or ``Ready=False`` with the reason (the pool's watch
   brings the Autoscaler back when the pool appears, so there is nothing to retry);
2. **decide** (:mod:`.decide`, pure): the target, the Events, the status, the reservation
   grants and what to remember; then the nominations of the planned pods
   (:func:`.decide.nominate`, after the target, also while a burst is gathered);
3. **act** (:mod:`.act`): the writes, the target first. A target that moved since the cache
   read it is decided again from the server's value (:func:`decide_and_write`); the memory
   is kept only once the writes are made.

It then runs again after ``frequency``; pod, node and pool events bring it back sooner
(:mod:`._watch`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from kubeloop import (
    NODES,
    PODS,
    Conflict,
    Controller,
    ControllerOptions,
    Manager,
    NotFound,
    Request,
    Result,
    generation_changed,
)
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.cloud import CloudProvider
from nodepool_operator.controllers import _indexes as indexes
from nodepool_operator.controllers._capacity import DAEMONSETS
from nodepool_operator.controllers._scope import equality_labels, node_selector
from nodepool_operator.controllers.autoscaler._batching import FirstSeen
from nodepool_operator.controllers.autoscaler._gates import GateOpener, gate_may_fall
from nodepool_operator.controllers.autoscaler._renominate import (
    Renominations,
    Renominator,
    nomination_dropped,
)
from nodepool_operator.controllers.autoscaler._template_inputs import TemplateSources
from nodepool_operator.controllers.autoscaler._watch import (
    BY_NAMESPACE,
    BY_POOL,
    Routes,
    autoscaler_namespaces,
    autoscaler_pool,
    node_changed,
    pod_moved,
    pod_namespace,
)
from nodepool_operator.controllers.autoscaler.act import Actor
from nodepool_operator.controllers.autoscaler.decide import (
    Clock,
    Decision,
    Knobs,
    Mark,
    Memory,
    TargetWrite,
    decide,
    nominate,
    settle,
)
from nodepool_operator.controllers.autoscaler.observe import (
    Gathering,
    Observation,
    Observer,
    Unready,
)
from nodepool_operator.settings import OperatorSettings

__all__ = ["AutoscalerController", "decide_and_write"]

log = logging.getLogger("nodepool_operator.autoscaler")

#: Decisions made again in one pass because the target moved under them (then Conflict).
_MOVES: Final = 5


class AutoscalerController:
    """Wires and runs the Autoscaler controller; see the module docstring."""

    def __init__(
        self,
        mgr: Manager,
        settings: OperatorSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] | None = None,
        memory: dict[str, Memory] | None = None,
        first_seen: FirstSeen | None = None,
        cloud: CloudProvider | None = None,
    ) -> None:
        """``clock`` times the waits (monotonic), ``wall`` the status and a Node's Ready
        age. ``memory`` (per Autoscaler name) and ``first_seen`` are what reconciles remember
        between runs; a test that builds one manager per pass (each on its own snapshot)
        hands the same ones to each pass's controller, as one long-running controller keeps
        them. ``cloud``: where the node template's instance types come from (None: the
        simulated catalogue)."""
        self.mgr = mgr
        self.settings = settings
        self._clock = clock
        self._wall = _wall if wall is None else wall
        self._first_seen = FirstSeen(clock) if first_seen is None else first_seen
        self._memory: dict[str, Memory] = {} if memory is None else memory
        self._knobs = Knobs(
            batch_window=settings.batch_window_seconds,
            landing_grace=settings.pod_landing_grace_seconds,
            max_node_provision=settings.max_node_provision_seconds,
            scale_up_backoff=settings.scale_up_backoff_seconds,
            utilization_threshold=settings.scale_down_utilization_threshold,
        )
        cache, selector = mgr.cache, settings.label_selector
        # The operator's scope labels are on every Node it registers (see _scope), so the Node
        # watch is scoped like the NodePool one, and the node template carries them too.
        scope_labels = equality_labels(selector)
        self._node_selector = node_selector(scope_labels)
        # The informers the builder below (and the NodePool controller) use for the same kind,
        # scope and selector: one watch each, and these indexes serve the map functions and the
        # reconcile alike.
        self._autoscalers = cache.informer(AUTOSCALERS, label_selector=selector)
        self._nodes = cache.informer(NODES, label_selector=self._node_selector)
        self._pods = cache.informer(PODS)
        self._observer = Observer(
            mgr.client,
            cache=cache,
            autoscalers=self._autoscalers,
            nodes=self._nodes,
            pods=self._pods,
            # DaemonSets (every namespace): their pods take room on every node they land on.
            daemonsets=cache.informer(DAEMONSETS),
            label_selector=selector,
            scope_labels=scope_labels,
            first_seen=self._first_seen.frozen,
            template_sources=TemplateSources(mgr.client, cloud, cache),
        )
        # Nodes as the cache has them, never older than our own writes: the gates' lifts read
        # them before they write (_gates, Actor.open)
        self._read_node = functools.partial(cache.get, NODES, label_selector=self._node_selector)
        self._actor = Actor(mgr.client, mgr.recorder, self._read_node)
        self._renominations = Renominations()

    def register(self) -> Controller:
        self._autoscalers.add_index(BY_NAMESPACE, autoscaler_namespaces)
        self._autoscalers.add_index(BY_POOL, autoscaler_pool)
        self._pods.add_index(BY_NAMESPACE, pod_namespace)
        # a pool's Nodes and the pods on each: shared with the NodePool controller
        indexes.register(self.mgr.cache, self._node_selector)
        self._pods.add_handler(self._first_seen.observe)
        routes = Routes(self._autoscalers.store, self._nodes.store)
        selector = self.settings.label_selector
        # dropped nominations are written back one by one, as their events come (_renominate)
        (
            self.mgr.controller("autoscaler-nominations")
            .for_(PODS, predicates=[nomination_dropped])
            .with_options(ControllerOptions(max_concurrent_reconciles=4))
            .complete(Renominator(self.mgr.client, self.mgr.cache, self._renominations).reconcile)
        )
        # a gate with no nomination behind it falls as its Node opens, without a pass (_gates)
        opener = GateOpener(
            self._actor.open,
            self._read_node,
            self._autoscalers,
            self._memory,
            clock=self._clock,
            wall=self._wall,
        )
        (
            self.mgr.controller("autoscaler-gates")
            .for_(NODES, predicates=[gate_may_fall], label_selector=self._node_selector)
            .with_options(ControllerOptions(max_concurrent_reconciles=4))
            .complete(opener.reconcile)
        )
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

    async def reconcile(self, req: Request) -> Result:
        remembered = self._memory.get(req.name)
        left = self._still_gathering(req.name, remembered)
        if left is not None:
            return Result(requeue_after=left)
        obs = await self._observer.observe(
            req,
            planned_at=None if remembered is None else remembered.planned_at,
            clock=self._clock,
            window=self._knobs.batch_window,
        )
        if obs is None:  # gone, or going
            forgotten = self._memory.pop(req.name, None)
            self._renominations.forget(req.name)
            if forgotten is not None:  # its names (and soft taints) would outlive it
                await self._actor.unname(forgotten.unneeded_since)
            return Result()
        if isinstance(obs, Unready):
            await self._actor.not_ready(obs, self._wall())
            return Result(requeue_after=obs.requeue_after)
        if isinstance(obs, Gathering):
            log.debug("gathering a burst of %d candidates for %.2fs", obs.candidates, obs.wait)
            # a nomination the scheduler dropped is written again without waiting for the burst
            memory = self._memory.setdefault(req.name, Memory())
            clock = Clock(self._clock(), self._wall())
            memory.gathering = (clock.mono + obs.wait, obs.seen.generation)
            nominated = nominate(obs.seen, memory, clock, self._knobs)
            self._renominations.expect(req.name, nominated.held)  # before the gates fall
            await self._actor.nominate(obs.seen.raw, nominated)
            return Result(requeue_after=obs.wait)
        memory = self._memory.setdefault(req.name, Memory())
        now = obs.read_at
        try:
            decision = await decide_and_write(
                obs,
                memory,
                Clock(now, self._wall()),
                self._knobs,
                self._actor.write_target,
                mark=self._actor.mark,
            )
        except NotFound:  # the pool went away after we read it
            memory.planned_at = now
            gone = self._observer.pool_not_found(obs.raw.scaler, obs.pool_name)
            await self._actor.not_ready(gone, self._wall())
            return Result()
        granted, opened = await self._actor.tell_and_reserve(obs.raw, decision, self._wall())
        memory = self._memory[req.name] = settle(decision.memory, granted, opened)
        clock = Clock(now, self._wall())
        nominated = nominate(obs, memory, clock, self._knobs, scaled=decision)
        self._renominations.expect(req.name, nominated.held)  # before the gates fall
        await self._actor.nominate(obs.raw, nominated)
        due = nominated.due
        requeue = decision.requeue_after if due is None else min(decision.requeue_after, due)
        return Result(requeue_after=requeue)

    def _still_gathering(self, name: str, memory: Memory | None) -> float | None:
        """Seconds left of the burst an earlier pass found gathering, if a pass now could
        only find it gathering still; else None (and forgotten).

        Why: every pod event of a burst brings the Autoscaler back, and a pass reads every
        pending pod of its namespaces (a snapshot, in a thread) only to find the burst still
        coming in: back to back, for as long as the scheduler marks the burst's pods
        unschedulable, CPU that the scheduler (on the same machine in a small cluster) needs
        for that very work. Until the end an earlier pass found, a pass cannot decide: the
        burst's later pods only move its end later (its quiet time starts again; its cap
        counts from its first pod). So it is not run, unless what it reads beside the pods
        asks for it: slots to nominate (a gathering pass writes those at once), the
        Autoscaler's spec changed, or it is being deleted. (A burst pod deleted meanwhile can
        end the burst sooner; it then waits at most the rest of one window.)"""
        if memory is None or memory.gathering is None:
            return None
        until, generation = memory.gathering
        left = until - self._clock()
        obj = self._autoscalers.store.get(name)
        if (
            left <= 0
            or memory.reservation.slots
            or obj is None
            or indexes.deleting(obj)
            or indexes.generation(obj) != generation
        ):
            memory.gathering = None
            return None
        return left


async def decide_and_write(
    obs: Observation,
    memory: Memory,
    now: Clock,
    knobs: Knobs,
    write: Callable[[str, TargetWrite], Awaitable[int | None]],
    *,
    mark: Callable[[Sequence[Mark]], Awaitable[None]] | None = None,
) -> Decision:
    """Decide, and write the decision's target (``write`` returns ``None`` once written, else
    the server's target); when the target moved under the decision (a cache behind the
    server, another writer), decide again from the server's value. ``mark`` names the
    unneeded Nodes before the target is written, so the NodePool controller, which reacts to
    the target, finds them named.

    A plan can take tens of milliseconds (the exact search's budget), so deciding runs in a
    worker thread, where the interpreter's switch interval keeps the event loop answering
    watches and probes meanwhile."""
    sent: set[tuple[str, bool]] = set()
    for _ in range(_MOVES):
        decision = await asyncio.to_thread(decide, obs, memory, now, knobs)
        if mark is not None:
            marks = [m for m in decision.marks if (m.node, m.on) not in sent]
            await mark(marks)
            sent.update((m.node, m.on) for m in marks)
        if decision.target is None:
            return decision
        moved = await write(obs.pool_name, decision.target)
        if moved is None:
            return decision
        obs = replace(obs, target=moved, moved=True)
    raise Conflict(409, "Conflict", f"NodePool {obs.pool_name}: its target kept moving")


def _wall() -> datetime:
    return datetime.now(UTC)
