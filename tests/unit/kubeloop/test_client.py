"""Client behaviour that a real apiserver cannot be made to show on demand: retries,
throttling, an expiring continue token, malformed streams. Uses a scripted transport."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
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
    kwargs.setdefault("qps", None)  # the rate limit has its own tests
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


def throttled(code: int = 429, after: str = "3") -> Response:
    reason = "TooManyRequests" if code == 429 else "ServiceUnavailable"
    return Response(code, {"Retry-After": after}, status(code, reason))


@pytest.mark.parametrize("code", [429, 503])
async def test_throttled_writes_wait_for_retry_after_and_are_sent_again(
    no_sleep: list[float], code: int
) -> None:
    cm = {"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"}}
    transport = FakeTransport(
        throttled(code),
        ok(cm),  # patch
        throttled(code),
        ok(cm),  # create
        throttled(code),
        ok(cm),  # update
        throttled(code),
        ok({}),  # delete
    )
    client = make(transport)
    await client.patch(CONFIGMAPS, "x", {"data": {}}, "ns")
    await client.create(CONFIGMAPS, cm)
    await client.update(CONFIGMAPS, cm)
    await client.delete(CONFIGMAPS, "x", "ns")
    methods = [c[0] for c in transport.calls]
    assert methods == ["PATCH", "PATCH", "POST", "POST", "PUT", "PUT", "DELETE", "DELETE"]
    assert transport.calls[0][3] == transport.calls[1][3], "the same body is sent again"
    assert len(no_sleep) == 4
    assert all(3 <= s < 3.2 for s in no_sleep)


async def test_throttling_retries_are_bounded(no_sleep: list[float]) -> None:
    transport = FakeTransport(*(throttled(after="1") for _ in range(11)))
    with pytest.raises(TooManyRequests) as info:
        await make(transport).patch(CONFIGMAPS, "x", {"data": {}}, "ns")
    assert info.value.retry_after == 1.0
    assert len(transport.calls) == 11, "10 retries, as client-go"
    assert len(no_sleep) == 10


async def test_a_long_retry_after_is_capped(no_sleep: list[float]) -> None:
    transport = FakeTransport(throttled(after="3600"), ok({}))
    await make(transport).get(CONFIGMAPS, "x", "ns")
    assert 10 <= no_sleep[0] < 10.2


async def test_throttled_without_retry_after_is_raised_at_once() -> None:
    transport = FakeTransport(Response(429, {}, status(429, "TooManyRequests")))
    with pytest.raises(TooManyRequests) as info:
        await make(transport).patch(CONFIGMAPS, "x", {"data": {}}, "ns")
    assert info.value.retry_after is None
    assert len(transport.calls) == 1


async def test_client_side_rate_limit_spaces_requests_after_the_burst(
    no_sleep: list[float],
) -> None:
    transport = FakeTransport(*(ok({}) for _ in range(8)))
    client = make(transport, qps=2.0, burst=3)
    for _ in range(5):
        await client.get(CONFIGMAPS, "x", "ns")
    # the fake sleep does not advance the clock: every request past the burst waits
    # one more refill interval (0.5 s at 2 qps) than the one before it
    assert no_sleep == pytest.approx([0.5, 1.0], abs=0.05)
    assert client.limiter_waits == 2


async def test_a_caller_cancelled_while_throttled_gives_its_token_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            raise asyncio.CancelledError  # the first waiter's reconcile is cancelled

    monkeypatch.setattr("kubeloop._client.asyncio.sleep", sleep)
    transport = FakeTransport(ok({}), ok({}))
    client = make(transport, qps=1.0, burst=1)
    await client.get(CONFIGMAPS, "x", "ns")  # takes the only token
    with pytest.raises(asyncio.CancelledError):
        await client.get(CONFIGMAPS, "x", "ns")
    await client.get(CONFIGMAPS, "x", "ns")
    # the next caller waits one refill, not two: the cancelled one's token came back
    assert slept == pytest.approx([1.0, 1.0], abs=0.05)
    assert len(transport.calls) == 2


async def test_watches_are_exempt_from_the_rate_limit(no_sleep: list[float]) -> None:
    added = line("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}})
    transport = FakeTransport(stream=FakeStream(200, [added]))
    client = make(transport, qps=1.0, burst=1)
    for _ in range(3):
        assert len(await collect(client)) == 1
    assert no_sleep == []


def test_no_client_side_rate_limit_by_default_and_one_when_asked() -> None:
    # controller-runtime's default since #3119: the apiserver's Priority and Fairness limits
    assert Client(CONFIG, transport=FakeTransport())._bucket is None
    for ctor in (Client.from_kubeconfig, Client.from_env):
        assert inspect.signature(ctor).parameters["qps"].default is None
    client = Client(CONFIG, transport=FakeTransport(), qps=50, burst=80)
    assert client._bucket is not None
    assert (client._bucket._qps, client._bucket._burst) == (50.0, 80.0)


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


async def test_list_all_falls_back_to_one_full_list_when_continue_expires() -> None:
    transport = FakeTransport(
        page(["a", "b"], "c1", "10"),
        Response(410, {}, status(410, "Expired", "continue token expired")),
        page(["a", "b", "c"], None, "20"),
    )
    items, rv = await make(transport).list_all(CONFIGMAPS, "ns", limit=2, resource_version="0")
    assert [i["metadata"]["name"] for i in items] == ["a", "b", "c"]
    assert rv == "20"
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
    params = [c[2] for c in transport.calls]
    assert params == [
        {"limit": "2", "resourceVersion": "0"},
        {"limit": "2", "continue": "c1"},
        {"resourceVersion": "0"},  # unpaged: no token that could expire again
    ]


async def test_list_all_raises_gone_on_the_first_page() -> None:
    transport = FakeTransport(Response(410, {}, status(410, "Expired")))
    with pytest.raises(Gone):
        await make(transport).list_all(CONFIGMAPS, resource_version="5")
    assert len(transport.calls) == 1


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


async def test_lease_requests_never_wait_for_the_bucket(no_sleep: list[float]) -> None:
    from kubeloop._resource import LEASES

    transport = FakeTransport(*(ok({}) for _ in range(4)))
    client = make(transport, qps=1.0, burst=1)
    for _ in range(3):
        await client.get(LEASES, "leader", "default")
    assert no_sleep == []
    await client.get(CONFIGMAPS, "x", "ns")  # the bucket is still full for everything else
    assert no_sleep == []


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
