"""The manager: one client, one cache, many controllers, one process.

It owns start-up order (endpoints, caches, leader election, controllers),
shutdown order (stop intake, finish in-flight reconciles, release the lease),
and the hooks that turn every API request into metrics and every write into
read-your-writes and loop-detection bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubeloop import _log
from kubeloop._builder import Builder
from kubeloop._controller import Controller
from kubeloop._informer import Cache
from kubeloop._leader import LeaderElectionOptions, LeaderElector
from kubeloop._metrics import REGISTRY, CounterChild, Registry, RuntimeMetrics
from kubeloop._recorder import EventRecorder
from kubeloop._reflector import ReflectorOptions
from kubeloop._resource import Object, Resource
from kubeloop._serving import Endpoints

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
    #: ``host:port`` for /metrics; port 0 picks a free one; None disables (default 127.0.0.1:8080).
    metrics_bind_address: str | None = "127.0.0.1:8080"
    #: ``host:port`` for /healthz and /readyz; None disables (default 127.0.0.1:8081).
    health_probe_bind_address: str | None = "127.0.0.1:8081"
    #: Seconds in-flight reconciles get to finish on shutdown (default 30, as controller-runtime).
    graceful_shutdown_timeout: float = 30.0
    #: Seconds to wait for caches to sync before giving up (default 120).
    cache_sync_timeout: float = 120.0
    #: /readyz fails when a watch shows no life for this long (default 300 s).
    watch_stall_threshold: float = 300.0
    #: Handle SIGTERM/SIGINT by shutting down gracefully (default True).
    handle_signals: bool = True
    #: Informer tuning.
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)
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
        self.cache = Cache(client, options=opts.reflector, namespaces=opts.namespaces)
        self.recorder = EventRecorder(client, reporting_controller=opts.name)
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.endpoints = Endpoints(
            opts.registry.render,
            healthz={"ping": lambda: None},
            readyz={"informers-synced": self._synced_check, "watches": self._stall_check},
        )
        self._stop = asyncio.Event()
        self._request_series: dict[tuple[int, str], CounterChild] = {}
        self._started_leader_work = False
        client.add_observer(self)

    # -- wiring ---------------------------------------------------------------------
    def controller(self, name: str) -> Builder:
        """Start building a controller (finish with ``.complete(reconciler)``)."""
        return Builder(self, name)

    def add(self, controller: Controller) -> None:
        if any(c.name == controller.name for c in self.controllers):
            raise ValueError(f"a controller named {controller.name!r} is already registered")
        self.controllers.append(controller)

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
        if verb in _WRITE_VERBS and 200 <= code < 300 and resource is not None:
            self.metrics.api_writes_total.labels(
                controller=_log.CONTROLLER.get() or "",
                verb=verb,
                resource=resource.key,
                subresource=subresource or "",
            ).inc()

    def on_write(self, resource: Resource, subresource: str | None, obj: Object) -> None:
        """Every successful write's result: read-your-writes and loop detection."""
        self.cache.note_write(resource, obj)
        name = _log.CONTROLLER.get()
        if name:
            for c in self.controllers:
                if c.name == name and c.for_resource == resource:
                    c.own_write(obj)

    # -- probes ---------------------------------------------------------------------
    def _synced_check(self) -> str | None:
        # informers of controllers that wait for the lease are not started on a standby,
        # which must still report ready (or a rolling update never finishes)
        pending = [i.name for i in self.cache.informers if i.started and not i.has_synced]
        return f"not synced: {', '.join(pending)}" if pending else None

    def _stall_check(self) -> str | None:
        stalled = self.cache.stalled(self.options.watch_stall_threshold)
        return f"stalled watches: {', '.join(stalled)}" if stalled else None

    # -- running --------------------------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully."""
        self._stop.set()

    async def run(self) -> None:
        """Run until :meth:`stop`, a signal, or a lost lease (raises LeaderElectionLost)."""
        opts = self.options
        loop = asyncio.get_running_loop()
        if opts.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
        await self.endpoints.start(opts.metrics_bind_address, opts.health_probe_bind_address)
        self.recorder.start()
        elector_task: asyncio.Task[None] | None = None
        lost = False
        try:
            always = [c for c in self.controllers if not c.options.need_leader_election]
            leader_only = [c for c in self.controllers if c.options.need_leader_election]
            if not opts.leader_election:
                always, leader_only = self.controllers, []
            await self._start_controllers(always)
            if leader_only:
                self.elector = LeaderElector(
                    self.client,
                    LeaderElectionOptions(
                        name=opts.leader_election_id or f"{opts.name}-leader",
                        namespace=opts.leader_election_namespace,
                        identity=opts.identity or f"{socket.gethostname()}_{os.getpid()}",
                        lease_duration=opts.lease_duration,
                        renew_deadline=opts.renew_deadline,
                        retry_period=opts.retry_period,
                    ),
                    on_change=lambda leading: self.metrics.leader_election_master_status.labels(
                        name=opts.leader_election_id or f"{opts.name}-leader"
                    ).set(1 if leading else 0),
                )
                elector_task = loop.create_task(self.elector.run(), name="leader election")
                became = loop.create_task(self.elector.became_leader.wait())
                stopping = loop.create_task(self._stop.wait())
                await asyncio.wait({became, stopping}, return_when=asyncio.FIRST_COMPLETED)
                became.cancel()
                stopping.cancel()
                if self.elector.is_leader and not self._stop.is_set():
                    await self._start_controllers(leader_only)
            stopping = loop.create_task(self._stop.wait())
            waiters: set[asyncio.Task[object]] = {stopping}
            if self.elector is not None:
                waiters.add(loop.create_task(self.elector.lost.wait()))
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
            lost = self.elector is not None and self.elector.lost.is_set()
        finally:
            await self._shutdown(elector_task)
        if lost:
            raise LeaderElectionLost("leader lease lost; exiting so a standby can take over")

    async def _start_controllers(self, controllers: list[Controller]) -> None:
        if not controllers:
            return
        self.cache.start()
        async with asyncio.timeout(self.options.cache_sync_timeout):
            for c in controllers:
                await c.start(self.cache)

    async def _shutdown(self, elector_task: asyncio.Task[None] | None) -> None:
        log.info("shutting down: no new work; finishing in-flight reconciles")
        grace = self.options.graceful_shutdown_timeout
        await asyncio.gather(*(c.shutdown(grace) for c in self.controllers))
        if elector_task is not None:
            elector_task.cancel()  # releases the lease
            with contextlib.suppress(asyncio.CancelledError):
                await elector_task
        await self.cache.stop()
        await self.recorder.close()
        await self.endpoints.stop()
        log.info("stopped")
