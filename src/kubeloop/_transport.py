"""HTTP to the API server: a small :class:`Transport` protocol and its implementation.

Requests (reads, writes, LIST pages) go over kubeloop's own HTTP/1.1 keep-alive
connections (:mod:`kubeloop._h1`: asyncio protocols and httptools' C parser); watches
and anything through an HTTP proxy go over aiohttp. Why the split: a controller's hot
path is one small request after another, and aiohttp's per-request machinery cost more
CPU than the rest of kubeloop's reconcile (``docs/benchmarks.md``, write path, round
five); a watch is one long response read incrementally, where aiohttp costs little
per event, and a proxy's CONNECT is aiohttp's to get right.

Why HTTP/1.1 at all: HTTP/2 in Python cost six times aiohttp's CPU per request here
(``docs/benchmarks.md``, round two), and the apiserver allows 100 streams per HTTP/2
connection: httpcore queues the 101st request behind long-lived watches instead of
opening a connection (``research/python-client.md`` §2.5). HTTP/1.1 has the same
problem as a pool limit, so watches get their **own** aiohttp session without a
connection limit: a hundred watches can never starve reads and writes. Everything
above this module talks to the protocol, so a different transport (or a fake in
tests) can be dropped in.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

import aiohttp
from yarl import URL

from kubeloop._config import BearerToken, ClusterConfig
from kubeloop._errors import ConfigError, RequestTimeout, TransportError
from kubeloop._h1 import ConnectionPool

Params = Mapping[str, str]
Headers = Mapping[str, str]

#: Watch lines carry whole objects; aiohttp's default buffer (and line limit twice
#: that) is too small for big ones, and a bigger buffer means fewer wake-ups.
_WATCH_READ_BUFSIZE = 2 * 1024 * 1024
#: A single watch event larger than this is treated as a broken stream rather than
#: buffered without bound (etcd's default object limit is 1.5 MiB).
_MAX_WATCH_LINE = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Response:
    """A complete response. ``headers`` is case-insensitive when it comes from aiohttp."""

    status: int
    headers: Headers
    body: bytes


class StreamResponse(Protocol):
    """A response whose body is read incrementally (a watch)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Headers: ...

    async def read(self) -> bytes:
        """The whole body (for error responses)."""
        ...

    def lines(self) -> AsyncIterator[bytes]:
        """Non-empty lines without the newline; ends when the server closes the stream."""
        ...


class Transport(Protocol):
    """What the client needs from HTTP. Failures without a response raise
    :class:`~kubeloop._errors.TransportError` (:class:`RequestTimeout` for timeouts);
    HTTP error statuses are returned, not raised."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        # a client-side HTTP deadline that ends in RequestTimeout, not a cancel scope
        timeout: float | None = None,
    ) -> Response: ...

    def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        headers: Headers | None = None,
        read_timeout: float | None = None,
    ) -> AbstractAsyncContextManager[StreamResponse]: ...

    async def close(self) -> None: ...


def build_ssl_context(config: ClusterConfig) -> ssl.SSLContext:
    """TLS settings from ``config``. Blocking (it may touch the disk): call it in a thread."""
    try:
        if config.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif config.ca_data:
            ctx = ssl.create_default_context(cadata=config.ca_data.decode("ascii"))
        else:
            ctx = ssl.create_default_context()
        if config.client_cert_data is not None and config.client_key_data is not None:
            _load_client_cert(ctx, config.client_cert_data, config.client_key_data)
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"invalid TLS material for {config.server}: {err}") from err
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads certificates from files. mkstemp creates the file 0600, and it
    # is removed as soon as ssl has read it, so the key never outlives this call.
    fd, name = tempfile.mkstemp(prefix="kubeloop-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cert.rstrip(b"\n") + b"\n" + key)
        ctx.load_cert_chain(name)
    finally:
        os.unlink(name)


def _translate(err: BaseException, method: str, path: str) -> TransportError:
    what = f"{method} {path}: {type(err).__name__}: {err}".rstrip(": ")
    if isinstance(err, TimeoutError):  # includes aiohttp's ServerTimeoutError
        return RequestTimeout(what)
    return TransportError(what)


#: A path made only of characters a URL carries as they are (what Kubernetes names,
#: namespaces and resource paths consist of): sent without yarl re-parsing and
#: re-encoding it, which was a tenth of the request's own cost. Anything else (a name
#: with a space, a percent sign) goes the general way.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._~/:@-]*")
#: Encoded query strings by their parameters: a controller sends the same few over and
#: over (``fieldManager=...``); bounded, started over when full.
_QUERIES: dict[tuple[tuple[str, str], ...], str] = {}
_MAX_QUERIES = 256


def _query(params: Params) -> str:
    key = tuple(params.items())
    query = _QUERIES.get(key)
    if query is None:
        if len(_QUERIES) >= _MAX_QUERIES:
            _QUERIES.clear()
        query = _QUERIES[key] = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in key)
    return query


#: What aiohttp raises when there is no (complete) response. Anything else is a bug.
_FAILURES = (aiohttp.ClientError, TimeoutError, OSError)


class HttpTransport:
    """:class:`Transport` over kubeloop's own connections for requests (aiohttp's when
    the cluster is reached through a proxy) and an aiohttp session for watches.

    Connections are opened on first use, inside the event loop, with the TLS context
    built in a worker thread.
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        connect_timeout: float = 10.0,
        request_timeout: float = 60.0,
        max_connections: int = 100,
    ) -> None:
        self._config = config
        self._base = config.server.rstrip("/")
        # the server's URL in parts, for building each request's URL from them (below)
        base = URL(self._base)
        self._scheme, self._authority = base.scheme, base.raw_authority
        self._base_path = base.raw_path.rstrip("/")
        self._token = BearerToken(config)
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._max_connections = max_connections
        # the requests' usual timeout, built once (not per request)
        self._timeout = aiohttp.ClientTimeout(total=request_timeout, sock_connect=connect_timeout)
        self._requests: aiohttp.ClientSession | None = None
        self._watches: aiohttp.ClientSession | None = None
        #: requests on kubeloop's own connections (``_h1``); through a proxy, aiohttp's
        self._pool: ConnectionPool | None = None
        self._direct = config.proxy_url is None and base.scheme in ("http", "https")
        self._host_port = (base.host or "", base.port or (443 if base.scheme == "https" else 80))
        self._heads: dict[tuple[tuple[str, str], ...], bytes] = {}
        self._setup = asyncio.Lock()
        self._closed = False

    async def _sessions(self) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
        if self._requests is None or self._watches is None:
            async with self._setup:
                if self._closed:
                    raise TransportError("transport is closed")
                if self._requests is None or self._watches is None:
                    self._requests, self._watches, self._pool = await self._open()
        return self._requests, self._watches

    async def _open(
        self,
    ) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession, ConnectionPool | None]:
        tls: ssl.SSLContext | bool = True
        if self._base.startswith("https://"):
            tls = await asyncio.to_thread(build_ssl_context, self._config)
        pool = None
        if self._direct:
            host, port = self._host_port
            pool = ConnectionPool(
                host,
                port,
                tls=tls if isinstance(tls, ssl.SSLContext) else None,
                server_hostname=self._config.tls_server_name or host,
                limit=self._max_connections,
                connect_timeout=self._connect_timeout,
            )
        requests = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=self._max_connections),
            timeout=self._timeout,
        )
        watches = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=0),  # one connection per watch
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout),
            read_bufsize=_WATCH_READ_BUFSIZE,
        )
        return requests, watches, pool

    async def _headers(self, headers: Headers | None) -> Headers:
        token = await self._token.get()
        if not token:
            return headers or {}  # aiohttp copies them: no copy of ours needed
        return {**(headers or {}), "Authorization": f"Bearer {token}"}

    def _url(self, path: str, params: Params | None) -> tuple[str | URL, Params | None]:
        """The request's URL and the parameters left for aiohttp to add: for a plain path,
        a URL built here already encoded (see ``_PLAIN_PATH``) and none left."""
        if _PLAIN_PATH.fullmatch(path) is None:
            return self._base + path, params
        # from the parts: yarl splits nothing (a third of URL(text, encoded=True)'s cost)
        return URL.build(
            scheme=self._scheme,
            authority=self._authority,
            path=self._base_path + path,
            query_string=_query(params) if params else "",
            encoded=True,
        ), None

    def _head(
        self, method: str, path: str, params: Params | None, headers: Headers, body: bytes | None
    ) -> bytes:
        """The request as bytes: request line, headers, body."""
        if _PLAIN_PATH.fullmatch(path) is not None:
            target = self._base_path + path
            if params:
                target += "?" + _query(params)
        else:
            target = URL(self._base + path).with_query(params or None).raw_path_qs
        key = tuple(headers.items())
        fields = self._heads.get(key)
        if fields is None:
            fields = self._heads[key] = self._fields(headers)
        line = f"{method} {target} HTTP/1.1\r\n".encode()
        if body is None:
            return line + fields + b"\r\n"
        return b"".join((line, fields, b"Content-Length: %d\r\n\r\n" % len(body), body))

    def _fields(self, headers: Headers) -> bytes:
        if len(self._heads) >= _MAX_QUERIES:
            self._heads.clear()  # a new token each time: start over, bounded
        lines = [f"Host: {self._authority}", "Accept-Encoding: gzip"]
        for name, value in headers.items():
            if any(c in name or c in value for c in "\r\n\0") or ":" in name:
                raise TransportError(f"header {name!r} has a character a header cannot carry")
            lines.append(f"{name}: {value}")
        try:
            return ("\r\n".join(lines) + "\r\n").encode("latin-1")
        except UnicodeEncodeError as err:
            raise TransportError(
                f"a header cannot carry {err.object[err.start : err.end]!r}"
            ) from err

    def _seen(self, status: int) -> None:
        if status == 401:
            self._token.expire()  # the token file may have rotated under us

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        timeout: float | None = None,
        # absolute (time.monotonic()), counting the session and credentials too; the
        # write fence passes it (an extension of the Transport protocol)
        deadline: float | None = None,
    ) -> Response:
        session = self._requests or (await self._sessions())[0]
        hdrs = await self._headers(headers)
        total = timeout or self._request_timeout
        if deadline is not None:
            # the deadline was set before the session and the credentials (an exec plugin
            # may take seconds): what is left of it now bounds the request on both ends
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimeout(f"{method} {path}: deadline passed before it was sent")
            total = min(total, left)
            if params is not None and "timeout" in params:
                params = {**params, "timeout": f"{max(1, math.floor(left * 1000))}ms"}
        if self._pool is not None:
            data = self._head(method, path, params, hdrs, body)
            reply = await self._pool.exchange(method, path, data, total)
            self._seen(reply.status)
            return Response(reply.status, reply.headers, reply.body)
        client_timeout = (
            self._timeout
            if total == self._request_timeout
            else aiohttp.ClientTimeout(total=total, sock_connect=self._connect_timeout)
        )
        url, params = self._url(path, params)
        try:
            async with session.request(
                method,
                url,
                params=params,
                data=body,
                headers=hdrs,
                timeout=client_timeout,
                server_hostname=self._config.tls_server_name,
                proxy=self._config.proxy_url,
            ) as resp:
                data = await resp.read()
        except _FAILURES as err:
            raise _translate(err, method, path) from err
        self._seen(resp.status)
        return Response(resp.status, resp.headers, data)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        headers: Headers | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[StreamResponse]:
        session = self._watches or (await self._sessions())[1]
        hdrs = await self._headers(headers)
        # sock_read: no bytes for that long fails the read, which is how a stalled
        # (half-open) watch connection is noticed.
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout, sock_read=read_timeout
        )
        try:
            resp = await session.request(
                method,
                self._base + path,
                params=params,
                headers=hdrs,
                timeout=client_timeout,
                server_hostname=self._config.tls_server_name,
                proxy=self._config.proxy_url,
            )
        except _FAILURES as err:
            raise _translate(err, method, path) from err
        self._seen(resp.status)
        try:
            yield _AiohttpStream(resp, method, path)
        finally:
            if resp.content.at_eof():
                resp.release()  # fully read: the connection can be reused
            else:
                resp.close()  # abandoned mid-stream: the connection is unusable

    async def close(self) -> None:
        async with self._setup:
            self._closed = True
            sessions = [s for s in (self._requests, self._watches) if s is not None]
            if self._pool is not None:
                self._pool.close()
            self._requests = self._watches = self._pool = None
        for session in sessions:
            await session.close()


class _AiohttpStream:
    def __init__(self, resp: aiohttp.ClientResponse, method: str, path: str) -> None:
        self._resp = resp
        self._what = (method, path)

    @property
    def status(self) -> int:
        return self._resp.status

    @property
    def headers(self) -> Headers:
        return self._resp.headers

    async def read(self) -> bytes:
        try:
            return await self._resp.read()
        except _FAILURES as err:
            raise _translate(err, *self._what) from err

    async def _chunk(self) -> bytes:
        try:
            return await self._resp.content.readany()
        except _FAILURES as err:
            raise _translate(err, *self._what) from err

    async def lines(self) -> AsyncIterator[bytes]:
        # Split chunks ourselves: aiohttp's readline re-concatenates a long line on
        # every chunk (quadratic for big objects); here a line spanning chunks is
        # joined once.
        pending: list[bytes] = []
        pending_size = 0
        while chunk := await self._chunk():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if pending:
                    pending.append(chunk[start:end])
                    line = b"".join(pending)
                    pending.clear()
                    pending_size = 0
                else:
                    line = chunk[start:end]
                start = end + 1
                if line:
                    yield line
            if start < len(chunk):
                pending.append(chunk[start:])
                pending_size += len(chunk) - start
                if pending_size > _MAX_WATCH_LINE:
                    method, path = self._what
                    raise TransportError(
                        f"{method} {path}: a stream line exceeds {_MAX_WATCH_LINE} bytes"
                    )
        if pending_size:
            yield b"".join(pending)
