"""The manager: one client, one cache, many controllers, one process.

It owns start-up order (endpoints, caches and every controller's sources,
workers of controllers that need no lease, leader election, then the leader-only
workers), shutdown order (stop intake, finish in-flight reconciles, release the
lease), and the hooks that turn every API request into metrics and every write
into read-your-writes and loop-detection bookkeeping.

A standby keeps its caches warm (controller-runtime's warm-up): informers list
and watch before the lease is won, so a failover starts workers on a synced
cache instead of listing everything again. A lost lease is not a graceful
shutdown: in-flight reconciles are cancelled at once, nothing more is written
(see :mod:`kubeloop._fence`) and :meth:`Manager.run` raises
:class:`LeaderElectionLost` so the process exits and restarts as a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubeloop import _log
from kubeloop._builder import Builder
from kubeloop._controller import Controller
from kubeloop._errors import CacheSyncTimeout
from kubeloop._fence import FencedTransport
from kubeloop._informer import Cache
from kubeloop._leader import LeaderElectionOptions, LeaderElector
from kubeloop._metrics import REGISTRY, CounterChild, HistogramChild, Registry, RuntimeMetrics
from kubeloop._recorder import EventRecorder
from kubeloop._reflector import ReflectorOptions, Transform
from kubeloop._resource import Object, Resource
from kubeloop._serving import Endpoints
from kubeloop.webhook import WebhookServer, WebhookServerOptions

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.manager")

_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "apply"})
#: Kubernetes verb -> HTTP method, the ``method`` label client-go gives rest_client_requests_total.
_HTTP_METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "apply": "PATCH",
    "delete": "DELETE",
}


class LeaderElectionLost(Exception):
    """The manager lost its lease; the process should exit and restart."""


@dataclass
class ManagerOptions:
    """How a manager runs. Defaults follow controller-runtime where it has one."""

    #: Names this manager in Events (reportingController) and the default lease name.
    name: str = "kubeloop"
    #: Take part in leader election before running controllers that need it (default off).
    leader_election: bool = False
    #: Lease name (default: ``<name>-leader``) and namespace (default ``default``).
    leader_election_id: str | None = None
    leader_election_namespace: str = "default"
    #: Lease timings (controller-runtime: 15 s / 10 s / 2 s).
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: This candidate's identity (default: ``hostname_pid``).
    identity: str | None = None
    #: ``host:port`` for /metrics; an empty host binds every interface, port 0 picks a
    #: free one; None or ``"0"`` disables. Default ``":8080"``, controller-runtime's
    #: metrics default (its kubebuilder scaffold passes ``"0"`` unless metrics are served
    #: over TLS; kubeloop serves plain HTTP, so disable it or firewall it where needed).
    metrics_bind_address: str | None = ":8080"
    #: ``host:port`` for /healthz and /readyz, as above. Default ``":8081"``, every
    #: interface: the kubelet probes the pod IP, so a loopback-only probe always fails.
    health_probe_bind_address: str | None = ":8081"
    #: Seconds in-flight reconciles get to finish on shutdown (default 30, as controller-runtime).
    graceful_shutdown_timeout: float = 30.0
    #: Seconds to wait for caches to sync before giving up (default 120).
    cache_sync_timeout: float = 120.0
    #: /readyz fails when a watch shows no life for this long (default 300 s).
    watch_stall_threshold: float = 300.0
    #: On winning the lease, an informer whose watch showed no life (event or bookmark)
    #: for this long, or that is failing, lists again before the workers start (default
    #: 90 s: the apiserver sends a bookmark about once a minute, so a healthy idle watch
    #: is never this silent). Its cache may lack what the old leader last did. A watch
    #: that went silent more recently is not caught; 0 relists every informer on every
    #: takeover (exact, at the cost of one LIST each before the workers start).
    leader_cache_max_silence: float = 90.0
    #: Handle SIGTERM/SIGINT by shutting down gracefully (default True).
    handle_signals: bool = True
    #: Informer tuning.
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)
    #: A transform per kind, in place of ``reflector.transform`` for that kind's
    #: informers (None: store the kind's objects untouched); see ``Cache.set_transform``.
    transforms: Mapping[Resource, Transform | None] = field(default_factory=dict)
    #: The namespaces this manager may see (controller-runtime's cache
    #: ``DefaultNamespaces``); default None: all. Sources without a namespace watch
    #: each of them; any informer or cache read outside them raises OutOfScope.
    namespaces: Sequence[str] | None = None
    #: Metrics registry (default: the process-wide one).
    registry: Registry = REGISTRY


class Manager:
    """Runs controllers with a shared client, cache, metrics and event recorder."""

    def __init__(self, client: Client, options: ManagerOptions | None = None) -> None:
        self.options = opts = options or ManagerOptions()
        self.client = client
        self.metrics = RuntimeMetrics(opts.registry)
        self.cache = Cache(
            client,
            options=opts.reflector,
            namespaces=opts.namespaces,
            transforms=opts.transforms,
        )
        self.recorder = EventRecorder(client, reporting_controller=opts.name)
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.endpoints = Endpoints(
            opts.registry.render,
            healthz={
                "ping": lambda: None,
                "workers": self._workers_check,
                "informers": self._informers_check,
                "leader-election": self._elector_check,
            },
            readyz={"informers-synced": self._synced_check, "watches": self._stall_check},
        )
        #: the webhook server, if :meth:`webhook_server` was called; runs on every replica
        self.webhooks: WebhookServer | None = None
        self._stop = asyncio.Event()
        self._request_series: dict[tuple[int, str], CounterChild] = {}
        self._latency_series: dict[str, HistogramChild] = {}
        # (controller, verb, resource key, subresource) -> its api_writes_total series
        self._write_series: dict[tuple[str, str, str, str], CounterChild] = {}
        self._elector_task: asyncio.Task[None] | None = None
        self._fence: FencedTransport | None = None
        # built (and its timings checked) now, so a bad configuration fails at start-up
        self._election = self._election_options() if opts.leader_election else None
        client.add_observer(self)

    def _election_options(self) -> LeaderElectionOptions:
        opts = self.options
        return LeaderElectionOptions(
            name=opts.leader_election_id or f"{opts.name}-leader",
            namespace=opts.leader_election_namespace,
            identity=opts.identity or f"{socket.gethostname()}_{os.getpid()}",
            lease_duration=opts.lease_duration,
            renew_deadline=opts.renew_deadline,
            retry_period=opts.retry_period,
        )

    # -- wiring ---------------------------------------------------------------------
    def controller(self, name: str) -> Builder:
        """Start building a controller (finish with ``.complete(reconciler)``)."""
        return Builder(self, name)

    def add(self, controller: Controller) -> None:
        if any(c.name == controller.name for c in self.controllers):
            raise ValueError(f"a controller named {controller.name!r} is already registered")
        self.controllers.append(controller)

    def webhook_server(self, options: WebhookServerOptions | None = None) -> WebhookServer:
        """The manager's webhook server (created by the first call, with ``options``),
        started by :meth:`run` with the endpoints on every replica, leader or not, and
        checked by /readyz."""
        if self.webhooks is None:
            self.webhooks = WebhookServer(options, registry=self.options.registry)
            self.endpoints.readyz["webhook"] = self.webhooks.started_check
        elif options is not None and options is not self.webhooks.options:
            raise ValueError("the webhook server already exists with other options")
        return self.webhooks

    # -- client hooks ---------------------------------------------------------------
    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        """Every API request: rest_client_requests_total, and writes per controller."""
        key = (code, verb)
        child = self._request_series.get(key)
        if child is None:  # one lookup per (code, verb), not per request
            child = self._request_series[key] = self.metrics.rest_client_requests_total.labels(
                code=str(code) if code else "<error>",
                method=_HTTP_METHODS.get(verb, verb.upper()),
                host=self.client.host,
            )
        child.inc()
        if verb != "watch":  # a watch lasts minutes by design: not a latency
            latency = self._latency_series.get(verb)
            if latency is None:
                latency = self._latency_series[verb] = (
                    self.metrics.rest_client_request_duration_seconds.labels(
                        verb=_HTTP_METHODS.get(verb, verb.upper()), host=self.client.host
                    )
                )
            latency.observe(seconds)
        if verb in _WRITE_VERBS and 200 <= code < 300 and resource is not None:
            labels = (_log.CONTROLLER.get() or "", verb, resource.key, subresource or "")
            writes = self._write_series.get(labels)
            if writes is None:
                writes = self._write_series[labels] = self.metrics.api_writes_total.labels(
                    controller=labels[0], verb=verb, resource=labels[2], subresource=labels[3]
                )
            writes.inc()

    def on_write(self, resource: Resource, subresource: str | None, obj: Object) -> None:
        """Every successful write's result: read-your-writes and loop detection."""
        self.cache.note_write(resource, obj)
        name = _log.CONTROLLER.get()
        if name:
            for c in self.controllers:
                if c.name == name:  # its own objects and their children alike
                    c.own_write(obj)
                    break  # names are unique (add refuses a second)

    def on_delete(self, resource: Resource, namespace: str | None, name: str, uid: str) -> None:
        """Every successful delete that removed the object: read-your-writes."""
        self.cache.note_delete(resource, namespace, name, uid)

    # -- probes ---------------------------------------------------------------------
    def _synced_check(self) -> str | None:
        pending = [i.name for i in self.cache.informers if i.started and not i.has_synced]
        return f"not synced: {', '.join(pending)}" if pending else None

    def _stall_check(self) -> str | None:
        stalled = self.cache.stalled(self.options.watch_stall_threshold)
        return f"stalled watches: {', '.join(stalled)}" if stalled else None

    def _workers_check(self) -> str | None:
        dead = [f"{c.name}: {why}" for c in self.controllers if (why := c.dead_workers())]
        return "; ".join(dead) if dead else None

    def _informers_check(self) -> str | None:
        dead = [f"{i.name}: {why}" for i in self.cache.informers if (why := i.failure())]
        return "; ".join(dead) if dead else None

    def _elector_check(self) -> str | None:
        task = self._elector_task
        if task is None or not task.done() or task.cancelled():
            return None
        err = task.exception()
        return f"leader election ended: {err!r}" if err else "leader election ended (lease lost)"

    # -- running --------------------------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully."""
        self._stop.set()

    async def run(self) -> None:
        """Run until :meth:`stop` or a signal (graceful), or until the lease is lost or
        leader election dies (raises :class:`LeaderElectionLost` at once)."""
        opts = self.options
        loop = asyncio.get_running_loop()
        if opts.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
        await self.endpoints.start(
            _enabled(opts.metrics_bind_address), _enabled(opts.health_probe_bind_address)
        )
        if self.webhooks is not None:
            try:
                await self.webhooks.start()
            except BaseException:  # e.g. no certificate: say so, leave no port open
                await self.endpoints.stop()
                raise
        self.recorder.start()
        always = [c for c in self.controllers if not c.options.need_leader_election]
        leader_only = [c for c in self.controllers if c.options.need_leader_election]
        if not opts.leader_election:
            always, leader_only = self.controllers, []
        if leader_only:
            self._install_fence({c.name for c in leader_only})
        lost: str | None = None
        try:
            # warm-up: every controller's sources, so a standby's caches are synced too
            if await self._start_sources(self.controllers):
                for c in always:
                    await c.start_workers()
                if leader_only:
                    lost = await self._lead(leader_only)
                else:
                    await self._stop.wait()
        finally:
            await self._shutdown(lost)
        if lost:
            raise LeaderElectionLost(f"{lost}; exiting so a standby can take over")

    def _install_fence(self, fenced: set[str]) -> None:
        # The fence sits at the transport, the last step before bytes leave the process.
        # The client has no public hook there yet, hence the private attribute.
        transport = self.client._transport
        if not isinstance(transport, FencedTransport):
            transport = FencedTransport(transport, fenced.__contains__)
            self.client._transport = transport
        self._fence = transport

    async def _lead(self, leader_only: list[Controller]) -> str | None:
        """Elect, run the leader-only workers, and return why leading ended (None: stop)."""
        loop = asyncio.get_running_loop()
        election = self._election or self._election_options()
        self.elector = elector = LeaderElector(
            self.client,
            election,
            on_change=lambda leading: self.metrics.leader_election_master_status.labels(
                name=election.name
            ).set(1 if leading else 0),
        )
        if self._fence is not None:
            self._fence.lease_left = elector.lease_left
        self._elector_task = task = loop.create_task(elector.run(), name="leader election")
        stopping = loop.create_task(self._stop.wait())
        became = loop.create_task(elector.became_leader.wait())
        try:
            # the election task itself is watched: if it dies, the manager stops
            await asyncio.wait({became, stopping, task}, return_when=asyncio.FIRST_COMPLETED)
            if elector.is_leader and not self._stop.is_set() and not task.done():
                stale = await self._refresh_caches()
                if stale:
                    return stale
                for c in leader_only:
                    await c.start_workers()
                lost = loop.create_task(elector.lost.wait())
                try:
                    await asyncio.wait({lost, stopping, task}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    lost.cancel()
        finally:
            became.cancel()
            stopping.cancel()
        if elector.lost.is_set():
            return "leader lease lost"
        if task.done():
            err = None if task.cancelled() else task.exception()
            log.error("leader election died: %r", err, exc_info=err)
            return f"leader election died ({err!r})"
        return None

    async def _refresh_caches(self) -> str | None:
        """Before a new leader's workers start: relist the informers that cannot be shown
        fresh (``leader_cache_max_silence``). None when the caches are fresh; else why
        leading must end (they did not list within ``cache_sync_timeout``)."""
        opts = self.options
        try:
            relisted = await self.cache.refresh_stale(
                opts.leader_cache_max_silence, opts.cache_sync_timeout
            )
        except TimeoutError:
            return f"caches not fresh {opts.cache_sync_timeout:g}s after winning the lease"
        if relisted:
            log.warning(
                "won the lease with silent or failing watches; listed them again first",
                extra={"informers": relisted},
            )
        return None

    async def _start_sources(self, controllers: list[Controller]) -> bool:
        """Start every source and wait for the caches; False if :meth:`stop` (a signal)
        came first. A stop is honoured at once, not after the sync timeout: an informer
        that can never sync (a CRD not installed) must not hold SIGTERM hostage.

        Raises :class:`CacheSyncTimeout` naming the informers that did not sync and why.
        """
        if not controllers:
            return True
        self.cache.start()
        loop = asyncio.get_running_loop()

        async def sync() -> None:
            for c in controllers:
                await c.start_sources(self.cache)

        syncing = loop.create_task(sync(), name="cache sync")
        stopping = loop.create_task(self._stop.wait())
        timeout = self.options.cache_sync_timeout
        try:
            await asyncio.wait({syncing, stopping}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            stopping.cancel()
            if not syncing.done():
                syncing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await syncing
        if syncing.done() and not syncing.cancelled():
            syncing.result()  # a failure while starting the sources surfaces here
            return True
        if self._stop.is_set():
            log.info("stopped before the caches synced")
            return False
        pending = {i.name: i.reflector.last_error for i in self.cache.informers if not i.has_synced}
        err = CacheSyncTimeout(timeout, pending)
        log.error("%s", err)
        raise err

    async def _shutdown(self, lost: str | None) -> None:
        elector_task = self._elector_task
        if lost:
            # not graceful: the lease may already be someone else's, so cancel in-flight
            # reconciles at once and write nothing more (pending Events are dropped)
            log.error("%s: cancelling reconciles and exiting", lost)
            await asyncio.gather(*(c.shutdown(0) for c in self.controllers))
        else:
            log.info("shutting down: no new work; finishing in-flight reconciles")
            grace = self.options.graceful_shutdown_timeout
            await asyncio.gather(*(c.shutdown(grace) for c in self.controllers))
        if elector_task is not None and not elector_task.done():
            elector_task.cancel()  # releases the lease (if still held by our clock)
            with contextlib.suppress(asyncio.CancelledError):
                await elector_task
        await self.cache.stop()
        await self.recorder.close(flush=not lost)
        if self.webhooks is not None:
            await self.webhooks.stop()
        await self.endpoints.stop()
        log.info("stopped")


def _enabled(address: str | None) -> str | None:
    """controller-runtime's convention: ``"0"`` (or nothing) turns a server off."""
    return None if address in (None, "", "0") else address
