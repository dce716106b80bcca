"""HTTP to the API server: a small :class:`Transport` protocol and its aiohttp implementation.

Why aiohttp: it was the fastest HTTP/1.1 client measured for this workload (C
parser; 2-3x cheaper than httpx/httpx2 for many concurrent small requests, and
cheapest for large LIST bodies and watch streams; see
``research/python-client.md`` §3.3). It has no HTTP/2, which avoids the HTTP/2
pitfall in §2.5: the apiserver allows 100 streams per connection and httpcore
queues the 101st request behind long-lived watches instead of opening a new
connection.

HTTP/1.1 has the same problem as a pool limit, so watches get their **own**
session and connection pool without a connection limit: a hundred watches can
never starve reads and writes. Everything above this module talks to the
protocol, so a different transport (or a fake in tests) can be dropped in.
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


class AiohttpTransport:
    """:class:`Transport` over two aiohttp sessions: one for requests, one for watches.

    Sessions are created on first use, inside the event loop, with the TLS context
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
        self._setup = asyncio.Lock()
        self._closed = False

    async def _sessions(self) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
        if self._requests is None or self._watches is None:
            async with self._setup:
                if self._closed:
                    raise TransportError("transport is closed")
                if self._requests is None or self._watches is None:
                    self._requests, self._watches = await self._open()
        return self._requests, self._watches

    async def _open(self) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
        tls: ssl.SSLContext | bool = True
        if self._base.startswith("https://"):
            tls = await asyncio.to_thread(build_ssl_context, self._config)
        requests = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=self._max_connections),
            timeout=self._timeout,
        )
        watches = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=0),  # one connection per watch
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout),
            read_bufsize=_WATCH_READ_BUFSIZE,
        )
        return requests, watches

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
            self._requests = self._watches = None
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
