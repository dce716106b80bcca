"""Run fault scenarios against real operator processes and count what went wrong.

Every counter comes from the apiserver's state, the fault proxy's log or the simulated
cloud's records, never from an operator's own metrics:

``converged``
    Anvil's eventually-stable check: after the faults stop, every scope matches the
    desired state within ``CONVERGE_S`` and keeps matching for ``STABLE_S``.
``lost_updates``
    A spec the user wrote that is no longer the spec, or a status that claims a
    generation whose effect is not there (the child, the VMs).
``observed_generation_regressions``
    ``status.observedGeneration`` of one object (one uid) going down between two watch
    events, in the apiserver's order.
``split_brain_writes``
    Leader pair: writes the old leader got accepted after the new leader's first write
    (commit order by resourceVersion; Leases and Events left out). Two instances: writes
    one instance made to the other's objects.
``duplicate_vms``, ``leaked_vms``
    The cloud's records: live VMs beyond one per name; live VMs no live object wants.
``unfinalized``
    An object of the workload, live and past its first reconcile, that does not carry
    the operator's finalizer (deleted then, its cleanup would never run).
``overlapping_reconciles``
    Two reconciles of one object at once: the tenant operator's child writes the
    apiserver answered 409 (it is their only writer; see tests/faults/tenant.py).
``stuck_behind_lag``
    ``watch-lag``: what still differs from the desired state when the held watch is
    released (4 s after the last change). Nothing a reconcile needs is behind the held
    watch (the namespaced informer delivered it), so a difference is a reconcile that
    read the lagging informer instead.
``stale_reads``, ``stuck_reads``, ``list_storms``, ``writes_after_stepdown``
    The cache's read guarantees and the lease on the Pack operator (``child-lag``,
    ``recreate-lag``, ``forbid-list``, ``list-hang``, ``lease-steal``): see
    tests/faults/cache_faults.py.
``pdb_breaches``, ``pods_lost``, ``left_tainted``
    The disruption scenarios (tests/faults/disruption.py): a pod the operator DELETEd
    instead of evicting, or its PodDisruptionBudget's pods seen by a watch below what the
    budget allows; a workload pod not Running at the end (or deleted without an
    eviction), a bare pod on a blocked node touched; a live Node still tainted for removal
    (the gated scenarios, tests/faults/gates.py: or still gated, the reservation taint).
``differences``
    Sieve's differential check against the fault-free run of the same workload: end
    state, and per-object create/delete counts.

    python -m tests.faults.runner            # the full matrix; one JSON line at the end
    python -m tests.faults.runner --quick    # the subset make test runs
    python -m tests.faults.runner --only 'appconfig/leader-pair/partition@update#1'
    python -m tests.faults.runner --disruption   # the drain paths' scenarios only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import random
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubeloop import (
    LEASES,
    Conflict,
    Invalid,
    NotFound,
    Resource,
    load_kubeconfig,
    remove_finalizer,
    retry_on_conflict,
)
from kubeloop.testing.faults import (
    CutWatch,
    Delay,
    Hang,
    LogEntry,
    Reset,
    Rule,
    service_unavailable,
    too_many_requests,
)
from kubeloop.testing.faults import internal_error as internal_error_
from kubeloop.testing.invariants import (
    NOT_OBJECT_WRITES,
    GenerationWatch,
    writes_after_handover,
    writes_outside,
)
from kubeloop.testing.oracles import (
    Difference,
    NotStable,
    ObjectKey,
    OpCount,
    RunRecord,
    State,
    WatchRecorder,
    compare_runs,
    eventually_stable,
)
from nodepool_operator.testbed import simulated_vms
from tests.faults import cache_faults
from tests.faults.disruption import DISRUPTION_ADAPTERS
from tests.faults.gates import GATE_ADAPTERS
from tests.faults.operators import ADAPTERS, NodePoolOperator, OperatorAdapter, Scope
from tests.faults.scenarios import Scenario, disruption, full, quick
from tests.faults.world import Replica, World, world

log = logging.getLogger("faults.matrix")

#: How long a storm (429s, 5xx, resets, watch cuts) or a partition lasts.
FAULT_S = 4.0
#: Convergence bound after the faults stop, and how long the match must then hold.
CONVERGE_S = 90.0
STABLE_S = 2.0

#: The annotation the ``meddle`` fault's writer changes, and how many writers per scope.
MEDDLE_KEY = "faults.kubeloop.dev/meddler"
MEDDLERS = 3
#: The meddler's own finalizers, on each object from its creation (ahead of the
#: operator's), and how often it removes one from an object being deleted: each removal
#: moves the operator's finalizer down the list under its pending remove.
MEDDLE_FINALIZERS = tuple(f"faults.kubeloop.dev/meddler-{i}" for i in range(16))
MEDDLE_UNWIND_S = 0.2
#: How long the operator's object writes are held while meddled with: far longer than
#: the meddlers take to change each object once.
MEDDLE_DELAY_S = 0.3

#: Fault-free reference runs by scenario; None: it went wrong, so it is no reference.
References = dict[Scenario, RunRecord | None]

COUNTERS = (
    "lost_updates",
    "observed_generation_regressions",
    "split_brain_writes",
    "duplicate_vms",
    "leaked_vms",
    "unfinalized",
    "overlapping_reconciles",
    "stuck_behind_lag",
    "stale_reads",
    "stuck_reads",
    "list_storms",
    "writes_after_stepdown",
    "pdb_breaches",
    "pods_lost",
    "left_tainted",
    "differences",
    "faults_missed",
)


@dataclass
class Outcome:
    scenario: str
    converged: bool = False
    lost_updates: int = 0
    observed_generation_regressions: int = 0
    split_brain_writes: int = 0
    duplicate_vms: int = 0
    leaked_vms: int = 0
    unfinalized: int = 0
    overlapping_reconciles: int = 0
    stuck_behind_lag: int = 0
    stale_reads: int = 0
    stuck_reads: int = 0
    list_storms: int = 0
    writes_after_stepdown: int = 0
    pdb_breaches: int = 0
    pods_lost: int = 0
    left_tainted: int = 0
    differences: int = 0
    faults_missed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.converged and not any(getattr(self, c) for c in COUNTERS)

    def explain(self) -> str:
        counts = ", ".join(f"{c}={getattr(self, c)}" for c in COUNTERS if getattr(self, c))
        state = "converged" if self.converged else "NOT converged"
        head = f"{self.scenario} ({self.seconds:.0f}s): {state}"
        return "\n  ".join([f"{head} {counts}".rstrip(), *self.notes[:25]])


def summarise(outcomes: Iterable[Outcome]) -> dict[str, int]:
    rows = list(outcomes)
    summary = {"scenarios": len(rows), "converged": sum(o.converged for o in rows)}
    for c in COUNTERS:
        summary[c] = sum(getattr(o, c) for o in rows)
    return summary


def _handover_story(writes: list[LogEntry], old: str, late: list[LogEntry]) -> list[str]:
    """Notes that place each late write against the new leader's first write: when it
    reached the proxy and finished, and the ``?timeout=`` the fence gave it (the lease
    the old leader had left by its own clock when it sent it)."""
    others = [e for e in writes if e.client != old]
    first = min(others, key=lambda e: e.finished if e.finished is not None else e.started)
    t0 = first.finished if first.finished is not None else first.started
    notes = [
        f"new leader's first write: {first.verb} {first.resource}/{first.name} "
        f"(rv {first.resource_version}), answered first, at t=0"
    ]
    for e in late[:5]:
        fence = dict(p.split("=", 1) for p in e.query.split("&") if "=" in p).get("timeout")
        done = f"{e.finished - t0:+.2f}s" if e.finished is not None else "?"
        notes.append(
            f"old leader {old} wrote {e.verb} {e.resource}/{e.name} (rv "
            f"{e.resource_version}) after the new leader's first write: reached the proxy at "
            f"t={e.started - t0:+.2f}s, answered at t={done}, fence timeout {fence}"
        )
    return notes


# -- one scenario ----------------------------------------------------------------------------


class Run:
    """One scenario's processes, workload, fault and oracles."""

    def __init__(self, w: World, scn: Scenario, references: References) -> None:
        self.w, self.scn, self.refs = w, scn, references
        self.adapter: OperatorAdapter = {**ADAPTERS, **DISRUPTION_ADAPTERS, **GATE_ADAPTERS}[
            scn.operator
        ]
        self.rng = random.Random(scn.id)
        self.tag = uuid.uuid4().hex[:6]
        self.scopes: list[Scope] = []
        self.replicas: list[Replica] = []
        self.rules: list[Rule] = []
        self.outcome = Outcome(scn.id)
        self.leader: Replica | None = None
        self.meddlers: list[asyncio.Task[None]] = []
        self.dir = w.dir / self.tag

    @property
    def clients(self) -> set[str]:
        return {r.client for r in self.replicas}

    # -- set-up ------------------------------------------------------------------------
    async def setup(self) -> None:
        self.dir.mkdir(parents=True)
        if self.adapter.name not in self.w.installed:
            await self.adapter.install(self.w)
            self.w.installed.add(self.adapter.name)
        n_scopes = 2 if self.scn.topology == "two-instances" else 1
        for i in range(n_scopes):
            ns = await self.w.blocking(self.w.cp.create_namespace, f"fx-{self.tag}-{i}")
            self.scopes.append(Scope(f"{self.tag}{i}", ns, self.dir / f"cloud-{i}.sqlite"))
            if self.scn.fault == "meddle":
                self.scopes[-1].finalizers = MEDDLE_FINALIZERS
        leader = self.scn.topology == "leader-pair"
        for i, scope in enumerate(self.scopes):
            for k in range(2 if leader else 1):
                client = f"op-{self.tag}-{i}{k}"
                argv = self.adapter.argv(self.w, scope, client, leader=leader)
                argv += cache_faults.extra_argv(self.scn)
                self.replicas.append(Replica(client, argv, self.dir / f"{client}.log"))

    async def start(self) -> None:
        for r in self.replicas:
            r.start()
        if self.scn.topology == "leader-pair":
            self.leader = await self._wait_leader()

    async def _wait_leader(self) -> Replica:
        scope = self.scopes[0]
        name = (
            f"appconfig-operator-{scope.namespace}"
            if self.adapter.name == "appconfig"
            else "nodepool-operator-leader"
        )
        if self.adapter.name == "pack":
            name = cache_faults.LEASE
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(NotFound):
                lease = await self.w.admin.get(LEASES, name, scope.namespace)
                holder = (lease.get("spec") or {}).get("holderIdentity")
                for r in self.replicas:
                    if r.client == holder:
                        return r
            await asyncio.sleep(0.2)
        raise AssertionError(f"no leader elected for {name}: {self._tails()}")

    # -- the fault -----------------------------------------------------------------------
    async def strike(self) -> None:
        """Start the fault (storms and partitions last until :meth:`heal`)."""
        fault, px, ops = self.scn.fault, self.w.proxy, self.clients
        if fault == "storm-429":
            self.rules.append(px.add_rule(too_many_requests(1.0), client=ops, probability=0.5))
        elif fault == "storm-5xx":
            writes = {"create", "update", "patch", "delete"}
            self.rules.append(
                px.add_rule(service_unavailable(1.0), client=ops, verb=writes, probability=0.4)
            )
            self.rules.append(
                px.add_rule(internal_error_(), client=ops, verb={"get", "list"}, probability=0.3)
            )
        elif fault == "watch-cut":
            self.rules.append(px.add_rule(CutWatch(after_seconds=1.5, abort=True), client=ops))
        elif fault == "reset":
            self.rules.append(px.add_rule(Reset(), client=ops, watch=False, probability=0.3))
        elif fault in ("partition", "partition-hold"):
            target = self.leader or self.rng.choice(self.replicas)
            held = fault == "partition-hold"
            self.rules.append(px.partition(target.client, mode="hold" if held else "hang"))
        elif fault == "sigkill":
            await asyncio.sleep(self.rng.uniform(0.0, 1.5))
            target = self.leader or self.rng.choice(self.replicas)
            target.kill()
            self.outcome.notes.append(f"SIGKILL {target.client}")
            if self.leader is None:
                await asyncio.sleep(0.3)
                target.start()
        elif fault == "watch-lag":
            # the operator's cluster-wide watch of the kind is held (its namespaced one is
            # not): cut it, and its re-watch hangs until the fault heals
            assert self.adapter.lag_kind is not None, f"{self.adapter.name}: no lag_kind"
            res = self.adapter.lag_kind.plural
            await self._until_watching(res)
            # (its relists too: a reflector that finds its watch silent lists again)
            lag = px.add_rule(
                Hang(), client=ops, verb={"list", "watch"}, resource=res, namespace=""
            )
            self.rules.append(lag)
            for client in ops:
                px.cut_watches(client=client, resource=res)
        elif fault == "meddle":
            # the operator's own writes of the objects (not their status) take a moment
            # to arrive, as on a loaded apiserver: a meddler's write lands in between
            res = self.adapter.meddle_kind.plural
            writes = {"update", "patch"}
            self.rules.append(
                px.add_rule(
                    Delay(MEDDLE_DELAY_S), client=ops, verb=writes, resource=res, subresource=""
                )
            )
            for scope in self.scopes:
                for i in range(MEDDLERS):
                    self.meddlers.append(asyncio.create_task(self._meddle(scope, i)))
                self.meddlers.append(asyncio.create_task(self._unwind(scope)))
        elif fault == "apiserver-restart":
            await self.w.blocking(self.w.cp.restart_apiserver)
        elif fault == "etcd-restart":
            await self.w.blocking(self.w.cp.restart_etcd)
        elif fault in cache_faults.FAULTS:
            await cache_faults.strike(self)

    async def _until_watching(self, resource: str) -> None:
        """Wait (up to 60 s) until every operator watches ``resource`` cluster-wide: its
        informer has listed and synced, so the held watch makes it lag, not stall."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            open_ = [
                e
                for c in self.clients
                for e in self.w.proxy.open_watches(c)
                if e.resource == resource and not e.namespace
            ]
            if {e.client for e in open_} >= self.clients:
                return
            await asyncio.sleep(0.1)
        self.outcome.notes.append(f"the operators never watched {resource} cluster-wide")

    async def _meddle(self, scope: Scope, writer: int) -> None:
        """Another writer of the scope's objects: change an annotation on each, again and
        again, with merge patches (no resourceVersion: they always land), so every write
        of the operator that is guarded by the resourceVersion it read (a finalizer's
        JSON patch ``test``, an update) has a fair chance of losing the race."""
        res, ns = self.adapter.meddle_kind, self.adapter.scope_namespace(scope)
        n = 0
        while True:
            listed = await self.w.user.list(res, ns, label_selector=scope.selector)
            for obj in listed["items"]:
                n += 1
                body = {"metadata": {"annotations": {MEDDLE_KEY: f"{writer}-{n}"}}}
                with contextlib.suppress(NotFound):
                    await self.w.user.patch(res, obj["metadata"]["name"], body, ns)
            await asyncio.sleep(0)

    async def _unwind(self, scope: Scope) -> None:
        """The meddler as a controller finishing its own cleanup: from each object being
        deleted, remove the first of its finalizers, one every ``MEDDLE_UNWIND_S``, so the
        index of the operator's finalizer changes under the operator's own remove."""
        res, ns = self.adapter.meddle_kind, self.adapter.scope_namespace(scope)
        while True:
            listed = await self.w.user.list(res, ns, label_selector=scope.selector)
            for obj in listed["items"]:
                meta = obj["metadata"]
                mine = [f for f in meta.get("finalizers") or [] if f in MEDDLE_FINALIZERS]
                if not meta.get("deletionTimestamp") or not mine:
                    continue
                with contextlib.suppress(NotFound, Invalid, Conflict):
                    await remove_finalizer(self.w.user, res, obj, mine[0])
            await asyncio.sleep(MEDDLE_UNWIND_S)

    async def _stop_meddling(self) -> None:
        for task in self.meddlers:
            task.cancel()
        ended = await asyncio.gather(*self.meddlers, return_exceptions=True)
        self.meddlers.clear()
        # a meddler that died early meddled less: say so (the scenario still counts)
        self.outcome.notes += [
            f"a meddler stopped early: {e!r}"
            for e in ended
            if isinstance(e, BaseException) and not isinstance(e, asyncio.CancelledError)
        ]
        # what the fault did, from the proxy's log: the operator's writes of that kind
        # the apiserver refused as lost races (409 Conflict, 422 failed JSON-patch test)
        lost = [
            e
            for e in self.w.proxy.log.writes(ok=False)
            if e.client in self.clients
            and e.resource == self.adapter.meddle_kind.plural
            and e.status in (409, 422)
        ]
        failed_tests = sum(e.status == 422 for e in lost)
        self.outcome.notes.append(
            f"meddled: the operator lost {len(lost)} write races "
            f"({failed_tests} of them JSON patches whose test failed)"
        )
        # take the annotation and the finalizers away again, so the end state is the
        # workload's alone (guarded by the resourceVersion: the operator still writes)
        res = self.adapter.meddle_kind
        for scope in self.scopes:
            ns = self.adapter.scope_namespace(scope)
            listed = await self.w.admin.list(res, ns, label_selector=scope.selector)
            for obj in listed["items"]:
                name = obj["metadata"]["name"]
                with contextlib.suppress(NotFound):
                    await retry_on_conflict(functools.partial(self._unmeddle, res, name, ns))

    async def _unmeddle(self, res: Resource, name: str, ns: str | None) -> None:
        meta = (await self.w.admin.get(res, name, ns))["metadata"]
        finalizers = meta.get("finalizers") or []
        kept = [f for f in finalizers if f not in MEDDLE_FINALIZERS]
        body: dict[str, Any] = {"resourceVersion": meta["resourceVersion"]}
        if MEDDLE_KEY in (meta.get("annotations") or {}):
            body["annotations"] = {MEDDLE_KEY: None}
        if kept != finalizers:
            body["finalizers"] = kept
        if len(body) > 1:
            await self.w.admin.patch(res, name, {"metadata": body}, ns)

    async def heal(self) -> None:
        if self.scn.fault.startswith("partition") and self.leader is not None:
            await self._until_standby_writes()
        elif self.rules or self.meddlers:
            await asyncio.sleep(FAULT_S)
        if self.scn.fault == "watch-lag":
            stuck: list[str] = []
            for scope in self.scopes:
                stuck += await self.adapter.mismatches(self.w, scope)
            self.outcome.stuck_behind_lag = len(stuck)
            self.outcome.notes += [f"behind the held watch: {m}" for m in stuck[:5]]
        if self.scn.fault in cache_faults.FAULTS:
            await cache_faults.at_heal(self)
        if self.meddlers:
            await self._stop_meddling()
        for rule in self.rules:
            if rule.label == "partition":
                self.w.proxy.heal(rule)
            else:
                self.w.proxy.remove_rule(rule)
        if self.scn.fault == "watch-lag":
            # what the fault did, from the proxy's log (a held watch is logged when it
            # ends: the rule's removal resets it)
            await asyncio.sleep(0.5)
            held = {r.id for r in self.rules}
            n = len([e for e in self.w.proxy.log.entries() if e.rule in held])
            self.outcome.notes.append(f"watch-lag: {n} cluster-wide watches held")
        self.rules.clear()

    async def _until_standby_writes(self) -> None:
        """Keep the leader partitioned until its standby has written (or 60 s)."""
        assert self.leader is not None
        standby = {r.client for r in self.replicas} - {self.leader.client}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(self._object_writes(clients=standby)):
                break
            await asyncio.sleep(0.2)
        else:
            self.outcome.notes.append("the standby made no write while the leader was cut off")
        await asyncio.sleep(1.0)

    # -- the workload -------------------------------------------------------------------
    async def workload(self) -> None:
        moment = self.scn.moment
        if moment == "start":
            await self.strike()
        for scope in self.scopes:
            await self.adapter.create(self.w, scope)
        if moment == "create":
            await self.strike()
        if self.scn.fault == "none" or (self.scn.fault == "meddle" and moment == "update"):
            # (the meddler's finalizers must be ahead of the operator's on the object the
            # update deletes: the operator's must be there before it strikes)
            await self._acted_on_creates()
        else:
            await asyncio.sleep(self.rng.uniform(0.3, 1.0))  # let the operators get going
        for scope in self.scopes:
            await self.adapter.update(self.w, scope)
        if moment == "update":
            await self.strike()
        await self.heal()

    async def _acted_on_creates(self) -> None:
        deadline = time.monotonic() + CONVERGE_S
        for scope in self.scopes:
            while not await self.adapter.acted_on_creates(self.w, scope):
                if time.monotonic() > deadline:
                    self.outcome.notes.append("the creates were not acted on in time")
                    return
                await asyncio.sleep(0.2)

    # -- oracles ----------------------------------------------------------------------------
    def _object_writes(self, clients: set[str] | None = None) -> list[Any]:
        who = clients or self.clients
        return [
            e
            for e in self.w.proxy.log.writes()
            if e.client in who and (e.resource or "") not in NOT_OBJECT_WRITES
        ]

    async def converge(self, recorder: WatchRecorder | None) -> None:
        async def check() -> list[str]:
            try:
                out: list[str] = []
                for scope in self.scopes:
                    out += await self.adapter.mismatches(self.w, scope)
                return out
            except Exception as err:  # the apiserver restarting: not matched yet
                return [f"check failed: {err!r}"]

        try:
            stable = await eventually_stable(
                check, within=CONVERGE_S, stable_for=STABLE_S, recorder=recorder
            )
            self.outcome.converged = True
            self.outcome.notes.append(f"converged after {stable.converged_after:.1f}s")
        except NotStable as err:
            self.outcome.notes.append(str(err).splitlines()[0])
            self.outcome.notes += [f"  {m}" for m in err.mismatches[:10]]
            if err.broke:
                # A violation already (converged stays False), but let it settle before
                # the loss counters are read, so they describe where it ends, not a flap.
                try:
                    await eventually_stable(
                        check, within=CONVERGE_S, stable_for=STABLE_S, recorder=recorder
                    )
                    self.outcome.notes.append("settled again afterwards")
                except NotStable as again:
                    self.outcome.notes.append(f"never settled: {str(again).splitlines()[0]}")

    def split_brain(self) -> None:
        writes = self._object_writes()
        if self.scn.topology == "leader-pair" and self.leader is not None:
            old = self.leader.client
            late = writes_after_handover(writes, old)
            self.outcome.split_brain_writes += len(late)
            if late:
                self.outcome.notes += _handover_story(writes, old, late)
            self.outcome.notes.append(f"old leader exit code: {self.leader.exit_code()}")
        if self.scn.topology == "two-instances":
            for i, scope in enumerate(self.scopes):
                mine = {r.client for r in self.replicas if r.client.endswith(f"-{i}0")}
                other = self.scopes[1 - i]

                def not_the_others(e: LogEntry, other: Scope = other) -> bool:
                    return not self.adapter.in_scope(other, e.namespace, e.name)

                cross = writes_outside(writes, mine, not_the_others)
                self.outcome.split_brain_writes += len(cross)
                for e in cross[:5]:
                    self.outcome.notes.append(
                        f"instance of {scope.namespace} wrote {e.verb} {e.resource}/"
                        f"{e.namespace}/{e.name} (scope of {other.namespace})"
                    )

    async def record(self) -> RunRecord:
        objects: dict[ObjectKey, Any] = {}
        ops: dict[ObjectKey, OpCount] = {}
        for i, scope in enumerate(self.scopes):
            state = await self.adapter.snapshot(self.w, scope)
            for (res, _, name), obj in state.objects.items():
                objects[(res, str(i), name)] = obj
            for (res, _, name), count in self.adapter.creates_deletes(self.w, scope).items():
                ops[(res, str(i), name)] = count
        return RunRecord(State(objects), ops)

    async def judge(self) -> None:
        for scope in self.scopes:
            losses = await self.adapter.losses(self.w, scope)
            self.outcome.lost_updates += losses.lost_updates
            self.outcome.duplicate_vms += losses.duplicate_vms
            self.outcome.leaked_vms += losses.leaked_vms
            missing = await self.adapter.unfinalized(self.w, scope)
            self.outcome.unfinalized += len(missing)
            self.outcome.notes += [f"{name}: live without its finalizer" for name in missing]
            overlaps = self.adapter.overlaps(self.w, scope)
            self.outcome.overlapping_reconciles += len(overlaps)
            self.outcome.notes += overlaps[:5]
            self.outcome.notes += list(losses.notes)
            harm = await self.adapter.harm(self.w, scope)
            self.outcome.pdb_breaches += harm.pdb_breaches
            self.outcome.pods_lost += harm.pods_lost
            self.outcome.left_tainted += harm.left_tainted
            self.outcome.notes += list(harm.notes)
        self.split_brain()
        if self.adapter.name == "pack":
            cache_faults.judge(self)
        record = await self.record()
        if self.scn == self.scn.reference and self.scn not in self.refs:
            # a fault-free run that went wrong is no reference: the scenarios of its
            # topology then go without the differential check (and say so)
            self.refs[self.scn] = record if self.outcome.clean else None
        reference = self.refs.get(self.scn.reference)
        if reference is None:
            self.outcome.notes.append("no (clean) reference run: differential check skipped")
        elif self.outcome.converged:
            diffs = [d for d in compare_runs(reference, record) if _counts(d)]
            self.outcome.differences = len(diffs)
            self.outcome.notes += [f"differs: {d}" for d in diffs[:10]]

    def _tails(self) -> str:
        return "\n".join(f"--- {r.client}\n{r.log_tail(15)}" for r in self.replicas)

    async def run(self) -> Outcome:
        started = time.monotonic()
        self.w.proxy.log.clear()
        await self.setup()
        async with contextlib.AsyncExitStack() as vms:
            if isinstance(self.adapter, NodePoolOperator):  # the draining ones too
                # The VMs' side, as on a real cloud: their kubelets register the Nodes
                # (kwok runs them). Beside the operator processes, not inside them, so a
                # killed or partitioned operator leaves its VMs running; straight to the
                # apiserver, not through the proxy (the faults are the operator's).
                config = load_kubeconfig(self.w.cp.kubeconfig)
                for scope in self.scopes:
                    await vms.enter_async_context(simulated_vms(config, scope.cloud()))
            return await self._run(started)

    async def _run(self, started: float) -> Outcome:
        recorders: list[WatchRecorder] = []
        watches: list[GenerationWatch] = []
        try:
            for scope in self.scopes:
                for res in self.adapter.generation_kinds:
                    rec = WatchRecorder(
                        self.w.admin,
                        [res],
                        namespace=None if self.adapter.cluster_scoped else scope.namespace,
                        label_selector=scope.selector if self.adapter.cluster_scoped else None,
                    )
                    await rec.start()
                    recorders.append(rec)
                    watches.append(GenerationWatch(rec))
                child = self.adapter.child_watch(scope)
                if child is not None:
                    res, ns, selector = child
                    scope.children = WatchRecorder(
                        self.w.admin, [res], namespace=ns, label_selector=selector
                    )
                    await scope.children.start()
                    recorders.append(scope.children)
            await self.start()
            await self.workload()
            await self.converge(recorders[0] if recorders else None)
            await self.judge()
        except Exception:
            # a harness error (a workload step that never happened): the operators' side
            log.error(
                "scenario %s broke off; the operators' last lines:\n%s", self.scn.id, self._tails()
            )
            raise
        finally:
            for task in self.meddlers:
                task.cancel()
            for r in self.replicas:
                r.kill()
            for scope in self.scopes:
                await self.adapter.close(self.w, scope)
            for rec in recorders:
                with contextlib.suppress(AssertionError):
                    await rec.stop()
        for gw in watches:
            self.outcome.observed_generation_regressions += len(gw.regressions)
            self.outcome.notes += gw.regressions[:5]
        if not self.outcome.clean:
            self.outcome.notes.append(self._tails())
        self.outcome.seconds = round(time.monotonic() - started, 1)
        return self.outcome


def _counts(d: Difference) -> bool:
    """Whether a difference from the reference counts. Fewer creates or deletes than
    the reference is not one: a child the user deleted before the (cut off, killed)
    operator got to it was never needed. More is (Sieve's deleted-and-re-created)."""
    if d.kind in ("creates", "deletes"):
        return int(d.faulty or 0) > int(d.reference or 0)
    return True


async def run_scenario(w: World, scn: Scenario, references: References) -> Outcome:
    """Run ``scn`` (its fault-free reference first, if there is none yet)."""
    if scn.fault != "none" and scn.reference not in references:
        await Run(w, scn.reference, references).run()
    return await Run(w, scn, references).run()


async def main_async(args: argparse.Namespace) -> int:
    if args.only:
        scenarios = [Scenario.parse(s) for s in args.only]
    elif args.disruption:
        scenarios = disruption()
    else:
        scenarios = quick() if args.quick else full()
    references: References = {}
    outcomes: list[Outcome] = []
    sink = Path(args.jsonl) if args.jsonl else None
    if sink is not None:
        sink.parent.mkdir(parents=True, exist_ok=True)
        sink.write_text("")
    async with world(seed=args.seed) as w:
        for i, scn in enumerate(scenarios, 1):
            try:
                outcome = await run_scenario(w, scn, references)
            except Exception as err:  # a harness failure is a failed scenario, not a crash
                log.exception("scenario %s failed to run", scn.id)
                outcome = Outcome(scn.id, notes=[f"harness error: {err!r}"])
            outcomes.append(outcome)
            mark = "ok " if outcome.clean else "BAD"
            print(f"[{i}/{len(scenarios)}] {mark} {outcome.explain()}", file=sys.stderr)
            if sink is not None:
                with sink.open("a") as f:
                    f.write(json.dumps(asdict(outcome)) + "\n")
    print(json.dumps(summarise(outcomes)))
    return 0 if all(o.clean for o in outcomes) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the make test subset")
    parser.add_argument("--only", action="append", help="a scenario id (repeatable)")
    parser.add_argument("--disruption", action="store_true", help="the drain paths only")
    parser.add_argument("--jsonl", help="also write one JSON line per scenario here")
    parser.add_argument("--seed", type=int, default=0, help="the fault proxy's seed")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
