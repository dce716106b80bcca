"""A fault-injecting TLS proxy in front of a real kube-apiserver, driven from tests.

Every client of the system under test (an operator, a second writer, a test's own
client) gets its own kubeconfig pointing at the proxy. The proxy knows each client by
the certificate in that kubeconfig, forwards its requests to the real apiserver as the
client (admin credentials plus ``Impersonate-User``/``Impersonate-Group``, so RBAC
still judges the real identity), streams watches through as their events arrive (whole
events, never more than one held back), and applies the fault rules in force. Every
request and its outcome is logged with the apiserver's own answer, so a test can tell
exactly which client wrote what, in which order.

>>> async with FaultProxy(control_plane, seed=1) as proxy:        # doctest: +SKIP
...     op = proxy.kubeconfig_for("operator")                     # a file, for a subprocess
...     me = Client(proxy.client_config("test"))                  # or in-process
...     proxy.add_rule(too_many_requests(2), client="operator", verb="update", times=3)
...     with proxy.fault(CutWatch(after_events=5), resource="configmaps"):
...         ...
...     cut = proxy.partition("operator")                          # hangs everything
...     proxy.heal(cut)
...     assert proxy.log.last_write("operator").revision < proxy.log.first_write("b").revision

Public API (stable):

:class:`FaultProxy`
    ``FaultProxy(upstream, *, seed=0, host="127.0.0.1", port=0, dir=None)``, where
    ``upstream`` is a :class:`~kubeloop.envtest.ControlPlane` or the path of a
    kubeconfig whose identity may impersonate (cluster-admin). Run it with
    ``async with`` (in the test's event loop) or ``with`` (in a background thread, for
    synchronous callers); or :meth:`~FaultProxy.start`/:meth:`~FaultProxy.stop`.
    ``server``; ``kubeconfig_for(client, *, user=None, groups=("system:masters",),
    namespace=None)`` → Path; ``client_config(...)`` → :class:`~kubeloop.ClusterConfig`;
    ``add_rule(action, *, times=None, probability=1.0, skip=0, **match)`` → :class:`Rule`;
    ``remove_rule(rule)``; ``fault(...)`` (a ``with`` block around ``add_rule``);
    ``clear_rules()``; ``partition(client, *, mode="hang"|"reset"|"hold")`` → :class:`Rule`;
    ``heal(rule_or_client)``; ``cut_watches(*, client=None, resource=None, abort=True)``
    → how many; ``open_watches(client=None)``; ``log`` (:class:`FaultLog`); ``rules``;
    ``await settle()`` (until every learnable resourceVersion is in the log).
    The pytest plugin's ``kube_fault_proxy`` fixture gives a test one.
Matchers (keyword arguments of ``add_rule``, see :class:`Match`)
    ``verb`` (get, list, watch, create, update, patch, delete, deletecollection; one or
    a set), ``resource`` (plural), ``subresource`` (``""``: none), ``namespace``,
    ``name``, ``watch``, ``client``, ``user_agent`` (substring).
Actions
    :class:`Delay` ``(seconds)``; :class:`Respond` ``(status, retry_after=None,
    reason=None, message=None, body=None, content_type=...)`` (``body``: raw bytes, say an
    HTML page with a 200) with :func:`too_many_requests`, :func:`internal_error`,
    :func:`service_unavailable`, :func:`gateway_timeout`; :class:`Reset`;
    :class:`DropResponse` (forward, then reset instead of answering);
    :class:`StaleRead` ``(revision)`` (reads as of an older etcd revision);
    :class:`DropEvents` ``(types=(), name=None, count=None)`` (watch events left out);
    :class:`Hang` ``(seconds=None, release="reset"|"forward")``; :class:`CutWatch`
    ``(after_events=None,
    after_seconds=None, abort=False, types=(), name=None)`` (``types``/``name``: only
    those events count towards ``after_events``). Rules are tried in the order added;
    :class:`Delay` (they add up), :class:`CutWatch` and :class:`DropEvents` combine with
    later rules, the first other action that takes the request decides it.
The log (:class:`FaultLog` of :class:`LogEntry`)
    ``entries(**filters)``, ``writes(client=..., ok=True)`` (in etcd commit order),
    ``last_write(client)``, ``first_write(client)``, ``counts(*keys)``, ``dump()``,
    ``clear()``, ``await wait_for(where, count=1, timeout=30)``, ``add_listener(fn)``
    (called as each request completes, before the client has the answer). Each entry:
    client, user, user_agent, verb, resource, group, subresource, namespace, name,
    status, action, rule, started (monotonic), started_wall, finished, api_date (the
    apiserver's ``Date``), reason, resource_version and uid (writes), events and ended
    (watches).

Limits: HTTP/1.1 only (clients negotiate it), no connection upgrades (exec, attach,
port-forward), and only watches are streamed (other answers are read whole, so a
``follow`` log stream would wait for its end); clients authenticate with the proxy's
client certificates (a request without one is forwarded as ``system:anonymous``;
bearer tokens and client-side impersonation are not passed on); ``deletecollection``
is logged as one write without per-object detail.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import aiohttp
import msgspec
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from multidict import CIMultiDict
from yarl import URL

from kubeloop import _pki
from kubeloop._config import BearerToken, ClusterConfig, load_kubeconfig
from kubeloop._errors import ConfigError
from kubeloop._transport import build_ssl_context
from kubeloop.testing._faultlog import FaultLog, LogEntry
from kubeloop.testing._faultrules import (
    Action,
    CutWatch,
    Delay,
    DropEvents,
    DropResponse,
    Hang,
    Match,
    Reset,
    Respond,
    Rule,
    StaleRead,
    gateway_timeout,
    internal_error,
    service_unavailable,
    status_body,
    status_reason,
    too_many_requests,
)
from kubeloop.testing._faultwire import (
    EventSplitter,
    Hider,
    created_name,
    event_matches,
    one_from_list,
    stale_url,
)
from kubeloop.testing._requestinfo import WRITE_VERBS, RequestInfo, request_info

__all__ = [
    "WRITE_VERBS",
    "Action",
    "CutWatch",
    "Delay",
    "DropEvents",
    "DropResponse",
    "FaultLog",
    "FaultProxy",
    "Hang",
    "LogEntry",
    "Match",
    "RequestInfo",
    "Reset",
    "Respond",
    "Rule",
    "StaleRead",
    "gateway_timeout",
    "internal_error",
    "request_info",
    "service_unavailable",
    "status_body",
    "too_many_requests",
]

_log = logging.getLogger("kubeloop.testing.faults")

#: Request headers not passed upstream: hop-by-hop ones, the ones aiohttp sets itself,
#: credentials (the proxy authenticates as admin and impersonates), and
#: Accept-Encoding (so write answers arrive uncompressed and can be read for the log).
_DROP_REQUEST = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "authorization",
        "accept-encoding",
        "impersonate-user",
        "impersonate-group",
        "impersonate-uid",
    }
)
_DROP_RESPONSE = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)

_ANONYMOUS = "system:anonymous"

#: How each action is named in the log's ``action`` field.
_LABELS: dict[type, str] = {
    Delay: "delay",
    Respond: "respond",
    Reset: "reset",
    DropResponse: "drop",
    StaleRead: "stale",
    DropEvents: "hide",
    Hang: "hang",
    CutWatch: "cut",
}

_status_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class _Identity:
    client: str
    user: str
    groups: tuple[str, ...]


@dataclass(eq=False)
class _Flight:
    """A request being forwarded: what to abort to cut it."""

    entry: LogEntry
    info: RequestInfo
    transport: asyncio.BaseTransport | None
    upstream: aiohttp.ClientResponse | None = None
    cut_reason: str | None = None
    #: End a watch as the API server would (the stream just ends) rather than reset it.
    clean: bool = False
    #: Watch events to leave out (a :class:`DropEvents` rule), with its own count.
    hide: Hider | None = None

    def cut(self, reason: str, *, clean: bool = False) -> None:
        if self.cut_reason is None:
            self.cut_reason = reason
        if clean and self.info.watch:
            self.clean = True  # the stream's loop sees its upstream close and ends it
        else:
            _reset(self.transport)
        if self.upstream is not None:
            self.upstream.close()


def _reset(transport: asyncio.BaseTransport | None) -> None:
    """Abort with a TCP RST (SO_LINGER 0), as a crashed or unreachable peer looks."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    abort = getattr(transport, "abort", None)
    if abort is not None:
        abort()
    else:
        transport.close()


def _subject(der: bytes) -> tuple[str, tuple[str, ...]]:
    cert = x509.load_der_x509_certificate(der)
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cns[0].value) if cns else _ANONYMOUS), tuple(str(o.value) for o in orgs)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class FaultProxy:
    """A loopback TLS reverse proxy that injects faults; see the module docstring."""

    def __init__(
        self,
        upstream: Any,
        *,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        dir: Path | None = None,
    ) -> None:
        kubeconfig = getattr(upstream, "kubeconfig", upstream)
        self._upstream: ClusterConfig = load_kubeconfig(kubeconfig)
        self._upstream_token = BearerToken(self._upstream)  # for a token kubeconfig
        self.seed = seed
        self.host = host
        self._port = port
        self._owns_dir = dir is None
        self.dir = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="kubeloop-faults-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = FaultLog()
        self._ca = _pki.CertificateAuthority("kubeloop-fault-proxy")
        self._identities: dict[bytes, _Identity] = {}
        self._rules: list[Rule] = []
        self._next_rule = 0
        self._lock = threading.Lock()
        self._flights: set[_Flight] = set()
        self._hang_events: dict[int, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.server = ""
        #: The highest etcd revision seen in an answer: a floor for what comes next.
        self._rv_floor = 0
        self._resolving: set[asyncio.Task[None]] = set()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> Self:
        """Start serving on the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        upstream_ssl = await asyncio.to_thread(build_ssl_context, self._upstream)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ssl=upstream_ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        server_ssl = await asyncio.to_thread(self._server_ssl)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        self._port = sock.getsockname()[1]
        self.server = f"https://{self.host}:{self._port}"
        self._runner = web.ServerRunner(
            web.Server(self._handle, handler_cancellation=True), handle_signals=False
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=server_ssl).start()
        _log.info("fault proxy %s -> %s", self.server, self._upstream.server)
        return self

    async def stop(self) -> None:
        """Cut every open request, stop serving, close upstream connections."""
        await self.settle(timeout=5)
        for task in list(self._resolving):
            task.cancel()
        self._stopping = True
        for ev in self._hang_events.values():
            ev.set()
        for flight in self._flights_now():
            flight.cut("proxy")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> Self:
        """Run the proxy on an event loop of its own in a background thread."""
        started = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as err:
                failure.append(err)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="kubeloop-fault-proxy", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = None

    def _server_ssl(self) -> ssl.SSLContext:
        pair = self._ca.serving(self.host)
        cert = _pki.write(self.dir / "proxy.crt", pair.cert_pem)
        key = _pki.write(self.dir / "proxy.key", pair.key_pem, private=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(cadata=self._ca.cert_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    # -- identities ------------------------------------------------------------------

    def client_config(
        self,
        client: str,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = ("system:masters",),
    ) -> ClusterConfig:
        """Connection settings for ``client`` through the proxy (for an in-process
        :class:`~kubeloop.Client`). The apiserver sees ``user`` (default: ``client``)
        in ``groups`` (default: ``system:masters``, i.e. cluster-admin; pass ``()`` to
        leave authorisation to RBAC)."""
        if not self.server:
            raise RuntimeError("start the proxy first: its address is not known yet")
        identity = _Identity(client, user or client, tuple(groups))
        pair = self._ca.client(identity.user, identity.groups)
        der = x509.load_pem_x509_certificate(pair.cert_pem).public_bytes(Encoding.DER)
        with self._lock:
            self._identities[hashlib.sha256(der).digest()] = identity
        return ClusterConfig(
            server=self.server,
            ca_data=self._ca.cert_pem,
            client_cert_data=pair.cert_pem,
            client_key_data=pair.key_pem,
        )

    def kubeconfig_for(
        self,
        client: str,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = ("system:masters",),
        namespace: str | None = None,
    ) -> Path:
        """A kubeconfig file for ``client`` (see :meth:`client_config`)."""
        config = self.client_config(client, user=user, groups=groups)
        assert config.client_cert_data is not None
        assert config.client_key_data is not None
        context: dict[str, str] = {"cluster": "fault-proxy", "user": client}
        if namespace:
            context["namespace"] = namespace
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fault-proxy",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _b64(self._ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": client,
                    "user": {
                        "client-certificate-data": _b64(config.client_cert_data),
                        "client-key-data": _b64(config.client_key_data),
                    },
                }
            ],
            "contexts": [{"name": "fault-proxy", "context": context}],
            "current-context": "fault-proxy",
        }
        path = self.dir / f"kubeconfig-{client}"
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path

    def _identify(self, request: web.BaseRequest) -> _Identity:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return _Identity(_ANONYMOUS, _ANONYMOUS, ())
        with self._lock:
            known = self._identities.get(hashlib.sha256(der).digest())
        if known is not None:
            return known
        user, groups = _subject(der)  # signed by our CA, but not one we handed out
        return _Identity(user, user, groups)

    # -- rules -----------------------------------------------------------------------

    def add_rule(
        self,
        action: Action,
        *,
        times: int | None = None,
        probability: float = 1.0,
        skip: int = 0,
        match: Match | None = None,
        label: str | None = None,
        **matchers: Any,
    ) -> Rule:
        """Put a fault in force (see :class:`Match` for the keyword matchers)."""
        if match is not None and matchers:
            raise TypeError("pass either match= or keyword matchers, not both")
        m = match if match is not None else Match.of(**matchers)
        with self._lock:
            rule = Rule(
                id=self._next_rule,
                match=m,
                action=action,
                times=times,
                probability=probability,
                skip=skip,
                seed=self.seed,
                label=label,
            )
            self._next_rule += 1
            self._rules.append(rule)
        return rule

    def remove_rule(self, rule: Rule) -> None:
        """Lift a fault; requests hanging under it are reset now."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)
        self._in_loop(lambda: self._release(rule.id))

    def clear_rules(self) -> None:
        with self._lock:
            rules, self._rules = self._rules, []
        for rule in rules:
            self._in_loop(lambda rid=rule.id: self._release(rid))

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    @contextlib.contextmanager
    def fault(self, action: Action, **kwargs: Any) -> Iterator[Rule]:
        """``add_rule`` for the body of a ``with`` block."""
        rule = self.add_rule(action, **kwargs)
        try:
            yield rule
        finally:
            self.remove_rule(rule)

    def partition(self, client: str, *, mode: Literal["hang", "reset", "hold"] = "hang") -> Rule:
        """Cut ``client`` off: its open requests and watches are reset now, and until
        :meth:`heal` every new request hangs and is then reset (``mode="hang"``, a
        blackhole), is reset at once (``"reset"``), or hangs and is delivered to the API
        server when the partition heals (``"hold"``: late writes, the split-brain case)."""
        action: Action
        if mode == "hang":
            action = Hang()
        elif mode == "hold":
            action = Hang(release="forward")
        elif mode == "reset":
            action = Reset()
        else:
            raise ValueError(f"partition mode must be hang, reset or hold, not {mode!r}")
        rule = self.add_rule(action, client=client, label="partition")
        self._in_loop(lambda: self._cut(lambda f: f.entry.client == client, "partition"))
        return rule

    def heal(self, rule_or_client: Rule | str) -> None:
        """End a partition (by its rule, or every partition of a client)."""
        if isinstance(rule_or_client, Rule):
            self.remove_rule(rule_or_client)
            return
        for rule in self.rules:
            if rule.label == "partition" and rule.match.client == frozenset({rule_or_client}):
                self.remove_rule(rule)

    def cut_watches(
        self, *, client: str | None = None, resource: str | None = None, abort: bool = True
    ) -> int:
        """End open watches now; returns how many. ``abort=True`` resets their
        connections; ``abort=False`` ends the streams cleanly after the last whole
        event, as the API server ends a watch at its timeout."""

        def pick(f: _Flight) -> bool:
            return (
                f.info.watch
                and (client is None or f.entry.client == client)
                and (resource is None or f.info.resource == resource)
            )

        n = sum(1 for f in self._flights_now() if pick(f))
        self._in_loop(lambda: self._cut(pick, "cut", clean=not abort))
        return n

    def open_watches(self, client: str | None = None) -> list[LogEntry]:
        """Log entries of the watches open right now."""
        flights = [f for f in self._flights_now() if f.info.watch and f.upstream is not None]
        return [f.entry for f in flights if client is None or f.entry.client == client]

    def _cut(self, pick: Any, reason: str, *, clean: bool = False) -> None:
        for flight in self._flights_now():
            if pick(flight):
                flight.cut(reason, clean=clean)

    def _flights_now(self) -> list[_Flight]:
        with self._lock:  # a threaded proxy's callers read it from another thread
            return list(self._flights)

    def _in_loop(self, fn: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    def _release(self, rule_id: int) -> None:
        ev = self._hang_events.pop(rule_id, None)
        if ev is not None:
            ev.set()

    def _decide(
        self, info: RequestInfo, client: str, user_agent: str
    ) -> tuple[float, CutWatch | None, Rule | None, list[Rule]]:
        delay = 0.0
        cut: CutWatch | None = None
        acted: list[Rule] = []
        for rule in self.rules:
            if not rule.take(info, client, user_agent):
                continue
            acted.append(rule)
            if isinstance(rule.action, Delay):
                delay += rule.action.seconds
            elif isinstance(rule.action, CutWatch):
                cut = cut or rule.action
            elif isinstance(rule.action, DropEvents):
                pass  # applied by the stream (see _serve)
            else:
                return delay, cut, rule, acted
        return delay, cut, None, acted

    # -- the request path ------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        identity = self._identify(request)
        query = request.rel_url.raw_query_string
        info = request_info(request.method, request.rel_url.raw_path, request.rel_url.query)
        user_agent = request.headers.get("User-Agent", "")
        entry = LogEntry(
            seq=-1,
            client=identity.client,
            user=identity.user,
            user_agent=user_agent,
            method=request.method,
            path=request.rel_url.raw_path,
            query=query,
            verb=info.verb,
            resource=info.resource,
            subresource=info.subresource,
            namespace=info.namespace,
            name=info.name,
            started=time.monotonic(),
            started_wall=time.time(),
            group=info.group,
            accept=request.headers.get("Accept", ""),
        )
        self.log._append(entry)  # visible at once: a request that hangs is in the log
        flight = _Flight(entry, info, request.transport)
        with self._lock:
            self._flights.add(flight)
        try:
            return await self._serve(request, identity, info, entry, flight)
        except asyncio.CancelledError:
            entry.ended = entry.ended or flight.cut_reason or "client"
            raise
        finally:
            with self._lock:
                self._flights.discard(flight)
            if entry.finished is None:
                entry.finished = time.monotonic()
            # before aiohttp sends the answer: a listener acting now (say, killing the
            # client) acts after the API server committed and before the client knows
            self.log._complete(entry)

    async def _serve(
        self,
        request: web.BaseRequest,
        identity: _Identity,
        info: RequestInfo,
        entry: LogEntry,
        flight: _Flight,
    ) -> web.StreamResponse:
        delay, cut, rule, acted = self._decide(info, identity.client, entry.user_agent)
        hiding = [r.action for r in acted if isinstance(r.action, DropEvents)]
        if hiding:
            flight.hide = Hider(hiding[0])
        labels = [r.label or _LABELS[type(r.action)] for r in acted]
        if acted:
            entry.rule = (rule or acted[-1]).id
        entry.action = "+".join(dict.fromkeys(labels)) or "forward"
        body = await request.read() if request.body_exists else b""
        if info.verb == "create" and entry.name is None:
            entry.name = created_name(body)  # so a create the proxy fails is named too
        if delay > 0:
            await asyncio.sleep(delay)
        action = rule.action if rule is not None else None
        if isinstance(action, Respond):
            entry.status = action.status
            entry.reason = status_reason(action) or None
            headers = {"Content-Type": action.content_type}
            if action.retry_after is not None:
                headers["Retry-After"] = str(max(1, round(action.retry_after)))
            entry.finished = time.monotonic()
            payload = status_body(action) if action.body is None else action.body
            return web.Response(status=action.status, body=payload, headers=headers)
        if isinstance(action, Reset):
            _reset(request.transport)
            entry.finished = time.monotonic()
            return web.Response(status=500)  # never sent: the connection is gone
        if isinstance(action, Hang):
            assert rule is not None
            await self._hang(rule, action.seconds)
            if action.release == "reset" or self._stopping:
                _reset(request.transport)
                entry.finished = time.monotonic()
                return web.Response(status=500)
            action = None  # held, now delivered late
        if labels and cut is None:
            entry.action += "+forward"
        drop = isinstance(action, DropResponse)
        stale = action.revision if isinstance(action, StaleRead) else None
        if drop or stale is not None:
            entry.action = entry.action.removesuffix("+forward")
        if stale is not None:
            entry.extra["revision"] = str(stale)
        return await self._forward(request, identity, info, entry, flight, body, cut, drop, stale)

    async def _hang(self, rule: Rule, seconds: float | None) -> None:
        ev = self._hang_events.setdefault(rule.id, asyncio.Event())
        if self._stopping or rule not in self.rules:
            return  # lifted while we decided
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await ev.wait()

    def _upstream_headers(
        self, request: web.BaseRequest, identity: _Identity, info: RequestInfo
    ) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in request.headers.items():
            if key.lower() not in _DROP_REQUEST:
                headers.add(key, value)
        accept = headers.get("Accept", "")
        if info.write and "protobuf" in accept:
            # the log needs the written object's resourceVersion; client-go decodes an
            # answer by its Content-Type, so a protobuf client reads JSON just as well
            headers["Accept"] = "application/json"
        headers["Accept-Encoding"] = "identity"
        headers["Impersonate-User"] = identity.user
        for group in identity.groups:
            headers.add("Impersonate-Group", group)
        return headers

    async def _forward(
        self,
        request: web.BaseRequest,
        identity: _Identity,
        info: RequestInfo,
        entry: LogEntry,
        flight: _Flight,
        body: bytes,
        cut: CutWatch | None,
        drop: bool = False,
        stale: int | None = None,
    ) -> web.StreamResponse:
        assert self._session is not None
        rel = request.rel_url if stale is None else stale_url(request.rel_url, info, stale)
        url = URL(self._upstream.server.rstrip("/") + str(rel), encoded=True)
        headers = self._upstream_headers(request, identity, info)
        # a delete answered with a bare Status has no resourceVersion: note a revision
        # from before it, to find the exact one in a watch afterwards
        floor = 0
        if info.verb == "delete" and info.name and not info.subresource:
            floor = self._rv_floor or await self._current_revision(request.rel_url.path)
        try:
            token = await self._upstream_token.get()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            upstream = await self._session.request(
                request.method,
                url,
                data=body or None,
                headers=headers,
                allow_redirects=False,
                server_hostname=self._upstream.tls_server_name,
            )
        except (aiohttp.ClientError, OSError, TimeoutError, ConfigError) as err:
            entry.extra["error"] = f"{type(err).__name__}: {err}"
            entry.ended = "upstream"
            _reset(request.transport)  # what a client sees when the apiserver is down
            return web.Response(status=502)
        flight.upstream = upstream
        try:
            entry.status = upstream.status
            entry.api_date = upstream.headers.get("Date")
            headers = CIMultiDict(
                (k, v) for k, v in upstream.headers.items() if k.lower() not in _DROP_RESPONSE
            )
            if info.watch and upstream.status == 200:
                return await self._stream(request, entry, flight, upstream, headers, cut)
            try:
                data = await upstream.read()
            except (aiohttp.ClientError, OSError) as err:
                entry.extra["error"] = f"{type(err).__name__}: {err}"
                entry.status = 0
                _reset(request.transport)
                return web.Response(status=502)
            upstream_status = upstream.status
            if stale is not None and info.verb == "get" and upstream.status == 200:
                data, upstream_status = one_from_list(data, info)
                entry.status = upstream_status
            self._note_answer(entry, info, data)
            if floor and entry.ok and entry.resource_version is None and entry.uid:
                self._resolve_later(entry, request.rel_url.path, floor)
            entry.finished = time.monotonic()
            if drop:  # the API server has acted; the client never hears of it
                _reset(request.transport)
            return web.Response(status=upstream_status, body=data, headers=headers)
        finally:
            upstream.release()

    def _note_answer(self, entry: LogEntry, info: RequestInfo, data: bytes) -> None:
        if not data or not (info.write or entry.status >= 400):
            return
        try:
            obj = _status_decoder.decode(data)
        except msgspec.DecodeError:
            return
        if not isinstance(obj, dict):
            return
        if obj.get("kind") == "Status":
            entry.reason = obj.get("reason") or None
            details = obj.get("details") or {}
            if isinstance(details, dict):
                entry.uid = details.get("uid") or None
                entry.name = entry.name or details.get("name") or None
            return
        meta = obj.get("metadata") or {}
        if isinstance(meta, dict) and info.verb != "deletecollection":
            entry.resource_version = meta.get("resourceVersion") or None
            entry.uid = meta.get("uid") or None
            entry.name = entry.name or meta.get("name") or None
            if entry.revision is not None:
                self._rv_floor = max(self._rv_floor, entry.revision)

    def _resolve_later(self, entry: LogEntry, path: str, floor: int) -> None:
        task = asyncio.create_task(self._resolve_delete(entry, path, floor))
        self._resolving.add(task)
        task.add_done_callback(self._resolving.discard)

    async def _resolve_delete(self, entry: LogEntry, path: str, floor: int) -> None:
        """Set a Status-answered delete's resourceVersion from the object's DELETED event
        (the one with its uid), watched from a revision seen before the delete."""
        assert self._session is not None
        base, _, name = path.rpartition("/")
        params = {
            "watch": "1",
            "resourceVersion": str(floor),
            "fieldSelector": f"metadata.name={name}",
            "timeoutSeconds": "10",
        }
        headers = self._admin_headers(await self._upstream_token.get())
        url = URL(self._upstream.server.rstrip("/") + base, encoded=True)
        try:
            async with self._session.get(
                url, params=params, headers=headers, server_hostname=self._upstream.tls_server_name
            ) as resp:
                if resp.status != 200:
                    return
                splitter = EventSplitter("application/json")
                pending = b""
                async for chunk in resp.content.iter_any():
                    data = pending + chunk
                    ends = [len(pending) + e for e in splitter.ends(chunk)]
                    start = 0
                    for end in ends:
                        event = _status_decoder.decode(data[start:end])
                        start = end
                        meta = (event.get("object") or {}).get("metadata") or {}
                        if event.get("type") == "DELETED" and meta.get("uid") == entry.uid:
                            entry.resource_version = meta.get("resourceVersion") or None
                            entry.extra["resource_version_from"] = "watch"
                            return
                    pending = data[start:]
        except (aiohttp.ClientError, OSError, TimeoutError, msgspec.DecodeError) as err:
            _log.debug("no resourceVersion for %s: %s", entry, err)

    def _admin_headers(self, token: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def _current_revision(self, object_path: str) -> int:
        """etcd's revision now, from a one-item LIST of the object's resource (0: unknown)."""
        assert self._session is not None
        base = object_path.rpartition("/")[0]
        url = URL(self._upstream.server.rstrip("/") + base, encoded=True)
        headers = self._admin_headers(await self._upstream_token.get())
        try:
            async with self._session.get(
                url,
                params={"limit": "1"},
                headers=headers,
                server_hostname=self._upstream.tls_server_name,
            ) as resp:
                page = _status_decoder.decode(await resp.read())
            return int(page["metadata"]["resourceVersion"])
        except (aiohttp.ClientError, OSError, msgspec.DecodeError, KeyError, TypeError, ValueError):
            return 0

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until the log knows every resourceVersion it can learn (deletes answered
        with a Status get theirs from a watch, a moment after the answer)."""
        pending = list(self._resolving)
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def _stream(
        self,
        request: web.BaseRequest,
        entry: LogEntry,
        flight: _Flight,
        upstream: aiohttp.ClientResponse,
        headers: CIMultiDict[str],
        cut: CutWatch | None,
    ) -> web.StreamResponse:
        out = web.StreamResponse(status=upstream.status, headers=headers)
        out.enable_chunked_encoding()
        await out.prepare(request)
        content_type = upstream.headers.get("Content-Type", "")
        json_events = "json" in content_type
        # a narrowed cut counts only its events (which must be read: JSON); else all
        narrow = cut if cut is not None and cut.narrowed else None
        limit = cut.after_events if cut is not None and (narrow is None or json_events) else None
        counted = 0  # events towards the limit
        splitter = EventSplitter(content_type)
        hide = flight.hide if flight.hide is not None and json_events else None
        loop = asyncio.get_running_loop()
        deadline = (
            loop.time() + cut.after_seconds
            if cut is not None and cut.after_seconds is not None
            else None
        )
        ended = "server"
        # Only whole events are forwarded: the tail of an event still arriving waits
        # here, so a cut at any moment leaves the client a well-formed stream.
        pending = b""
        try:
            while True:
                if limit is not None and counted >= limit:
                    ended = "cut"
                    break
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await upstream.content.readany()
                except TimeoutError:
                    ended = "cut"
                    break
                if not chunk:
                    break
                ends = [len(pending) + e for e in splitter.ends(chunk)]
                data = pending + chunk
                if not ends:
                    pending = data
                    continue
                pending = data[ends[-1] :]
                if hide is None and narrow is None:
                    whole = ends if limit is None else ends[: limit - counted]
                    await out.write(data[: whole[-1]])
                    entry.events += len(whole)
                    counted += len(whole)
                    continue
                parts, start = [], 0
                for end in ends:
                    event, start = data[start:end], end
                    if limit is not None and counted >= limit:
                        break
                    if hide is not None and hide.hides(event, entry):
                        continue
                    parts.append(event)
                    entry.events += 1
                    if narrow is None or event_matches(event, narrow.types, narrow.name):
                        counted += 1
                if parts:
                    await out.write(b"".join(parts))
        except (aiohttp.ClientError, OSError) as err:
            if flight.clean:
                ended = flight.cut_reason or "cut"
            else:
                ended = flight.cut_reason or (
                    "client" if isinstance(err, ConnectionResetError) else "upstream"
                )
                if ended == "upstream":
                    entry.extra["error"] = f"{type(err).__name__}: {err}"
                    _reset(request.transport)
                entry.ended = ended
                entry.finished = time.monotonic()
                return out
        entry.ended = flight.cut_reason or ended
        entry.finished = time.monotonic()
        if ended == "cut" and cut is not None and cut.abort:
            _reset(request.transport)
            return out
        with contextlib.suppress(ConnectionError):
            await out.write_eof()
        return out
