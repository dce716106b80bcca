"""HttpTransport against a local aiohttp server: streaming, timeouts, TLS, auth."""

from __future__ import annotations

import asyncio
import glob
import os
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from kubeloop import _pki
from kubeloop._config import ClusterConfig
from kubeloop._errors import ConfigError, RequestTimeout, TransportError
from kubeloop._transport import HttpTransport, build_ssl_context

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)  # handlers that hang are cut off
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock, ssl_context=tls).start()
    return runner, sock.getsockname()[1]


@pytest.fixture
async def server() -> AsyncIterator[Callable[..., Awaitable[int]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, tls: ssl.SSLContext | None = None) -> int:
        runner, port = await serve(handler, tls)
        runners.append(runner)
        return port

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_request_sends_token_and_returns_errors_as_responses(server) -> None:
    seen: dict[str, str] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(request.headers)
        seen["selector"] = request.query["labelSelector"]
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}", token="s3cret"))
    try:
        resp = await transport.request("GET", "/api/v1/x", params={"labelSelector": "a in (b)"})
    finally:
        await transport.close()
    assert resp.status == 404
    assert b'"Status"' in resp.body
    assert seen["Authorization"] == "Bearer s3cret"
    assert seen["selector"] == "a in (b)"


async def test_paths_and_parameters_reach_the_server_as_sent(server) -> None:
    """A plain path is sent with its query encoded here (not re-parsed by yarl); a path
    with characters a URL must escape goes the general way. Either way the server reads
    back exactly the path and the parameters given."""
    seen: list[tuple[str, dict[str, str]]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.path, dict(request.query)))
        return web.json_response({})

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    params = {"fieldManager": "kubeloop-a", "labelSelector": "a in (b,c),d!=e&f", "x": "1%2"}
    try:
        await transport.request("PUT", "/api/v1/namespaces/n/configmaps/c/status", params=params)
        await transport.request("GET", "/api/v1/namespaces/n/configmaps/c.1-2", params=params)
        await transport.request("GET", "/api/v1/namespaces/n/configmaps/a b%", params=params)
        await transport.request("GET", "/version")
    finally:
        await transport.close()
    assert seen == [
        ("/api/v1/namespaces/n/configmaps/c/status", params),
        ("/api/v1/namespaces/n/configmaps/c.1-2", params),
        ("/api/v1/namespaces/n/configmaps/a b%", params),
        ("/version", {}),
    ]


async def test_stream_lines_across_chunks_and_big_lines(server) -> None:
    big = b'{"x":"' + b"a" * (3 * 1024 * 1024) + b'"}'

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for piece in (b'{"n":1}\n{"n"', b":2}\n\n", big[:1000], big[1000:], b"\n", b'{"n":3}'):
            await resp.write(piece)
            await asyncio.sleep(0)
        await resp.write_eof()
        return resp

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    try:
        async with transport.stream("GET", "/watch") as resp:
            assert resp.status == 200
            lines = [line async for line in resp.lines()]
    finally:
        await transport.close()
    assert lines == [b'{"n":1}', b'{"n":2}', big, b'{"n":3}']


async def test_stream_read_timeout(server) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b'{"n":1}\n')
        await asyncio.sleep(30)
        return resp

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    got: list[bytes] = []

    async def consume() -> None:
        async with transport.stream("GET", "/watch", read_timeout=0.3) as resp:
            async for line in resp.lines():
                got.append(line)

    try:
        with pytest.raises(RequestTimeout):
            await consume()
    finally:
        await transport.close()
    assert got == [b'{"n":1}']


async def test_request_timeout(server) -> None:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response()

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(RequestTimeout):
            await transport.request("GET", "/", timeout=0.3)
    finally:
        await transport.close()


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(TransportError) as info:
            await transport.request("GET", "/")
        assert not isinstance(info.value, RequestTimeout)
        with pytest.raises(TransportError):
            async with transport.stream("GET", "/"):
                pass
    finally:
        await transport.close()


async def test_mutual_tls_with_server_name(server, tmp_path: Path) -> None:
    ca = _pki.CertificateAuthority()
    serving = ca.serving()
    _pki.write(tmp_path / "srv.crt", serving.cert_pem)
    _pki.write(tmp_path / "srv.key", serving.key_pem)
    _pki.write(tmp_path / "ca.crt", ca.cert_pem)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    tls.load_cert_chain(tmp_path / "srv.crt", tmp_path / "srv.key")
    tls.verify_mode = ssl.CERT_REQUIRED

    async def handler(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert")  # type: ignore[union-attr]
        subject = dict(x[0] for x in peer["subject"])
        return web.Response(text=subject["commonName"])

    port = await server(handler, tls)
    client = ca.client("alice", ("devs",))
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "kubeloop-*.pem")))
    # the serving certificate names localhost and 127.0.0.1; connecting to 127.0.0.1
    # while verifying "localhost" exercises tls_server_name
    config = ClusterConfig(
        f"https://127.0.0.1:{port}",
        ca_data=ca.cert_pem,
        client_cert_data=client.cert_pem,
        client_key_data=client.key_pem,
        tls_server_name="localhost",
    )
    transport = HttpTransport(config)
    try:
        resp = await transport.request("GET", "/")
    finally:
        await transport.close()
    assert resp.body == b"alice"
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "kubeloop-*.pem"))) == before

    wrong = HttpTransport(ClusterConfig(f"https://127.0.0.1:{port}", tls_server_name="x.y"))
    try:
        with pytest.raises(TransportError):
            await wrong.request("GET", "/")
    finally:
        await wrong.close()


def test_bad_tls_material() -> None:
    with pytest.raises(ConfigError, match="invalid TLS material"):
        build_ssl_context(ClusterConfig("https://h", ca_data=b"not a pem"))


def test_insecure_context() -> None:
    ctx = build_ssl_context(ClusterConfig("https://h", insecure=True))
    assert ctx.verify_mode == ssl.CERT_NONE
    assert not ctx.check_hostname


@pytest.mark.parametrize(
    "server",
    ["https://10.0.0.1:6443", "https://example.com/", "http://[::1]:8080/prefix", "https://h/a/b/"],
)
@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/namespaces/ns/configmaps/x", None),
        ("/apis/g.dev/v1/namespaces/ns/things/a.b-c/status", {"fieldManager": "m-ctl"}),
        ("/api/v1/pods", {"labelSelector": "a in (b,c),!d", "limit": "500"}),
    ],
)
def test_a_plain_path_url_is_the_one_the_general_way_builds(
    server: str, path: str, params: dict[str, str] | None
) -> None:
    # the fast path builds the URL from parts; it must be the URL aiohttp would send
    from yarl import URL

    transport = HttpTransport(ClusterConfig(server=server))
    url, rest = transport._url(path, params)
    assert rest is None
    expected = URL(server.rstrip("/") + path).with_query(params or {})
    assert isinstance(url, URL)
    # the same URL (the query's escaping may differ: the server decodes both alike)
    parts = (url.scheme, url.host, url.port, url.raw_path, dict(url.query))
    assert parts == (expected.scheme, expected.host, expected.port, expected.raw_path, params or {})


async def test_a_header_that_could_split_the_request_is_refused(server) -> None:
    """A value with a line break would end the header block early on kubeloop's own
    connections (no library in between to refuse it): refused before anything is sent."""
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({})

    port = await server(handler)
    transport = HttpTransport(ClusterConfig(f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(TransportError, match="X-Bad"):
            await transport.request("GET", "/x", headers={"X-Bad": "a\r\nX-Injected: 1"})
        with pytest.raises(TransportError, match="cannot carry"):
            await transport.request("GET", "/x", headers={"X-Name": "\u2603"})
        ok = await transport.request("GET", "/x", headers={"X-Fine": "yes"})
    finally:
        await transport.close()
    assert ok.status == 200
    assert seen == ["/x"]
