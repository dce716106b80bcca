"""A fault-injecting TLS proxy in front of a real kube-apiserver, driven from tests.

Every client of the system under test (an operator, a second writer, a test's own
client) gets its own kubeconfig pointing at the proxy. The proxy knows each client by
the certificate in that kubeconfig, forwards its requests to the real apiserver as the
client (admin credentials plus ``Impersonate-User``/``Impersonate-Group``, so RBAC
still judges the real identity), streams watches through byte for byte, and applies
the fault rules in force. Every request and its outcome is logged with the apiserver's
own answer, so a test can tell exactly which client wrote what, in which order.

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
    ``server``; ``kubeconfig_for(client, *, user=None, groups=("system:masters",))``
    → Path; ``client_config(...)`` → :class:`~kubeloop.ClusterConfig`;
    ``add_rule(action, *, times=None, probability=1.0, **match)`` → :class:`Rule`;
    ``remove_rule(rule)``; ``fault(...)`` (a ``with`` block around ``add_rule``);
    ``clear_rules()``; ``partition(client, *, mode="hang"|"reset")`` → :class:`Rule`;
    ``heal(rule_or_client)``; ``cut_watches(*, client=None, resource=None, abort=True)``
    → how many; ``open_watches(client=None)``; ``log`` (:class:`FaultLog`).
Matchers (keyword arguments of ``add_rule``, see :class:`Match`)
    ``verb`` (get, list, watch, create, update, patch, delete, deletecollection; one or
    a set), ``resource`` (plural), ``subresource`` (``""``: none), ``namespace``,
    ``name``, ``watch``, ``client``, ``user_agent`` (substring).
Actions
    :class:`Delay` ``(seconds)``; :class:`Respond` ``(status, retry_after=None,
    reason=None, message=None)`` with :func:`too_many_requests`, :func:`internal_error`,
    :func:`service_unavailable`, :func:`gateway_timeout`; :class:`Reset`;
    :class:`Hang` ``(seconds=None)``; :class:`CutWatch` ``(after_events=None,
    after_seconds=None, abort=False)``. Delays add up and let later rules act; the
    first other action that takes the request decides it.
The log (:class:`FaultLog` of :class:`LogEntry`)
    ``entries(**filters)``, ``writes(client=..., ok=True)`` (in etcd commit order),
    ``last_write(client)``, ``first_write(client)``, ``counts(*keys)``, ``dump()``,
    ``clear()``. Each entry: client, user, user_agent, verb, resource, subresource,
    namespace, name, status, action, rule, started (monotonic), started_wall, finished,
    api_date (the apiserver's ``Date``), reason, resource_version and uid (writes),
    events and ended (watches).

Limits: HTTP/1.1 only (clients negotiate it); clients authenticate with the proxy's
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

from kubeloop._config import ClusterConfig, load_kubeconfig
from kubeloop._transport import build_ssl_context
from kubeloop.envtest import _certs
from kubeloop.testing._faultlog import FaultLog, LogEntry
from kubeloop.testing._faultrules import (
    Action,
    CutWatch,
    Delay,
    Hang,
    Match,
    Reset,
    Respond,
    Rule,
    gateway_timeout,
    internal_error,
    service_unavailable,
    status_body,
    too_many_requests,
)
from kubeloop.testing._requestinfo import WRITE_VERBS, RequestInfo, request_info

__all__ = [
    "WRITE_VERBS",
    "Action",
    "CutWatch",
    "Delay",
    "FaultLog",
    "FaultProxy",
    "Hang",
    "LogEntry",
    "Match",
    "RequestInfo",
    "Reset",
    "Respond",
    "Rule",
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

    def cut(self, reason: str) -> None:
        if self.cut_reason is None:
            self.cut_reason = reason
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
        self.seed = seed
        self.host = host
        self._port = port
        self._owns_dir = dir is None
        self.dir = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="kubeloop-faults-"))
        self.log = FaultLog()
        self._ca = _certs.CertificateAuthority("kubeloop-fault-proxy")
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
        self._stopping = True
        for ev in self._hang_events.values():
            ev.set()
        for flight in list(self._flights):
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
        cert = _certs.write(self.dir / "proxy.crt", pair.cert_pem)
        key = _certs.write(self.dir / "proxy.key", pair.key_pem, private=True)
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

    def partition(self, client: str, *, mode: Literal["hang", "reset"] = "hang") -> Rule:
        """Cut ``client`` off: its open requests and watches are reset now, and every
        new request hangs (``mode="hang"``, a blackhole) or is reset until :meth:`heal`."""
        action: Action = Hang() if mode == "hang" else Reset()
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
        """End open watches now (reset their connections); returns how many. Must be
        called on the proxy's loop or, for a threaded proxy, from any other thread.
        ``abort`` is kept for symmetry with :class:`CutWatch`; a cut from outside always
        resets, since the stream's writer may be mid-event."""
        del abort

        def pick(f: _Flight) -> bool:
            return (
                f.info.watch
                and (client is None or f.entry.client == client)
                and (resource is None or f.info.resource == resource)
            )

        n = sum(1 for f in list(self._flights) if pick(f))
        self._in_loop(lambda: self._cut(pick, "cut"))
        return n

    def open_watches(self, client: str | None = None) -> list[LogEntry]:
        """Log entries of the watches open right now."""
        flights = [f for f in list(self._flights) if f.info.watch and f.upstream is not None]
        return [f.entry for f in flights if client is None or f.entry.client == client]

    def _cut(self, pick: Any, reason: str) -> None:
        for flight in list(self._flights):
            if pick(flight):
                flight.cut(reason)

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
        )
        with self.log._lock:  # one lock: seq equals the position in the log
            entry.seq = len(self.log._entries)
            self.log._entries.append(entry)
        flight = _Flight(entry, info, request.transport)
        self._flights.add(flight)
        try:
            return await self._serve(request, identity, info, entry, flight)
        except asyncio.CancelledError:
            entry.ended = entry.ended or flight.cut_reason or "client"
            raise
        finally:
            self._flights.discard(flight)
            if entry.finished is None:
                entry.finished = time.monotonic()

    async def _serve(
        self,
        request: web.BaseRequest,
        identity: _Identity,
        info: RequestInfo,
        entry: LogEntry,
        flight: _Flight,
    ) -> web.StreamResponse:
        delay, cut, rule, acted = self._decide(info, identity.client, entry.user_agent)
        labels = [r.label or _LABELS[type(r.action)] for r in acted]
        if acted:
            entry.rule = (rule or acted[-1]).id
        entry.action = "+".join(dict.fromkeys(labels)) or "forward"
        body = await request.read() if request.body_exists else b""
        if delay > 0:
            await asyncio.sleep(delay)
        action = rule.action if rule is not None else None
        if isinstance(action, Respond):
            entry.status = action.status
            entry.reason = action.reason or None
            headers = {"Content-Type": "application/json"}
            if action.retry_after is not None:
                headers["Retry-After"] = str(max(1, round(action.retry_after)))
            entry.finished = time.monotonic()
            return web.Response(status=action.status, body=status_body(action), headers=headers)
        if isinstance(action, Reset):
            _reset(request.transport)
            entry.finished = time.monotonic()
            return web.Response(status=500)  # never sent: the connection is gone
        if isinstance(action, Hang):
            assert rule is not None
            await self._hang(rule, action.seconds)
            _reset(request.transport)
            entry.finished = time.monotonic()
            return web.Response(status=500)
        if labels and cut is None:
            entry.action += "+forward"
        return await self._forward(request, identity, info, entry, flight, body, cut)

    async def _hang(self, rule: Rule, seconds: float | None) -> None:
        ev = self._hang_events.setdefault(rule.id, asyncio.Event())
        if self._stopping or rule not in self.rules:
            return  # lifted while we decided
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await ev.wait()

    def _upstream_headers(self, request: web.BaseRequest, identity: _Identity) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in request.headers.items():
            if key.lower() not in _DROP_REQUEST:
                headers.add(key, value)
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
    ) -> web.StreamResponse:
        assert self._session is not None
        url = URL(self._upstream.server.rstrip("/") + str(request.rel_url), encoded=True)
        try:
            upstream = await self._session.request(
                request.method,
                url,
                data=body or None,
                headers=self._upstream_headers(request, identity),
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
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
            self._note_answer(entry, info, data)
            entry.finished = time.monotonic()
            return web.Response(status=upstream.status, body=data, headers=headers)
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
        limit = cut.after_events if cut is not None else None
        loop = asyncio.get_running_loop()
        deadline = (
            loop.time() + cut.after_seconds
            if cut is not None and cut.after_seconds is not None
            else None
        )
        ended = "server"
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await upstream.content.readany()
                except TimeoutError:
                    ended = "cut"
                    break
                if not chunk:
                    break
                if limit is not None:
                    room = limit - entry.events
                    pos = -1
                    for _ in range(room):
                        pos = chunk.find(b"\n", pos + 1)
                        if pos < 0:
                            break
                    if pos >= 0:  # the limit falls inside this chunk
                        await out.write(chunk[: pos + 1])
                        entry.events = limit
                        ended = "cut"
                        break
                await out.write(chunk)
                entry.events += chunk.count(b"\n")
        except (aiohttp.ClientError, OSError) as err:
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
