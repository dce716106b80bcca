"""A controller: sources feed a workqueue, workers run the reconciler.

``_reconcile_one`` is the one function that decides what happens after a
reconcile (forget, requeue after a delay, back off, or give up), so the requeue
policy lives in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kubeloop import _log, _metrics
from kubeloop._errors import (
    ApiError,
    ErrorClass,
    KubeloopError,
    NotFound,
    TerminalError,
    classify,
)
from kubeloop._event import Deleted, Event, Updated
from kubeloop._informer import Cache
from kubeloop._loopdetect import LoopDetectionOptions, LoopDetector
from kubeloop._reconcile import Reconciler, Request, Result
from kubeloop._resource import Object, Resource
from kubeloop._source import KindSource, Source
from kubeloop._status import set_status_condition
from kubeloop._store import split_key
from kubeloop._workqueue import QueueShutDown, WorkQueue

if TYPE_CHECKING:
    from kubeloop._backoff import RateLimiter
    from kubeloop._metrics import RuntimeMetrics

log = logging.getLogger("kubeloop.controller")

#: Reconcile ids (``reconcileID`` in the logs): 12 hex digits, a random prefix per
#: process and a counter, unique within a process and unlikely to repeat across its
#: replicas; a uuid4 per reconcile cost more than the rest of the id's bookkeeping.
_ID_PREFIX = secrets.token_hex(2)
_RECONCILE_IDS = itertools.count()


class EventSink(Protocol):
    """What a controller needs from an event recorder."""

    def warning(self, obj: Object, reason: str, message: str, *, action: str = "") -> None: ...


@dataclass
class ControllerOptions:
    """How a controller runs. Every default matches controller-runtime's unless noted."""

    #: Workers reconciling different objects at once (default 1). One object is
    #: never reconciled by two workers at once, whatever this is.
    max_concurrent_reconciles: int = 1
    #: Seconds before a reconcile is cancelled and retried with backoff (default: none).
    reconcile_timeout: float | None = None
    #: Safety-net resync: every object of the ``for_`` kind is reconciled this often,
    #: bypassing predicates (default 10 h, controller-runtime's SyncPeriod). None disables.
    resync_period: float | None = 10 * 3600.0
    #: Per-item backoff for failures (default: max of 5 ms..1000 s exponential, 10 qps/100 burst).
    rate_limiter: RateLimiter[Request] | None = None
    #: Loop detection (default on, 5 self-triggered reconciles in a row). None disables.
    loop_detection: LoopDetectionOptions | None = field(default_factory=LoopDetectionOptions)
    #: On a terminal error, also set this status condition to False with the error's
    #: reason and message, so ``kubectl get`` (a printer column on it) shows why the
    #: object is stuck. Default ``"Ready"``, kopf's and most operators' summary condition.
    #: Written on custom resources only (built-in kinds' conditions belong to their own
    #: controllers) and only through the status subresource: a kind without one gets the
    #: Warning Event alone. None: the Event alone.
    terminal_error_condition: str | None = "Ready"
    #: Only run while this manager holds the leader lease (default True).
    need_leader_election: bool = True


class Controller:
    """Runs ``reconciler`` for requests produced by ``sources``."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        sources: Sequence[Source],
        for_resource: Resource | None = None,
        options: ControllerOptions | None = None,
        metrics: RuntimeMetrics | None = None,
        recorder: EventSink | None = None,
    ) -> None:
        from kubeloop._backoff import default_controller_rate_limiter
        from kubeloop._metrics import RuntimeMetrics

        self.name = name
        self.reconciler = reconciler
        self.sources = list(sources)
        self.for_resource = for_resource
        self.options = options or ControllerOptions()
        self.metrics = metrics or RuntimeMetrics()
        self.recorder = recorder
        self.queue: WorkQueue[Request] = WorkQueue(
            name=name,
            rate_limiter=self.options.rate_limiter or default_controller_rate_limiter(),
            metrics=self.metrics,
        )
        self.loops = (
            LoopDetector(
                self.options.loop_detection,
                self._on_loop,
                on_fight=self._on_fight,
                primary_kind=(for_resource.group, for_resource.kind) if for_resource else None,
            )
            if self.options.loop_detection
            else None
        )
        self._background: set[asyncio.Task[None]] = set()
        # requests whose terminal-error condition is being written: the status-only
        # update that write causes must not bring the request back (see enqueue)
        self._terminal_writes: set[Request] = set()
        self.fights_detected = 0
        self._cache: Cache | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._sources_started = False
        # (API group, kind) of every kind a source watches, once they are started
        self._watched_kinds: frozenset[tuple[str, str | None]] | None = None
        self._resync: asyncio.Task[None] | None = None
        self._active = 0
        self.reconciles = 0
        self.loops_detected = 0
        # this controller's series, looked up once: the hot path only increments them
        m = self.metrics
        self._m_active = m.active_workers.labels(controller=name)
        self._m_time = m.reconcile_time_seconds.labels(controller=name)
        self._m_errors = m.reconcile_errors_total.labels(controller=name)
        self._m_panics = m.reconcile_panics_total.labels(controller=name)
        self._m_timeouts = m.reconcile_timeouts_total.labels(controller=name)
        self._m_results = {
            r: m.reconcile_total.labels(controller=name, result=r)
            for r in ("success", "error", "requeue", "requeue_after")
        }
        self.metrics.max_concurrent_reconciles.labels(controller=name).set(
            self.options.max_concurrent_reconciles
        )

    # -- intake -----------------------------------------------------------------------
    def enqueue(self, req: Request, event: Event | None = None) -> None:
        if req in self._terminal_writes and self._status_only(event):
            # our own Ready=False after a terminal error: "not retried until the object
            # changes" holds for the write that reports it, too
            self._terminal_writes.discard(req)
            return
        if self.loops is not None:
            if self._is_own_deletion(req, event):
                assert event is not None
                self.loops.forget(req, event.obj)  # nothing left to loop on; free its bookkeeping
            else:
                self.loops.enqueued(req, event)
        self.queue.add(req)

    def _is_own_deletion(self, req: Request, event: Event | None) -> bool:
        if not isinstance(event, Deleted) or self.for_resource is None:
            return False
        meta = event.obj.get("metadata", {})
        return (
            event.obj.get("kind") == self.for_resource.kind
            and meta.get("name") == req.name
            and (meta.get("namespace") or None) == req.namespace
        )

    def _status_only(self, event: Event | None) -> bool:
        """An update of a ``for_`` object that changed nothing but its status."""
        if not isinstance(event, Updated) or self.for_resource is None:
            return False
        if event.new.get("kind") != self.for_resource.kind:
            return False
        old, new = event.old.get("metadata", {}), event.new.get("metadata", {})
        keys = ("generation", "labels", "annotations", "finalizers", "deletionTimestamp")
        return all(old.get(k) == new.get(k) for k in keys)

    def own_write(self, obj: Object) -> None:
        """Tell loop detection about a write this controller made (any object, any
        subresource): its own objects and their children alike. Not about a kind none
        of its sources watches: no event of it can come back, so nothing to remember."""
        if self.loops is None:
            return
        kinds = self._watched_kinds
        if kinds is not None:
            group = str(obj.get("apiVersion") or "").rpartition("/")[0]
            if (group, obj.get("kind")) not in kinds:
                return
        self.loops.own_write(obj)

    # -- lifecycle --------------------------------------------------------------------
    async def start(self, cache: Cache) -> None:
        """Start sources and wait for their caches; then start the workers."""
        await self.start_sources(cache)
        await self.start_workers()

    async def start_sources(self, cache: Cache) -> None:
        """Start the sources and wait for their caches, without reconciling anything.

        A standby calls this before it holds the lease (controller-runtime's warm-up):
        its informers list and watch, events collect in the queue, and on failover the
        workers start on a warm cache instead of listing everything again.
        """
        self._cache = cache
        if not self._sources_started:
            self._sources_started = True
            self._watched_kinds = frozenset(
                (src.resource.group, src.resource.kind)
                for src in self.sources
                if isinstance(src, KindSource)
            )
            for source in self.sources:
                await source.start(cache, self.enqueue)
        await cache.wait_for_sync()

    async def start_workers(self) -> None:
        """Start the workers (and the resync timer); the sources must have been started."""
        if self._workers:
            return
        n = self.options.max_concurrent_reconciles
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._worker(), name=f"{self.name} worker {i}") for i in range(n)
        ]
        if self.options.resync_period and self.for_resource is not None:
            self._resync = loop.create_task(self._resync_loop(self.options.resync_period))
        log.info("controller started", extra={"controller": self.name, "workers": n})

    def dead_workers(self) -> str | None:
        """None while every started worker is alive; else what died (for /healthz)."""
        dead = [t for t in self._workers if t.done()]
        if not dead:
            return None
        reasons = []
        for task in dead:
            err = None if task.cancelled() else task.exception()
            reasons.append(f"{task.get_name()}: {'cancelled' if err is None else repr(err)}")
        return f"{len(dead)} of {len(self._workers)} workers dead ({'; '.join(reasons)})"

    async def shutdown(self, grace: float = 30.0) -> None:
        """Stop taking work; let in-flight reconciles finish within ``grace`` seconds
        (0: cancel them at once, as on a lost lease)."""
        self.queue.shutdown(drop_queued=True)
        for source in self.sources:
            await source.stop()
        if self._resync is not None:
            self._resync.cancel()
        if self._workers:
            pending = {t for t in self._workers if not t.done()}
            if grace > 0 and pending:
                _, pending = await asyncio.wait(pending, timeout=grace)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if pending:
                log.warning(
                    "reconciles cancelled" + (" after the grace period" if grace > 0 else ""),
                    extra={"controller": self.name, "cancelled": len(pending)},
                )
        self._workers = []

    async def _resync_loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            for src in self.sources:
                if isinstance(src, KindSource) and src.resource == self.for_resource:
                    # every informer: a manager scoped to several namespaces has one each
                    # keys only: the store decodes an object on every read
                    for informer in src.informers:
                        for key in list(informer.store):
                            namespace, name = split_key(key)
                            self.enqueue(Request(name, namespace), None)

    # -- work ---------------------------------------------------------------------------
    async def _worker(self) -> None:
        """Take requests until the queue shuts down. Never dies of what a reconcile
        does: only its own cancellation ends it."""
        while True:
            try:
                req = await self.queue.get()
            except QueueShutDown:
                return
            try:
                await self._reconcile_one(req)
            except asyncio.CancelledError:
                if _cancelling():
                    raise
                log.error("stray cancellation in the requeue policy; worker continues")
            except Exception:  # a bug in the policy code: log it, keep the worker
                log.exception("reconcile bookkeeping failed; worker continues")
            finally:
                self.queue.done(req)

    async def _reconcile_one(self, req: Request) -> None:
        """Run one reconcile and apply the requeue policy.

        Raises nothing but the worker's own cancellation: a reconciler that raises
        anything else (a stray ``CancelledError`` of a task it awaited, ``SystemExit``,
        ``KeyboardInterrupt``) is an error retried with backoff.
        """
        rid = f"{_ID_PREFIX}{next(_RECONCILE_IDS) & 0xFFFFFFFF:08x}"
        tokens = (
            _log.CONTROLLER.set(self.name),
            _log.OBJECT.set(str(req)),
            _log.RECONCILE_ID.set(rid),
        )
        m = self.metrics
        metrics_token = _metrics.CURRENT.set(m)
        if self.loops is not None and self.loops.starting(req):
            m.self_triggered_reconciles_total.labels(controller=self.name).inc()
        self._active += 1
        self._m_active.set(self._active)
        started = time.monotonic()
        outcome = "success"
        result = Result()
        error: BaseException | None = None
        try:
            try:
                if self.options.reconcile_timeout is None:  # no timeout: no cancel scope
                    result = await self.reconciler(req) or Result()
                else:
                    result = await self._reconcile_within(req, self.options.reconcile_timeout)
            except asyncio.CancelledError as err:
                if _cancelling():
                    outcome = "error"
                    raise  # the worker itself is being stopped
                error = err
            except BaseException as err:
                error = err
            if error is not None:
                outcome = "error"
                self._on_error(req, error)
                if classify(error) is ErrorClass.TERMINAL:
                    await self._report_terminal(req, error)
            elif result.requeue_after is not None and result.requeue_after > 0:
                outcome = "requeue_after"
                self.queue.forget(req)
                self.queue.add_after(req, result.requeue_after)
            elif result.requeue:
                outcome = "requeue"
                self.queue.add_rate_limited(req)
            else:  # including requeue_after <= 0, as controller-runtime
                self.queue.forget(req)
        finally:
            self._active -= 1
            self._m_active.set(self._active)
            elapsed = time.monotonic() - started
            self._m_time.observe(elapsed)
            self._m_results[outcome].inc()
            self.reconciles += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug("reconcile done", extra={"result": outcome, "seconds": round(elapsed, 4)})
            for var, token in zip(
                (_log.CONTROLLER, _log.OBJECT, _log.RECONCILE_ID), tokens, strict=True
            ):
                var.reset(token)
            _metrics.CURRENT.reset(metrics_token)

    async def _reconcile_within(self, req: Request, timeout: float) -> Result:
        """The reconciler, cancelled after ``timeout`` seconds (a TimeoutError saying so)."""
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self.reconciler(req) or Result()
        except TimeoutError as err:
            if not deadline.expired():
                raise  # the reconciler's own timeout, not ours
            self._m_timeouts.inc()
            raise TimeoutError(f"reconcile exceeded its timeout of {timeout}s") from err

    def _on_error(self, req: Request, err: BaseException) -> None:
        """The error half of the requeue policy: give up only on a terminal error."""
        self._m_errors.inc()
        panic = _is_panic(err)
        if panic:
            self._m_panics.inc()
        if classify(err) is ErrorClass.TERMINAL:
            self.metrics.terminal_reconcile_errors_total.labels(controller=self.name).inc()
            self.queue.forget(req)
            log.error("reconcile failed permanently; not retrying: %s", err)
            return
        self.queue.add_rate_limited(req)
        log.warning(
            "reconcile %s; retrying with backoff: %s",
            "crashed" if panic else "failed",
            f"{type(err).__name__}: {err}" if panic else err,
            exc_info=err if panic else None,
            extra={"retries": self.queue.num_requeues(req)},
        )

    async def _current(self, req: Request) -> Object | None:
        if self._cache is None or self.for_resource is None:
            return None
        # Read through the for_ source's own scope: an unscoped read would start a
        # cluster-wide informer of the kind just to name the object in an Event.
        selector = next(
            (
                src.label_selector
                for src in self.sources
                if isinstance(src, KindSource) and src.resource == self.for_resource
            ),
            None,
        )
        with contextlib.suppress(Exception):
            return await self._cache.get(
                self.for_resource, req.name, req.namespace, label_selector=selector
            )
        return None

    async def _report_terminal(self, req: Request, err: BaseException) -> None:
        """A failure retrying cannot fix: a Warning Event, and (if configured) a condition."""
        obj = await self._current(req)
        if obj is None:
            return
        reason = err.reason if isinstance(err, ApiError | TerminalError) else type(err).__name__
        message = f"{self.name}: {err}"[:1024]
        if self.recorder is not None:
            self.recorder.warning(obj, reason, message, action="Reconcile")
        cond = self.options.terminal_error_condition
        resource = self.for_resource
        if cond and self._cache is not None and resource is not None and _custom(resource):
            generation = obj.get("metadata", {}).get("generation")
            self._terminal_writes.add(req)
            try:
                written = await set_status_condition(
                    self._cache.client,
                    resource,
                    obj,
                    cond,
                    "False",
                    reason,
                    message,
                    observed_generation=generation if isinstance(generation, int) else None,
                )
            except NotFound:  # no status subresource (or the object just went)
                self._terminal_writes.discard(req)
                log.debug("no status to record the %s condition in", cond)
            except Exception as write_err:  # best effort: the Event already says it
                self._terminal_writes.discard(req)
                log.warning("could not record the %s condition: %s", cond, write_err)
            else:
                rv = obj.get("metadata", {}).get("resourceVersion")
                if written.get("metadata", {}).get("resourceVersion") == rv:
                    self._terminal_writes.discard(req)  # already so: nothing was written

    def _on_loop(self, req: Request, obj: Object, fields: list[str]) -> None:
        self.loops_detected += 1
        self.metrics.reconcile_loops_detected_total.labels(controller=self.name).inc()
        what = ", ".join(fields) if fields else "status or metadata"
        message = (
            f"controller {self.name} keeps reconciling {req} because of its own writes "
            f"(no generation change); the field that keeps changing: {what}. "
            "Filter such events with the generation_changed predicate, or stop writing "
            "a value that changes on every reconcile."
        )
        log.warning("reconcile loop detected: %s", message, extra={"fields": fields})
        self._warn(req, obj, "ReconcileLoop", message)

    def _on_fight(self, req: Request, obj: Object, path: str, managers: tuple[str, str]) -> None:
        self.fights_detected += 1
        self.metrics.spec_fights_detected_total.labels(controller=self.name).inc()
        kind, name = obj.get("kind", ""), obj.get("metadata", {}).get("name", "")
        message = (
            f"{kind} {name}: {path} keeps being set back and forth by field managers "
            f"{managers[0]} and {managers[1]}; two writers disagree on it. Decide which "
            "one owns the field (see metadata.managedFields)."
        )
        log.warning(
            "spec fight detected: %s",
            message,
            extra={"field": path, "managers": list(managers), "controller": self.name},
        )
        self._warn(req, obj, "SpecFight", message)

    def _warn(self, req: Request, obj: Object, reason: str, message: str) -> None:
        """A Warning Event about the reconciled object (looked up if ``obj`` is a child)."""
        if self.recorder is None:
            return
        primary = self.for_resource
        if obj and (primary is None or obj.get("kind") == primary.kind):
            self.recorder.warning(obj, reason, message, action="Reconcile")
            return

        async def about_owner() -> None:
            owner = await self._current(req)
            if owner is not None and self.recorder is not None:
                self.recorder.warning(owner, reason, message, action="Reconcile")

        task = asyncio.get_running_loop().create_task(about_owner())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _cancelling() -> bool:
    """Whether the running task has been asked to stop (``Task.cancel``), as opposed to a
    ``CancelledError`` that escaped from some other task the reconciler awaited."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _is_panic(err: BaseException) -> bool:
    """controller-runtime's "panic": the reconciler crashed, as opposed to failing.

    API and client errors (:class:`KubeloopError`), I/O failures and timeouts are the
    world's doing; anything else (TypeError, KeyError, a stray cancellation) is a bug.
    """
    return not isinstance(err, KubeloopError | OSError | TimeoutError)


def _custom(resource: Resource) -> bool:
    """A custom resource's group has a dot and is not one of Kubernetes' own (*.k8s.io)."""
    return "." in resource.group and not resource.group.endswith(".k8s.io")
