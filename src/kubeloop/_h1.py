"""Requests to the API server over kubeloop's own HTTP/1.1 keep-alive connections.

Why not aiohttp for these: a controller's hot path is many small requests (a status
write per object) on a few keep-alive connections, and aiohttp's ``ClientSession``
spends per request more CPU than the rest of a reconcile: a ``ClientRequest`` and a
``ClientResponse`` object, multidict headers, a yarl URL, tracing hooks, the cookie
jar, a stream reader, timer contexts (``docs/benchmarks.md``, write path). Here a
request is one bytes write, and the response is parsed in ``data_received`` by
httptools (the C HTTP parser uvicorn uses): one future per request, no task, no
stream. Watches stay on aiohttp (long-lived, read incrementally) and so does every
request through an HTTP proxy.

What it keeps of HTTP/1.1, and why that is enough: the API server answers each request
with a complete response (``Content-Length`` or chunked; gzip above 128 KiB when asked),
never an interim ``1xx`` (no ``Expect``), and kubeloop sends no ``HEAD``. A connection
the server closed while idle is found on its next use; a request on such a reused
connection that got no byte of a response is sent again once if its method is
idempotent (as aiohttp and Go's transport do), otherwise it fails as a
:class:`TransportError`.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Iterator, Mapping

import httptools

from kubeloop._errors import RequestTimeout, TransportError

#: Methods sent again once on a fresh connection when a reused one turned out closed.
_IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "OPTIONS"})
#: A connection idle this long is closed rather than reused: load balancers in front
#: of an API server drop idle flows silently (aiohttp's default keep-alive, too).
KEEPALIVE_S = 15.0


class ResponseHeaders(Mapping[str, str]):
    """Response headers, looked up case-insensitively (as aiohttp's are). Built into a
    dict on the first lookup: the hot path reads none."""

    __slots__ = ("_by_name", "_raw")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._by_name: dict[str, str] | None = None

    def _names(self) -> dict[str, str]:
        if self._by_name is None:
            # latin-1: header bytes as they came, whatever they are
            self._by_name = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in self._raw}
        return self._by_name

    def __getitem__(self, name: str) -> str:
        return self._names()[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


class _Reply:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: ResponseHeaders, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class _ClosedEarly(TransportError):
    """The connection ended before any byte of the response (a reused one: the server
    had closed it while idle)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[_Reply] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._encoding: bytes | None = None
        self._started = False  # a byte of the current response arrived
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self._what = ("", "")  # the current request's method and path, for errors

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._started = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            method, path = self._what
            self._fail(TransportError(f"{method} {path}: malformed response: {err}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            method, path = self._what
            why = f"connection lost: {exc}" if exc else "connection closed by the server"
            what = f"{method} {path}: {why}"
            self._fail(TransportError(what) if self._started else _ClosedEarly(what))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        if len(name) == 16 and name.lower() == b"content-encoding":
            self._encoding = value

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self.reusable = self._parser.should_keep_alive()
        try:
            if self._encoding is not None:
                body = _decoded(self._encoding, body)
        except (zlib.error, TransportError) as err:
            self.reusable = False
            method, path = self._what
            waiter.set_exception(TransportError(f"{method} {path}: undecodable body: {err}"))
            return
        headers = ResponseHeaders(self._headers)
        waiter.set_result(_Reply(self._parser.get_status_code(), headers, body))

    # used by the pool

    def _fail(self, err: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(err)

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self._transport is not None:
            self._transport.abort()

    async def exchange(self, data: bytes, timeout: float, what: tuple[str, str]) -> _Reply:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[_Reply] = loop.create_future()
        self._waiter = waiter
        self._what = what
        self._headers = []
        self._body = []
        self._encoding = None
        self._started = False
        self.reusable = False
        assert self._transport is not None
        self._transport.write(data)
        expiry = loop.call_later(timeout, self._expire, waiter, what, timeout)
        try:
            return await waiter
        except BaseException:
            # timed out, failed or cancelled mid-exchange: what is left on the wire is
            # unknown, so the connection cannot carry another request
            self.close()
            raise
        finally:
            expiry.cancel()
            self._waiter = None

    def _expire(
        self, waiter: asyncio.Future[_Reply], what: tuple[str, str], timeout: float
    ) -> None:
        if not waiter.done():
            method, path = what
            waiter.set_exception(
                RequestTimeout(f"{method} {path}: no complete response in {timeout:g}s")
            )


class ConnectionPool:
    """Keep-alive connections to one server, at most ``limit`` requests at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
        connect_timeout: float,
    ) -> None:
        self._host, self._port = host, port
        self._tls = tls
        self._server_hostname = server_hostname
        self._connect_timeout = connect_timeout
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()

    async def _connect(self, what: tuple[str, str]) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection,
                    self._host,
                    self._port,
                    ssl=self._tls,
                    server_hostname=self._server_hostname if self._tls else None,
                )
        except TimeoutError as err:
            method, path = what
            raise RequestTimeout(
                f"{method} {path}: connect timed out after {self._connect_timeout:g}s"
            ) from err
        except (OSError, ssl.SSLError) as err:
            method, path = what
            raise TransportError(f"{method} {path}: {type(err).__name__}: {err}") from err
        self._open.add(conn)
        return conn

    def _idle_connection(self) -> _Connection | None:
        if not self._idle:
            return None
        stale = asyncio.get_running_loop().time() - KEEPALIVE_S
        while self._idle:
            conn = self._idle.pop()  # the most recently used first
            if not conn.closed and conn.idle_since > stale:
                return conn
            if conn.idle_since <= stale:
                # the least recently used are older still: close them all
                for old in (*self._idle, conn):
                    old.close()
                    self._open.discard(old)
                self._idle.clear()
                return None
            self._open.discard(conn)
        return None

    async def exchange(self, method: str, path: str, data: bytes, timeout: float) -> _Reply:
        """Send ``data`` (a whole request) and wait at most ``timeout`` for the whole
        response; ``method`` and ``path`` name it in errors."""
        what = (method, path)
        async with self._slots:
            conn = self._idle_connection()
            if conn is not None:
                try:
                    reply = await conn.exchange(data, timeout, what)
                except _ClosedEarly:
                    self._open.discard(conn)
                    if method not in _IDEMPOTENT:
                        raise
                    conn = None
                else:
                    self._release(conn)
                    return reply
            conn = await self._connect(what)
            try:
                reply = await conn.exchange(data, timeout, what)
            except BaseException:
                self._open.discard(conn)
                raise
            self._release(conn)
            return reply

    def _release(self, conn: _Connection) -> None:
        if conn.reusable and not conn.closed:
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
        else:
            conn.close()
            self._open.discard(conn)

    def close(self) -> None:
        for conn in self._open:
            conn.close()
        self._open.clear()
        self._idle.clear()


def _decoded(encoding: bytes, body: bytes) -> bytes:
    """The body without its ``Content-Encoding`` (the server gzips responses above
    128 KiB when the request accepts it)."""
    encoding = encoding.strip().lower()
    if not body or encoding == b"identity":
        return body
    if encoding in (b"gzip", b"x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == b"deflate":
        return zlib.decompress(body)
    raise TransportError(f"unsupported Content-Encoding {encoding.decode('latin-1')!r}")
