"""kubeloop's own HTTP/1.1 connections (``_h1``) against a raw asyncio server that
answers byte for byte as told: keep-alive, chunked and gzip bodies, a server that closes
idle connections, timeouts, cancellation, the connection limit."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from kubeloop import _h1
from kubeloop._errors import RequestTimeout, TransportError
from kubeloop._h1 import ConnectionPool

Reply = Callable[[bytes], Awaitable[bytes | None]]


@dataclass
class Server:
    """Counts connections and the requests read on each; ``reply`` gets each request's
    head and returns the bytes to answer (None: answer nothing, keep the connection;
    empty: hang up)."""

    reply: Reply
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0
    closed_after_each: bool = False
    eofs: int = 0


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))
    return head


@pytest.fixture
async def server() -> AsyncIterator[Callable[[Reply], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(reply: Reply) -> Server:
        state = Server(reply)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state.connections += 1
            state.open_now += 1
            state.most_open = max(state.most_open, state.open_now)
            try:
                while (head := await _read_request(reader)) is not None:
                    state.requests.append(head)
                    answer = await state.reply(head)
                    if answer == b"":
                        break  # hang up without answering
                    if answer is not None:
                        writer.write(answer)
                        await writer.drain()
                    if state.closed_after_each:
                        break
                else:
                    state.eofs += 1
            finally:
                state.open_now -= 1
                writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(srv)
        state.port = srv.sockets[0].getsockname()[1]
        return state

    yield start
    for srv in servers:
        srv.close()


def pool(port: int, limit: int = 4) -> ConnectionPool:
    return ConnectionPool(
        "127.0.0.1", port, tls=None, server_hostname=None, limit=limit, connect_timeout=2
    )


def request(method: str = "GET", path: str = "/x", body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def ok(body: bytes = b"{}", *extra: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def test_keep_alive_one_connection_for_sequential_requests(server) -> None:
    async def reply(head: bytes) -> bytes:
        return ok(b'{"n": 1}', "X-Thing: yes")

    srv = await server(reply)
    p = pool(srv.port)
    try:
        replies = [await p.exchange("GET", "/x", request(), 5) for _ in range(5)]
    finally:
        p.close()
    assert srv.connections == 1
    assert len(srv.requests) == 5
    assert {r.status for r in replies} == {200}
    assert replies[0].body == b'{"n": 1}'
    assert replies[0].headers["x-thing"] == "yes"
    assert replies[0].headers.get("X-THING") == "yes"
    assert replies[0].headers.get("Retry-After") is None


async def test_chunked_and_gzip_bodies(server) -> None:
    payload = b'{"items": [' + b",".join(b'{"i": %d}' % i for i in range(2000)) + b"]}"
    packed = gzip.compress(payload)

    async def reply(head: bytes) -> bytes:
        if head.startswith(b"GET /chunked"):
            parts = [payload[i : i + 1000] for i in range(0, len(payload), 1000)]
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in parts) + b"0\r\n\r\n"
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
        return ok(packed, "Content-Encoding: gzip")

    srv = await server(reply)
    p = pool(srv.port)
    try:
        chunked = await p.exchange("GET", "/chunked", request(path="/chunked"), 5)
        zipped = await p.exchange("GET", "/gzip", request(path="/gzip"), 5)
    finally:
        p.close()
    assert chunked.body == payload
    assert zipped.body == payload
    assert srv.connections == 1  # both kept the connection


async def test_a_connection_the_server_closed_while_idle(server) -> None:
    """The server closes each connection after its answer (without saying so): the
    client notices, and the next request of any method goes on a new connection."""

    async def reply(head: bytes) -> bytes:
        return ok()

    srv = await server(reply)
    srv.closed_after_each = True
    p = pool(srv.port)
    try:
        await p.exchange("GET", "/x", request(), 5)
        await asyncio.sleep(0.05)  # the close reaches the client
        post = await p.exchange("POST", "/x", request("POST", body=b"{}"), 5)
    finally:
        p.close()
    assert post.status == 200
    assert [h.split(b" ")[0] for h in srv.requests] == [b"GET", b"POST"]
    assert srv.connections == 2


@pytest.mark.parametrize(("method", "resent"), [("PUT", True), ("GET", True), ("POST", False)])
async def test_a_reused_connection_closed_before_any_answer(server, method, resent) -> None:
    """The server reads a request on a reused connection and hangs up without a byte of
    an answer (a keep-alive close racing the request): an idempotent request is sent
    again once on a new connection; a POST fails (the server may have acted on it)."""
    hang_up = [False]

    async def reply(head: bytes) -> bytes:
        if hang_up[0]:
            hang_up[0] = False
            return b""  # close without answering
        return ok()

    srv = await server(reply)
    p = pool(srv.port)
    try:
        await p.exchange("GET", "/x", request(), 5)
        hang_up[0] = True
        if resent:
            again = await p.exchange(method, "/x", request(method, body=b"{}"), 5)
            assert again.status == 200
        else:
            with pytest.raises(TransportError, match="POST /x"):
                await p.exchange(method, "/x", request(method, body=b"{}"), 5)
    finally:
        p.close()
    sent = [h.split(b" ")[0].decode() for h in srv.requests]
    assert sent == ["GET", method, method] if resent else ["GET", method]
    assert srv.connections == (2 if resent else 1)


async def test_timeout_closes_the_connection(server) -> None:
    hang = asyncio.Event()

    async def reply(head: bytes) -> bytes | None:
        if head.startswith(b"GET /slow"):
            await hang.wait()
            return None
        return ok()

    srv = await server(reply)
    p = pool(srv.port)
    try:
        with pytest.raises(RequestTimeout, match="GET /slow"):
            await p.exchange("GET", "/slow", request(path="/slow"), 0.2)
        fine = await p.exchange("GET", "/x", request(), 5)
    finally:
        hang.set()
        p.close()
    assert fine.status == 200
    assert srv.connections == 2  # the timed-out one was not reused


async def test_cancelled_request_does_not_leave_its_answer_for_the_next(server) -> None:
    release = asyncio.Event()

    async def reply(head: bytes) -> bytes:
        if head.startswith(b"GET /first"):
            await release.wait()
            return ok(b'"first"')
        return ok(b'"second"')

    srv = await server(reply)
    p = pool(srv.port, limit=1)
    try:
        first = asyncio.create_task(p.exchange("GET", "/first", request(path="/first"), 5))
        await asyncio.sleep(0.1)
        first.cancel()
        release.set()
        second = await p.exchange("GET", "/second", request(path="/second"), 5)
    finally:
        p.close()
    assert second.body == b'"second"'
    assert srv.connections == 2


async def test_connection_close_is_honoured(server) -> None:
    async def reply(head: bytes) -> bytes:
        return ok(b"{}", "Connection: close")

    srv = await server(reply)
    p = pool(srv.port)
    try:
        for _ in range(3):
            await p.exchange("GET", "/x", request(), 5)
    finally:
        p.close()
    assert srv.connections == 3


async def test_idle_connections_are_dropped_after_the_keepalive(server, monkeypatch) -> None:
    monkeypatch.setattr(_h1, "KEEPALIVE_S", 0.1)

    async def reply(head: bytes) -> bytes:
        return ok()

    srv = await server(reply)
    p = pool(srv.port)
    try:
        await p.exchange("GET", "/x", request(), 5)
        await p.exchange("GET", "/x", request(), 5)
        await asyncio.sleep(0.2)
        await p.exchange("GET", "/x", request(), 5)
    finally:
        p.close()
    assert srv.connections == 2


async def test_at_most_limit_requests_at_once(server) -> None:
    async def reply(head: bytes) -> bytes:
        await asyncio.sleep(0.05)
        return ok()

    srv = await server(reply)
    p = pool(srv.port, limit=2)
    try:
        replies = await asyncio.gather(*(p.exchange("GET", "/x", request(), 5) for _ in range(8)))
    finally:
        p.close()
    assert len(replies) == 8
    assert srv.most_open == 2
    assert srv.connections == 2


async def test_malformed_response_is_a_transport_error(server) -> None:
    async def reply(head: bytes) -> bytes:
        return b"NOT HTTP AT ALL\r\n\r\n"

    srv = await server(reply)
    p = pool(srv.port)
    try:
        with pytest.raises(TransportError, match="malformed"):
            await p.exchange("GET", "/x", request(), 5)
    finally:
        p.close()


async def test_connection_refused_names_the_request() -> None:
    p = pool(1)
    with pytest.raises(TransportError, match="GET /nowhere"):
        await p.exchange("GET", "/nowhere", request(), 5)
