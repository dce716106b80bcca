"""The fault proxy and the control-plane faults, against the real kube-apiserver.

Each action and matcher is shown doing what it says from the client's side, and the
proxy's log is checked against what the apiserver answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, PODS, Client, Informer, Object
from kubeloop._errors import (
    Forbidden,
    ServerError,
    ServerTimeout,
    TooManyRequests,
    TransportError,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually
from kubeloop.testing.faults import (
    CutWatch,
    Delay,
    FaultProxy,
    Hang,
    Reset,
    Respond,
    gateway_timeout,
    internal_error,
    service_unavailable,
    too_many_requests,
)

pytestmark = pytest.mark.integration

DEADLINE = 30.0


def cm(name: str, **data: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
async def proxy(kube_control_plane: ControlPlane) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(kube_control_plane, seed=1) as p:
        yield p


@contextlib.asynccontextmanager
async def client_of(proxy: FaultProxy, name: str, **kwargs: Any) -> AsyncIterator[Client]:
    async with Client(proxy.client_config(name, **kwargs)) as client:
        yield client


async def test_requests_pass_through_and_are_logged_with_the_apiservers_answer(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    async with client_of(proxy, "op") as op:
        created = await op.create(CONFIGMAPS, cm("a", k="v"), kube_namespace)
        got = await kube_client.get(CONFIGMAPS, "a", kube_namespace)  # not through the proxy
    assert got["data"] == {"k": "v"}
    [write] = proxy.log.writes(client="op")
    assert (write.verb, write.resource, write.namespace, write.name) == (
        "create",
        "configmaps",
        kube_namespace,
        "a",
    )
    assert write.status == 201
    assert write.resource_version == created["metadata"]["resourceVersion"]
    assert write.uid == created["metadata"]["uid"]
    assert write.api_time is not None
    assert write.action == "forward"
    assert write.user_agent.startswith("kubeloop/")
    # the apiserver attributes the write to the client, not to the proxy's admin identity
    assert got["metadata"]["managedFields"][0]["manager"] == "kubeloop"


async def test_rbac_judges_the_real_client_through_impersonation(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    async with client_of(proxy, "nobody", groups=()) as nobody:
        with pytest.raises(Forbidden) as err:
            await nobody.get(CONFIGMAPS, "x", kube_namespace)
    assert 'User "nobody" cannot get resource "configmaps"' in str(err.value)
    [entry] = proxy.log.entries(client="nobody")
    assert (entry.status, entry.reason, entry.user) == (403, "Forbidden", "nobody")


async def test_429_reaches_the_client_with_retry_after_and_only_the_matching_client(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    rule = proxy.add_rule(too_many_requests(3), client="op", verb="create", times=1)
    async with client_of(proxy, "op") as op, client_of(proxy, "other") as other:
        await other.create(CONFIGMAPS, cm("o1"), kube_namespace)
        with pytest.raises(TooManyRequests) as err:
            await op.create(CONFIGMAPS, cm("a"), kube_namespace)
        assert err.value.retry_after == 3
        await op.create(CONFIGMAPS, cm("a"), kube_namespace)  # times=1: used up
    assert rule.hits == 1
    counts = proxy.log.counts("client", "verb", "status")
    assert counts[("op", "create", 429)] == 1
    assert counts[("op", "create", 201)] == 1
    assert counts[("other", "create", 201)] == 1
    [throttled] = proxy.log.entries(status=429)
    assert (throttled.action, throttled.rule, throttled.reason) == ("respond", rule.id, None)


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (internal_error(), ServerError),
        (service_unavailable(), ServerError),
        (gateway_timeout(), ServerTimeout),
    ],
)
async def test_server_errors_as_metav1_status(
    proxy: FaultProxy, kube_namespace: str, action: Respond, error: type[Exception]
) -> None:
    proxy.add_rule(action, verb="update", resource="configmaps")
    async with client_of(proxy, "op") as op:
        obj = await op.create(CONFIGMAPS, cm("a"), kube_namespace)
        with pytest.raises(error) as err:
            await op.update(CONFIGMAPS, obj)
    assert getattr(err.value, "status", None) == action.status
    assert proxy.log.counts("verb", "status")[("update", action.status)] == 1


async def _drain(events: Any) -> None:
    async with contextlib.aclosing(events) as stream:
        async for _ in stream:
            pass


async def test_matchers_namespace_subresource_and_watch(
    proxy: FaultProxy, kube_control_plane: ControlPlane
) -> None:
    ns_a = kube_control_plane.create_namespace("fa")
    ns_b = kube_control_plane.create_namespace("fb")
    proxy.add_rule(service_unavailable(), namespace=ns_a, verb="create")
    proxy.add_rule(service_unavailable(), subresource="status")
    proxy.add_rule(service_unavailable(), resource="configmaps", watch=True)
    async with client_of(proxy, "op") as op:
        with pytest.raises(ServerError):
            await op.create(CONFIGMAPS, cm("a"), ns_a)
        await op.create(CONFIGMAPS, cm("a"), ns_b)
        # a pod's status: the only built-in with a status subresource that needs no CRD
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        created = await op.create(PODS, pod, ns_b)
        with pytest.raises(ServerError):
            await op.update_status(PODS, created)
        await op.update(PODS, created)  # the main resource is not matched
        await op.list(CONFIGMAPS, ns_b)  # a list is not a watch
        with pytest.raises(ServerError):
            await _drain(op.watch(CONFIGMAPS, ns_b, resource_version="0"))
    statuses = [(e.verb, e.subresource, e.status) for e in proxy.log.entries(client="op")]
    assert statuses == [
        ("create", None, 503),
        ("create", None, 201),
        ("create", None, 201),
        ("update", "status", 503),
        ("update", None, 200),
        ("list", None, 200),
        ("watch", None, 503),
    ]


async def test_delay_holds_a_request_while_others_pass(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy.add_rule(Delay(2.0), verb="get", name="slow")
    async with client_of(proxy, "op") as op:
        await op.create(CONFIGMAPS, cm("slow"), kube_namespace)
        await op.create(CONFIGMAPS, cm("fast"), kube_namespace)
        slow = asyncio.create_task(op.get(CONFIGMAPS, "slow", kube_namespace))
        await eventually(lambda: bool(proxy.log.entries(name="slow", verb="get")), "slow get")
        await op.get(CONFIGMAPS, "fast", kube_namespace)
        fast_done = time.monotonic()
        assert not slow.done()  # it arrived first and is still held
        assert (await slow)["metadata"]["name"] == "slow"
    [held] = proxy.log.entries(verb="get", name="slow")
    [quick] = proxy.log.entries(verb="get", name="fast")
    assert held.seq < quick.seq
    assert held.finished is not None
    assert held.finished > fast_done
    assert (held.action, held.status) == ("delay+forward", 200)


async def test_reset_fails_the_request_without_an_answer(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy.add_rule(Reset(), verb="create", client="op")
    async with client_of(proxy, "op") as op:
        with pytest.raises(TransportError):
            await op.create(CONFIGMAPS, cm("a"), kube_namespace)
    [reset] = proxy.log.entries(client="op", verb="create")
    assert (reset.action, reset.status) == ("reset", 0)


async def test_hang_holds_until_the_rule_is_lifted_then_the_retry_succeeds(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    await kube_client.create(CONFIGMAPS, cm("a"), kube_namespace)
    rule = proxy.add_rule(Hang(), verb="get", client="op", times=1)
    async with client_of(proxy, "op") as op:
        task = asyncio.create_task(op.get(CONFIGMAPS, "a", kube_namespace))
        await eventually(lambda: rule.hits == 1, "the get to hang")
        await asyncio.sleep(0.3)
        assert not task.done()
        [hung] = proxy.log.entries(client="op", verb="get")
        assert (hung.status, hung.finished) == (0, None)
        proxy.remove_rule(rule)
        got = await asyncio.wait_for(task, DEADLINE)  # the client's read retry goes through
    assert got["metadata"]["name"] == "a"
    gets = proxy.log.entries(client="op", verb="get")
    assert [(e.action, e.status) for e in gets] == [("hang", 0), ("forward", 200)]


async def _watch_all(client: Client, ns: str, seen: list[str]) -> None:
    async with contextlib.aclosing(
        client.watch(CONFIGMAPS, ns, resource_version="0", allow_bookmarks=False)
    ) as events:
        async for event in events:
            seen.append(event.object["metadata"]["name"])


async def test_partition_cuts_open_watches_and_blackholes_new_requests(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    ns = kube_namespace
    async with client_of(proxy, "op") as op, client_of(proxy, "other") as other:
        op_seen: list[str] = []
        other_seen: list[str] = []
        op_watch = asyncio.create_task(_watch_all(op, ns, op_seen))
        other_watch = asyncio.create_task(_watch_all(other, ns, other_seen))
        await eventually(lambda: len(proxy.open_watches()) == 2, "both watches open")
        await other.create(CONFIGMAPS, cm("before"), ns)
        await eventually(lambda: op_seen == ["before"] == other_seen, "both to see it")

        cut = proxy.partition("op")
        with pytest.raises(TransportError):
            await asyncio.wait_for(op_watch, DEADLINE)  # the watch is cut
        get = asyncio.create_task(op.get(CONFIGMAPS, "before", ns))
        await other.create(CONFIGMAPS, cm("during"), ns)  # the other client is unaffected
        await eventually(lambda: other_seen == ["before", "during"], "other sees the write")
        await eventually(
            lambda: bool(proxy.log.entries(client="op", verb="get")), "the op's get to arrive"
        )
        assert not get.done()

        proxy.heal(cut)
        assert (await asyncio.wait_for(get, DEADLINE))["metadata"]["name"] == "before"
        other_watch.cancel()
    [watch] = proxy.log.entries(client="op", verb="watch")
    assert (watch.ended, watch.events) == ("partition", 1)
    gets = proxy.log.entries(client="op", verb="get")
    assert [(e.action, e.status) for e in gets] == [("partition", 0), ("forward", 200)]
    assert proxy.log.entries(client="other", action="partition") == []


async def test_watch_cut_after_k_events_and_the_reflector_resumes(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    proxy.add_rule(CutWatch(after_events=2), resource="configmaps", watch=True, times=3)
    async with client_of(proxy, "op") as op:
        informer = Informer(op, CONFIGMAPS, namespace=ns)
        informer.start()
        try:
            await informer.wait_synced()
            names = [f"c{i}" for i in range(8)]
            for name in names:
                await kube_client.create(CONFIGMAPS, cm(name), ns)
            await eventually(
                lambda: {o["metadata"]["name"] for o in informer.store.list()} >= set(names),
                "the informer to see every ConfigMap",
                DEADLINE,
            )
        finally:
            await informer.stop()
    watches = proxy.log.entries(client="op", verb="watch")
    cut = [w for w in watches if w.ended == "cut"]
    assert len(cut) == 3
    assert all(w.events == 2 for w in cut)
    assert len(watches) >= 4  # it came back after every cut
    # resumed from where it was, not relisted: one list only
    assert len(proxy.log.entries(client="op", verb="list")) == 1


async def test_watch_cut_after_seconds_ends_the_stream_cleanly(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy.add_rule(CutWatch(after_seconds=0.5), resource="configmaps", watch=True)
    seen: list[str] = []
    async with client_of(proxy, "op") as op:
        await asyncio.wait_for(_watch_all(op, kube_namespace, seen), DEADLINE)  # ends, no error
    [watch] = proxy.log.entries(client="op", verb="watch")
    assert (watch.status, watch.ended, watch.events, watch.action) == (200, "cut", 0, "cut")


async def test_cut_watches_from_the_test(proxy: FaultProxy, kube_namespace: str) -> None:
    async with client_of(proxy, "op") as op:
        task = asyncio.create_task(_watch_all(op, kube_namespace, []))
        await eventually(lambda: len(proxy.open_watches("op")) == 1, "the watch to open")
        assert proxy.cut_watches(client="op") == 1
        with pytest.raises(TransportError):
            await asyncio.wait_for(task, DEADLINE)
    [watch] = proxy.log.entries(verb="watch")
    assert watch.ended == "cut"


async def test_write_order_by_revision_across_clients(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    async with client_of(proxy, "a") as a, client_of(proxy, "b") as b:
        for i in range(3):
            await a.create(CONFIGMAPS, cm(f"a{i}"), kube_namespace)
        for i in range(3):
            await b.create(CONFIGMAPS, cm(f"b{i}"), kube_namespace)
        await a.create(CONFIGMAPS, cm("a3"), kube_namespace)
    last_a, first_b = proxy.log.last_write("a"), proxy.log.first_write("b")
    assert last_a is not None
    assert first_b is not None
    assert last_a.name == "a3"
    assert first_b.name == "b0"
    order = [w.name for w in proxy.log.writes()]
    assert order == ["a0", "a1", "a2", "b0", "b1", "b2", "a3"]
    revisions = [w.revision or 0 for w in proxy.log.writes()]
    assert revisions == sorted(revisions)


def test_threaded_proxy_for_synchronous_callers(
    kube_control_plane: ControlPlane, tmp_path: Any
) -> None:
    with FaultProxy(kube_control_plane, dir=tmp_path) as proxy:
        kubeconfig = proxy.kubeconfig_for("sync")
        proxy.add_rule(service_unavailable(retry_after=1), verb="list", times=1)

        async def use() -> str:
            async with Client.from_kubeconfig(kubeconfig) as c:
                # a throttled read waits as Retry-After says and tries again
                page = await c.list(CONFIGMAPS, "default")
                return str(page["kind"])

        assert asyncio.run(use()) == "ConfigMapList"
        statuses = [e.status for e in proxy.log.entries(client="sync", verb="list")]
        assert statuses == [503, 200]


# -- control-plane faults ----------------------------------------------------------------


def test_restart_apiserver_keeps_data_and_port(kube_control_plane: ControlPlane) -> None:
    cp = kube_control_plane
    ns = cp.create_namespace("restart")
    rest = cp.rest()
    rest.post(f"/api/v1/namespaces/{ns}/configmaps", cm("kept"))
    before = cp.component("kube-apiserver").pid
    cp.restart_apiserver()
    assert cp.component("kube-apiserver").pid != before
    assert rest.get(f"/api/v1/namespaces/{ns}/configmaps/kept")["metadata"]["name"] == "kept"


def test_restart_etcd_keeps_data_and_revisions_move_on(kube_control_plane: ControlPlane) -> None:
    cp = kube_control_plane
    ns = cp.create_namespace("etcd")
    rest = cp.rest()
    first = rest.post(f"/api/v1/namespaces/{ns}/configmaps", cm("kept"))
    before = cp.component("etcd").pid
    cp.restart_etcd(kill=True)  # a crash: the data dir must carry everything
    assert cp.component("etcd").pid != before
    assert (
        rest.get(f"/api/v1/namespaces/{ns}/configmaps/kept")["metadata"]["uid"]
        == (first["metadata"]["uid"])
    )
    second = deadline_post(rest, f"/api/v1/namespaces/{ns}/configmaps", cm("after"))
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def deadline_post(rest: Any, path: str, body: Object) -> Any:
    # right after an etcd restart the apiserver may answer a few 5xx while it reconnects
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return rest.post(path, body)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


async def test_pause_etcd_stalls_writes_until_resumed(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    cp = kube_control_plane
    cp.pause("etcd")
    try:
        assert "etcd" in cp.paused_components
        write = asyncio.create_task(kube_client.create(CONFIGMAPS, cm("stalled"), kube_namespace))
        await asyncio.sleep(1.0)
        assert not write.done()  # nothing answers while etcd is frozen
        stat = Path(f"/proc/{cp.component('etcd').pid}/stat").read_text()  # noqa: ASYNC240
        state = stat.rsplit(")", 1)[1].split()[0]
        assert state == "T"  # stopped
    finally:
        cp.resume("etcd")
    assert "etcd" not in cp.paused_components
    created = await asyncio.wait_for(write, DEADLINE)
    assert created["metadata"]["name"] == "stalled"
