"""Client behaviour that a real apiserver cannot be made to show on demand: retries,
throttling, an expiring continue token, malformed streams. Uses a scripted transport."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubeloop._client import Client, PatchType, WatchEvent
from kubeloop._config import ClusterConfig
from kubeloop._errors import (
    AlreadyExists,
    Conflict,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
)
from kubeloop._resource import CONFIGMAPS, NODES, Resource
from kubeloop._transport import Headers, Params, Response

Reply = Response | Exception


def status(code: int, reason: str, message: str = "") -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
        }
    ).encode()


def ok(obj: Any) -> Response:
    return Response(200, {}, json.dumps(obj).encode())


class FakeStream:
    def __init__(self, status: int, lines: list[bytes], body: bytes = b"") -> None:
        self.status = status
        self.headers: Headers = {}
        self._lines = lines
        self._body = body

    async def read(self) -> bytes:
        return self._body

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            yield line


class FakeTransport:
    """Replies in order; records what was asked."""

    def __init__(self, *replies: Reply, stream: FakeStream | None = None) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, str, dict[str, str], Any, dict[str, str]]] = []
        self._stream = stream
        self.closed = False

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Response:
        self.calls.append(
            (
                method,
                path,
                dict(params or {}),
                json.loads(body) if body else None,
                dict(headers or {}),
            )
        )
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        headers: Headers | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[FakeStream]:
        self.calls.append((method, path, dict(params or {}), None, dict(headers or {})))
        assert self._stream is not None
        yield self._stream

    async def close(self) -> None:
        self.closed = True


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None, int]] = []

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        assert seconds >= 0
        self.seen.append((verb, resource.plural if resource else None, subresource, code))


CONFIG = ClusterConfig("https://h")


def make(transport: FakeTransport, **kwargs: Any) -> Client:
    return Client(CONFIG, transport=transport, **kwargs)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record backoff sleeps instead of waiting."""
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("kubeloop._client.asyncio.sleep", fake_sleep)
    return slept


async def test_get_retries_connection_errors(no_sleep: list[float]) -> None:
    transport = FakeTransport(TransportError("reset"), TransportError("reset"), ok({"a": 1}))
    rec = Recorder()
    assert await make(transport, observer=rec).get(CONFIGMAPS, "x", "ns") == {"a": 1}
    assert len(transport.calls) == 3
    assert rec.seen == [("get", "configmaps", None, 0)] * 2 + [("get", "configmaps", None, 200)]
    assert len(no_sleep) == 2
    assert all(0 < s < 1 for s in no_sleep)


async def test_get_gives_up_after_three_tries() -> None:
    transport = FakeTransport(*(TransportError("reset") for _ in range(3)))
    with pytest.raises(TransportError):
        await make(transport).get(CONFIGMAPS, "x", "ns")
    assert len(transport.calls) == 3


async def test_writes_are_not_retried() -> None:
    transport = FakeTransport(TransportError("reset"))
    with pytest.raises(TransportError):
        await make(transport).create(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "ns"}})
    assert len(transport.calls) == 1


async def test_throttled_read_waits_for_retry_after(no_sleep: list[float]) -> None:
    transport = FakeTransport(
        Response(429, {"Retry-After": "2"}, status(429, "TooManyRequests")),
        ok({"kind": "ConfigMapList", "items": []}),
    )
    await make(transport).list(CONFIGMAPS, "ns")
    assert len(transport.calls) == 2
    assert 2 <= no_sleep[0] < 2.2


async def test_throttled_write_raises_with_retry_after() -> None:
    transport = FakeTransport(Response(429, {"Retry-After": "3"}, status(429, "TooManyRequests")))
    with pytest.raises(TooManyRequests) as info:
        await make(transport).patch(CONFIGMAPS, "x", {"data": {}}, "ns")
    assert info.value.retry_after == 3.0


async def test_server_error_without_retry_after_is_not_retried() -> None:
    transport = FakeTransport(Response(500, {}, status(500, "InternalError", "boom")))
    with pytest.raises(ServerError, match="boom"):
        await make(transport).get(CONFIGMAPS, "x", "ns")
    assert len(transport.calls) == 1


async def test_error_bodies() -> None:
    transport = FakeTransport(
        Response(409, {}, status(409, "AlreadyExists")),
        Response(409, {}, status(409, "Conflict")),
        Response(404, {}, b"404 page not found"),
    )
    client = make(transport)
    obj = {"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"}}
    with pytest.raises(AlreadyExists):
        await client.create(CONFIGMAPS, obj)
    with pytest.raises(Conflict):
        await client.update(CONFIGMAPS, obj)
    with pytest.raises(NotFound, match="404 page not found"):
        await client.get(CONFIGMAPS, "x", "ns")


async def test_list_all_restarts_once_when_continue_expires() -> None:
    def page(names: list[str], cont: str | None, rv: str) -> Response:
        meta: dict[str, Any] = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
        return ok(
            {
                "kind": "ConfigMapList",
                "apiVersion": "v1",
                "metadata": meta,
                "items": [{"metadata": {"name": n}} for n in names],
            }
        )

    transport = FakeTransport(
        page(["a", "b"], "c1", "10"),
        Response(410, {}, status(410, "Expired", "continue token expired")),
        page(["a", "b"], "c2", "20"),
        page(["c"], None, "20"),
    )
    items, rv = await make(transport).list_all(CONFIGMAPS, "ns", limit=2, resource_version="0")
    assert [i["metadata"]["name"] for i in items] == ["a", "b", "c"]
    assert rv == "20"
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
    params = [c[2] for c in transport.calls]
    assert params[0] == {"limit": "2", "resourceVersion": "0"}
    assert params[1] == {"limit": "2", "continue": "c1"}
    assert params[2] == {"limit": "2", "resourceVersion": "0"}
    assert params[3] == {"limit": "2", "continue": "c2"}


async def test_list_all_gives_up_on_second_expiry() -> None:
    cont = ok({"metadata": {"continue": "c", "resourceVersion": "1"}, "items": []})
    gone = Response(410, {}, status(410, "Expired"))
    transport = FakeTransport(cont, gone, cont, gone)
    with pytest.raises(Gone):
        await make(transport).list_all(CONFIGMAPS)


async def test_request_shapes() -> None:
    transport = FakeTransport(*(ok({}) for _ in range(6)))
    client = make(transport, field_manager="me")
    await client.patch(
        CONFIGMAPS,
        "x",
        [{"op": "add", "path": "/data", "value": {}}],
        "ns",
        patch_type=PatchType.JSON,
    )
    await client.apply(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "ns"}}, force=True)
    await client.delete(
        CONFIGMAPS,
        "x",
        "ns",
        preconditions={"uid": "u"},
        propagation_policy="Foreground",
        grace_period_seconds=0,
    )
    await client.delete(NODES, "n1")
    await client.patch_scale(
        Resource("apps", "v1", "deployments", "Deployment"), "d", {"spec": {"replicas": 2}}, "ns"
    )
    await client.update_status(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "ns"}})

    (m1, p1, q1, b1, h1), (_, _, q2, b2, h2), (m3, p3, _, b3, _), (m4, p4, _, b4, _) = (
        transport.calls[:4]
    )
    assert (m1, p1, q1) == ("PATCH", "/api/v1/namespaces/ns/configmaps/x", {"fieldManager": "me"})
    assert h1["Content-Type"] == "application/json-patch+json"
    assert b1 == [{"op": "add", "path": "/data", "value": {}}]
    assert q2 == {"fieldManager": "me", "force": "true"}
    assert h2["Content-Type"] == "application/apply-patch+yaml"
    assert (b2["apiVersion"], b2["kind"]) == ("v1", "ConfigMap")
    assert (m3, p3) == ("DELETE", "/api/v1/namespaces/ns/configmaps/x")
    assert b3 == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u"},
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
    }
    assert (m4, p4, b4) == ("DELETE", "/api/v1/nodes/n1", None)
    assert transport.calls[4][1] == "/apis/apps/v1/namespaces/ns/deployments/d/scale"
    assert transport.calls[5][:2] == ("PUT", "/api/v1/namespaces/ns/configmaps/x/status")


async def test_argument_errors() -> None:
    client = make(FakeTransport())
    with pytest.raises(ValueError, match="namespaced"):
        await client.get(CONFIGMAPS, "x")
    with pytest.raises(ValueError, match="name is required"):
        await client.get(CONFIGMAPS, "", "ns")
    with pytest.raises(ValueError, match="server-side apply"):
        await client.patch(CONFIGMAPS, "x", {}, "ns", force=True)


async def collect(client: Client, **kwargs: Any) -> list[WatchEvent]:
    return [e async for e in client.watch(CONFIGMAPS, "ns", resource_version="5", **kwargs)]


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


async def test_watch_events_and_params() -> None:
    stream = FakeStream(200, [line("ADDED", {"a": 1}), line("BOOKMARK", {"b": 2})])
    transport = FakeTransport(stream=stream)
    rec = Recorder()
    events = await collect(make(transport, observer=rec), timeout_seconds=5)
    assert events == [WatchEvent("ADDED", {"a": 1}), WatchEvent("BOOKMARK", {"b": 2})]
    assert transport.calls[0][2] == {
        "watch": "true",
        "resourceVersion": "5",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "5",
    }
    assert rec.seen == [("watch", "configmaps", None, 200)]


async def test_watch_error_event_raises_gone() -> None:
    expired = json.loads(status(410, "Expired", "too old resource version"))
    stream = FakeStream(200, [line("ADDED", {}), line("ERROR", expired), line("ADDED", {})])
    seen: list[WatchEvent] = []

    async def consume() -> None:
        async for event in make(FakeTransport(stream=stream)).watch(
            CONFIGMAPS, resource_version="1"
        ):
            seen.append(event)

    with pytest.raises(Gone, match="too old"):
        await consume()
    assert len(seen) == 1


async def test_watch_http_error_and_garbage() -> None:
    stream = FakeStream(403, [], status(403, "Forbidden"))
    with pytest.raises(Exception, match="Forbidden"):
        await collect(make(FakeTransport(stream=stream)))
    with pytest.raises(TransportError, match="malformed"):
        await collect(make(FakeTransport(stream=FakeStream(200, [b"{not json"]))))


async def test_discovery_caches_and_refreshes_on_miss() -> None:
    def resources(*kinds: str) -> Response:
        return ok(
            {
                "kind": "APIResourceList",
                "groupVersion": "test.dev/v1",
                "resources": [
                    *({"name": k.lower() + "s", "kind": k, "namespaced": True} for k in kinds),
                    *(
                        {"name": k.lower() + "s/status", "kind": k, "namespaced": True}
                        for k in kinds
                    ),
                ],
            }
        )

    transport = FakeTransport(resources("A"), resources("A", "B"), resources("A", "B"))
    client = make(transport)
    assert await client.discover("test.dev/v1", "A") == Resource("test.dev", "v1", "as", "A")
    assert await client.discover("test.dev/v1", "A") == Resource("test.dev", "v1", "as", "A")
    assert len(transport.calls) == 1
    assert (await client.discover("test.dev/v1", "B")).plural == "bs"
    with pytest.raises(NotFound):
        await client.discover("test.dev/v1", "C")
    assert [c[1] for c in transport.calls] == ["/apis/test.dev/v1"] * 3


async def test_observer_failures_do_not_break_requests() -> None:
    class Broken:
        def on_request(self, *args: Any) -> None:
            raise RuntimeError("metrics bug")

    assert await make(FakeTransport(ok({"x": 1})), observer=Broken()).server_version() == {"x": 1}


async def test_close_only_closes_owned_transport() -> None:
    transport = FakeTransport()
    async with make(transport):
        pass
    assert not transport.closed


def test_retry_after_parsing() -> None:
    from kubeloop._client import _retry_after

    parse: Callable[[str], float | None] = lambda v: _retry_after({"Retry-After": v})  # noqa: E731
    assert parse("5") == 5.0
    assert parse("-1") == 0.0
    assert parse("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse("soon") is None
    assert _retry_after({}) is None


async def test_evict_posts_a_policy_v1_eviction_and_a_pdb_refusal_is_not_retried() -> None:
    transport = FakeTransport(
        ok({"kind": "Status", "status": "Success"}),
        Response(429, {}, status(429, "TooManyRequests", "would violate the disruption budget")),
    )
    client = make(transport)
    await client.evict("web-1", "prod")
    with pytest.raises(TooManyRequests):
        await client.evict("web-2", "prod", grace_period_seconds=5)
    (m1, p1, _, b1, _), (_, p2, _, b2, _) = transport.calls
    assert (m1, p1) == ("POST", "/api/v1/namespaces/prod/pods/web-1/eviction")
    assert b1 == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "prod"},
    }
    assert p2 == "/api/v1/namespaces/prod/pods/web-2/eviction"
    assert b2["deleteOptions"] == {"gracePeriodSeconds": 5}
    assert len(transport.calls) == 2  # the 429 was raised, not retried
