"""The fault proxy and the control-plane faults, against the real kube-apiserver.

Each action and matcher is shown doing what it says from the client's side, and the
proxy's log is checked against what the apiserver answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubeloop import CONFIGMAPS, PODS, Client, Informer, Object, ReflectorOptions
from kubeloop._errors import (
    AlreadyExists,
    ApiError,
    Forbidden,
    NotFound,
    ServerError,
    ServerTimeout,
    TooManyRequests,
    TransportError,
)
from kubeloop._transport import build_ssl_context
from kubeloop.envtest import ControlPlane, find_assets
from kubeloop.testing import eventually
from kubeloop.testing.faults import (
    CutWatch,
    Delay,
    DropEvents,
    DropResponse,
    FaultProxy,
    Hang,
    Reset,
    Respond,
    StaleRead,
    gateway_timeout,
    internal_error,
    service_unavailable,
    too_many_requests,
)
from kubeloop.testing.oracles import WatchRecorder

pytestmark = pytest.mark.integration

DEADLINE = 30.0


def cm(name: str, **data: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def proxy(kube_fault_proxy: FaultProxy) -> FaultProxy:
    return kube_fault_proxy  # the plugin's fixture, under a short name


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


async def test_429_is_retried_after_retry_after_and_only_for_the_matching_client(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    rule = proxy.add_rule(too_many_requests(2), client="op", verb="create", times=1)
    async with client_of(proxy, "op") as op, client_of(proxy, "other") as other:
        await other.create(CONFIGMAPS, cm("o1"), kube_namespace)
        # kubeloop's client sends it again after the server's Retry-After (client-go's
        # behaviour for a 429): the caller sees the object, the proxy saw both tries
        created = await op.create(CONFIGMAPS, cm("a"), kube_namespace)
    assert created["metadata"]["name"] == "a"
    assert rule.hits == 1
    tries = proxy.log.entries(client="op", verb="create")
    assert [t.status for t in tries] == [429, 201]
    assert tries[1].started - tries[0].started >= 2  # it waited as long as the server asked
    assert proxy.log.counts("client", "verb", "status")[("other", "create", 201)] == 1
    [throttled] = proxy.log.entries(status=429)
    assert (throttled.action, throttled.rule) == ("respond", rule.id)
    assert throttled.reason == "TooManyRequests"


async def test_throttle_retries_are_bounded_and_then_the_429_reaches_the_caller(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy.add_rule(too_many_requests(0), client="op", verb="create")  # never lets up
    async with client_of(proxy, "op") as op:
        with pytest.raises(TooManyRequests) as err:
            await op.create(CONFIGMAPS, cm("b"), kube_namespace)
    assert err.value.retry_after is not None  # the last answer still says when to come back
    # the first try and client-go's 10 retries, then the error: no retry storm
    assert [t.status for t in proxy.log.entries(client="op", verb="create")] == [429] * 11


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (internal_error(), ServerError),
        (service_unavailable(), ServerError),
        (gateway_timeout(), ServerTimeout),
    ],
)
async def test_server_errors_as_metav1_status(
    proxy: FaultProxy, kube_namespace: str, action: Respond, error: type[ApiError]
) -> None:
    proxy.add_rule(action, verb="update", resource="configmaps")
    async with client_of(proxy, "op") as op:
        obj = await op.create(CONFIGMAPS, cm("a"), kube_namespace)
        with pytest.raises(error) as err:
            await op.update(CONFIGMAPS, obj)
    assert err.value.status_code == action.status
    assert (
        err.value.reason
        == {500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}[action.status]
    )
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
            # a scheduler of its own: kube-scheduler leaves it (and its status) alone
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
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
    proxy.add_rule(Delay(4.0), verb="get", name="slow")  # far longer than a plain get
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


async def test_drop_response_commits_the_write_but_the_client_never_hears(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    proxy.add_rule(DropResponse(), verb="create", client="op", times=1)
    async with client_of(proxy, "op") as op:
        with pytest.raises(TransportError):
            await op.create(CONFIGMAPS, cm("a"), kube_namespace)
        with pytest.raises(AlreadyExists):  # the naive retry
            await op.create(CONFIGMAPS, cm("a"), kube_namespace)
    live = await kube_client.get(CONFIGMAPS, "a", kube_namespace)
    dropped, retried = proxy.log.entries(client="op", verb="create")
    assert (dropped.action, dropped.status) == ("drop", 201)
    assert dropped.resource_version == live["metadata"]["resourceVersion"]
    assert (retried.action, retried.status, retried.reason) == ("forward", 409, "AlreadyExists")
    assert [w.seq for w in proxy.log.writes(client="op")] == [dropped.seq]


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


async def test_a_narrowed_cut_breaks_the_watch_just_after_that_event(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    """The connection lost between two events: a's delete is delivered, b's create (the
    next event) is not, and the events before it (other objects, other types) pass."""
    ns = kube_namespace
    start = await kube_client.create(CONFIGMAPS, cm("start"), ns)
    proxy.add_rule(CutWatch(after_events=1, types=("DELETED",), name="a"), client="op", watch=True)
    await kube_client.create(CONFIGMAPS, cm("a"), ns)
    await kube_client.create(CONFIGMAPS, cm("other"), ns)
    await kube_client.delete(CONFIGMAPS, "other", ns)
    await kube_client.delete(CONFIGMAPS, "a", ns)
    await kube_client.create(CONFIGMAPS, cm("b"), ns)
    seen: list[tuple[str, str]] = []
    async with client_of(proxy, "op") as op:
        rv = start["metadata"]["resourceVersion"]
        events = op.watch(CONFIGMAPS, ns, resource_version=rv, allow_bookmarks=False)
        async with contextlib.aclosing(events) as stream:
            async for event in stream:  # ends where the proxy cut it (cleanly)
                seen.append((event.type, event.object["metadata"]["name"]))
    assert seen == [
        ("ADDED", "a"),
        ("ADDED", "other"),
        ("DELETED", "other"),
        ("DELETED", "a"),
    ]
    [watch] = proxy.log.entries(client="op", verb="watch")
    assert (watch.ended, watch.events) == ("cut", 4)


def test_a_narrowed_cut_needs_a_count() -> None:
    with pytest.raises(ValueError, match="narrow after_events"):
        CutWatch(after_seconds=1.0, name="a")


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
            await asyncio.wait_for(task, DEADLINE)  # reset

        seen: list[str] = []
        task = asyncio.create_task(_watch_all(op, kube_namespace, seen))
        await eventually(lambda: len(proxy.open_watches("op")) == 1, "the watch to reopen")
        await op.create(CONFIGMAPS, cm("one"), kube_namespace)
        await eventually(lambda: seen == ["one"], "the event")
        assert proxy.cut_watches(client="op", abort=False) == 1
        await asyncio.wait_for(task, DEADLINE)  # ended cleanly: no error
    first, second = proxy.log.entries(verb="watch")
    assert (first.ended, second.ended, second.events) == ("cut", "cut", 1)


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


async def test_deletes_answered_with_a_status_get_their_revision(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    async with (
        client_of(proxy, "a") as a,
        client_of(proxy, "b") as b,
        WatchRecorder(kube_client, [CONFIGMAPS], namespace=ns) as rec,
    ):
        await a.create(CONFIGMAPS, cm("x"), ns)
        await b.create(CONFIGMAPS, cm("y"), ns)
        await a.delete(CONFIGMAPS, "x", ns)  # a ConfigMap delete answers with a Status
        await b.create(CONFIGMAPS, cm("z"), ns)
        await proxy.settle()
        await rec.wait_for_count(4, timeout=DEADLINE)
    [delete] = proxy.log.entries(verb="delete")
    assert delete.reason is None
    [deleted] = [e for e in rec.events if e.type == "DELETED"]
    assert delete.resource_version == deleted.resource_version  # the exact revision
    assert [(w.client, w.verb, w.name) for w in proxy.log.writes()] == [
        ("a", "create", "x"),
        ("b", "create", "y"),
        ("a", "delete", "x"),
        ("b", "create", "z"),
    ]


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


def test_a_go_client_through_the_proxy(
    kube_control_plane: ControlPlane, kube_namespace: str, tmp_path: Any
) -> None:
    kubectl = find_assets().kubectl
    assert kubectl is not None, "kubectl is built with the control plane (make setup)"
    with FaultProxy(kube_control_plane, dir=tmp_path) as proxy:
        kubeconfig = proxy.kubeconfig_for("kubectl")
        proxy.add_rule(too_many_requests(1), verb="create", client="kubectl", times=1)
        out = subprocess.run(
            [
                *(str(kubectl), "--kubeconfig", str(kubeconfig), "-n", kube_namespace),
                *("create", "configmap", "from-go", "--from-literal=k=v", "-o", "json"),
            ],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=True,  # client-go waits out the Retry-After and tries again
        )
    created = json.loads(out.stdout)
    creates = proxy.log.entries(client="kubectl", verb="create")
    assert [e.status for e in creates] == [429, 201]
    assert creates[1].resource_version == created["metadata"]["resourceVersion"]
    assert "kubectl" in creates[1].user_agent


# -- control-plane faults ----------------------------------------------------------------


async def test_restart_apiserver_keeps_data_and_port_and_clients_recover(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    cp, ns = kube_control_plane, kube_namespace
    await kube_client.create(CONFIGMAPS, cm("kept"), ns)
    before = cp.component("kube-apiserver").pid
    async with FaultProxy(cp) as proxy, client_of(proxy, "op") as op:
        # client-go's backoff (0.8 s doubling to 30 s, jittered up to 2x) can pause for
        # up to a minute after the failures of a slow restart: this test is about the
        # proxy and the restart, so the pauses are capped at 2 s and the deadline holds
        fast = ReflectorOptions(backoff_max=2.0)
        informer = Informer(op, CONFIGMAPS, namespace=ns, options=fast)
        informer.start()
        try:
            await informer.wait_synced()
            await asyncio.to_thread(cp.restart_apiserver)  # the proxy keeps serving meanwhile
            assert cp.component("kube-apiserver").pid != before
            await kube_client.create(CONFIGMAPS, cm("after"), ns)
            await eventually(
                lambda: {o["metadata"]["name"] for o in informer.store.list()} == {"kept", "after"},
                "the informer to recover and see the new object",
                DEADLINE,
            )
        finally:
            await informer.stop()
    watches = proxy.log.entries(client="op", verb="watch")
    assert watches[0].ended in {"server", "upstream"}  # the restart ended the first watch
    assert len(watches) >= 2


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


async def test_skip_strikes_at_a_chosen_moment_and_listeners_see_commits_first(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    # the third create fails; a listener sees every create the moment it is committed,
    # before the client has the answer
    proxy.add_rule(service_unavailable(), verb="create", client="op", skip=2, times=1)
    committed: list[tuple[str | None, bool]] = []
    answered: set[str] = set()
    proxy.log.add_listener(
        lambda e: committed.append((e.name, e.name in answered)) if e.verb == "create" else None
    )
    async with client_of(proxy, "op") as op:
        for i in range(4):
            try:
                await op.create(CONFIGMAPS, cm(f"c{i}"), kube_namespace)
                answered.add(f"c{i}")
            except ServerError:
                pass
        third = await proxy.log.wait_for(lambda e: e.verb == "create", count=3, timeout=5)
    assert third.status == 503
    assert [e.status for e in proxy.log.entries(verb="create")] == [201, 201, 503, 201]
    assert committed == [("c0", False), ("c1", False), ("c2", False), ("c3", False)]


async def test_partition_by_reset_fails_fast_and_heals_by_client_name(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy.partition("op", mode="reset")
    async with client_of(proxy, "op") as op:
        with pytest.raises(TransportError):
            await op.list(CONFIGMAPS, kube_namespace)  # every read retry is reset too
        proxy.heal("op")
        assert proxy.rules == []
        page = await op.list(CONFIGMAPS, kube_namespace)
    assert page["kind"] == "ConfigMapList"
    lists = proxy.log.entries(client="op", verb="list")
    assert {e.action for e in lists[:-1]} == {"partition"}
    assert all(e.status == 0 for e in lists[:-1])
    assert (lists[-1].action, lists[-1].status) == ("forward", 200)


async def test_upstream_with_a_bearer_token_kubeconfig(
    kube_control_plane: ControlPlane, kube_namespace: str, tmp_path: Any
) -> None:
    # any cluster will do: here a service account with the right to impersonate
    ns, rest = kube_namespace, kube_control_plane.rest()
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "proxy"}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"proxy-{ns}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "proxy", "namespace": ns}],
    }
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}

    def setup() -> str:
        rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts", sa)
        rest.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
        answer = rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts/proxy/token", request)
        return str(answer["status"]["token"])

    token = await asyncio.to_thread(setup)
    kubeconfig = tmp_path / "token-kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": kube_control_plane.server,
                            "certificate-authority": str(kube_control_plane.ca_file),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    async with FaultProxy(kubeconfig) as proxy, client_of(proxy, "nobody", groups=()) as nobody:
        with pytest.raises(Forbidden) as err:
            await nobody.get(CONFIGMAPS, "x", ns)
    assert 'User "nobody"' in str(err.value)  # impersonated by the service account


async def test_protobuf_watches_are_cut_at_frame_boundaries(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    # what Go clients (kube-scheduler, Karpenter, kwok) ask for on built-in kinds
    for i in range(3):
        await kube_client.create(CONFIGMAPS, cm(f"p{i}"), kube_namespace)
    proxy.add_rule(CutWatch(after_events=2), watch=True)
    tls = await asyncio.to_thread(build_ssl_context, proxy.client_config("go"))
    url = f"{proxy.server}{CONFIGMAPS.path(kube_namespace)}?watch=1&resourceVersion=0"
    headers = {"Accept": "application/vnd.kubernetes.protobuf;stream=watch"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers=headers, ssl=tls) as resp,
    ):
        assert resp.status == 200
        assert "protobuf" in resp.headers["Content-Type"]
        body = await asyncio.wait_for(resp.read(), DEADLINE)  # ends: the stream was cut
    frames, i = [], 0
    while i < len(body):
        size = int.from_bytes(body[i : i + 4], "big")
        frames.append(body[i + 4 : i + 4 + size])
        i += 4 + size
    assert i == len(body)  # whole frames only
    assert len(frames) == 2
    assert all(b"ADDED" in f for f in frames)
    [watch] = proxy.log.entries(client="go", verb="watch")
    assert (watch.events, watch.ended) == (2, "cut")


async def test_hang_for_a_time_then_the_connection_is_reset(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    await kube_client.create(CONFIGMAPS, cm("a"), kube_namespace)
    proxy.add_rule(Hang(seconds=0.5), verb="get", client="op", times=1)
    async with client_of(proxy, "op") as op:
        got = await asyncio.wait_for(op.get(CONFIGMAPS, "a", kube_namespace), DEADLINE)
    assert got["metadata"]["name"] == "a"
    hung, retried = proxy.log.entries(client="op", verb="get")
    assert (hung.action, hung.status, retried.action, retried.status) == ("hang", 0, "forward", 200)
    assert hung.finished is not None
    assert hung.finished <= retried.started  # the retry came after the reset


async def test_stale_reads_travel_back_in_time(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    old = await kube_client.create(CONFIGMAPS, cm("a", v="1"), ns)
    then = int(old["metadata"]["resourceVersion"])
    old["data"] = {"v": "2"}
    await kube_client.update(CONFIGMAPS, old)
    await kube_client.create(CONFIGMAPS, cm("b", v="1"), ns)  # born after `then`
    with proxy.fault(StaleRead(then), client="op"):
        async with client_of(proxy, "op") as op:
            got = await op.get(CONFIGMAPS, "a", ns)
            page = await op.list(CONFIGMAPS, ns)
            with pytest.raises(NotFound):
                await op.get(CONFIGMAPS, "b", ns)
            seen: list[tuple[str, str]] = []
            events = op.watch(CONFIGMAPS, ns, resource_version="1", allow_bookmarks=False)
            async with contextlib.aclosing(events) as stream:
                async for event in stream:  # replayed from `then` on, whatever we asked
                    seen.append((event.type, event.object["metadata"]["name"]))
                    if len(seen) == 2:
                        break
    assert (got["kind"], got["data"]) == ("ConfigMap", {"v": "1"})
    assert got["metadata"]["resourceVersion"] == str(then)
    names = {o["metadata"]["name"]: o["data"] for o in page["items"]}
    assert names.get("a") == {"v": "1"}
    assert "b" not in names
    assert seen == [("MODIFIED", "a"), ("ADDED", "b")]
    assert {e.action for e in proxy.log.entries(client="op")} == {"stale"}
    live = await kube_client.get(CONFIGMAPS, "a", ns)
    assert live["data"] == {"v": "2"}  # only the client's view was stale


async def test_drop_events_hides_a_transition_from_one_watch(
    proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    created = await kube_client.create(CONFIGMAPS, cm("a", v="1"), ns)
    proxy.add_rule(DropEvents(types=("MODIFIED",), name="a", count=1), client="op")
    seen: list[str] = []
    async with client_of(proxy, "op") as op:
        rv = created["metadata"]["resourceVersion"]
        events = op.watch(CONFIGMAPS, ns, resource_version=rv, allow_bookmarks=False)
        async with contextlib.aclosing(events) as stream:
            for v in ("2", "3"):
                obj = await kube_client.get(CONFIGMAPS, "a", ns)
                obj["data"] = {"v": v}
                await kube_client.update(CONFIGMAPS, obj)
            async for event in stream:
                seen.append(event.object["data"]["v"])
                break
    assert seen == ["3"]  # the change to 2 never reached this client
    [watch] = proxy.log.entries(client="op", verb="watch")
    assert (watch.action, watch.extra["hidden"], watch.events) == ("hide+forward", "1", 1)


async def test_a_held_partition_delivers_the_write_late(
    proxy: FaultProxy, kube_namespace: str
) -> None:
    ns = kube_namespace
    cut = proxy.partition("old", mode="hold")
    async with client_of(proxy, "old") as old, client_of(proxy, "new") as new:
        late = asyncio.create_task(old.create(CONFIGMAPS, cm("from-old"), ns))
        await eventually(lambda: bool(proxy.log.entries(client="old")), "old's write to arrive")
        await new.create(CONFIGMAPS, cm("from-new"), ns)
        assert not late.done()
        proxy.heal(cut)
        created = await asyncio.wait_for(late, DEADLINE)  # delivered after all
    assert created["metadata"]["name"] == "from-old"
    # it arrived first but was committed last: what a fenced old leader must never do
    arrivals = [e.client for e in proxy.log.entries(verb="create")]
    commits = [e.client for e in proxy.log.writes()]
    assert (arrivals, commits) == (["old", "new"], ["new", "old"])
    [held] = proxy.log.entries(client="old")
    assert (held.action, held.status) == ("partition+forward", 201)
