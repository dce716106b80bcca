"""Nothing long-running dies silently: informers, workers and leader election.

Each test injects the fault (a transform that raises, a reconciler that leaks a
cancellation, a worker cancelled from outside, an election task that crashes)
and then reads the outcome where it shows: the objects' state at the apiserver,
the /healthz body a kubelet would read, or how Manager.run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from kubeloop import (
    CONFIGMAPS,
    LEASES,
    Added,
    Client,
    ControllerOptions,
    Event,
    Informer,
    LeaderElectionLost,
    LeaderElector,
    Manager,
    Object,
    ReflectorOptions,
    Request,
    Result,
    strip_managed_fields,
)
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import FaultProxy, Respond

pytestmark = pytest.mark.integration

DEADLINE = 60.0


def configmap(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


async def healthz(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url + "/healthz") as resp:
        return resp.status, await resp.text()


async def stamped(client: Client, ns: str, names: list[str]) -> bool:
    items, _ = await client.list_all(CONFIGMAPS, ns)
    done = {c["metadata"]["name"] for c in items if (c.get("data") or {}).get("seen") == "yes"}
    return set(names) <= done


async def stamp(client: Client, obj: Object) -> None:
    """The reconcilers' one write: mark the ConfigMap as reconciled (once)."""
    if (obj.get("data") or {}).get("seen") != "yes":
        meta = obj["metadata"]
        await client.patch(CONFIGMAPS, meta["name"], {"data": {"seen": "yes"}}, meta["namespace"])


def stamping(mgr: Manager) -> Callable[[Request], Awaitable[Result]]:
    """A reconciler that reads its ConfigMap from the cache and stamps it."""

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        if obj is not None:
            await stamp(mgr.client, obj)
        return Result()

    return reconcile


async def test_a_crashing_informer_is_restarted_and_healthz_names_it(
    kube_client: Client, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    ns = kube_namespace
    names = [f"cm-{i}" for i in range(5)]
    for name in names:
        await kube_client.create(CONFIGMAPS, configmap(name), ns)
    broken = {"on": True}

    def transform(obj: Object) -> Object:
        if broken["on"]:
            raise ValueError("transform bug: cannot handle this object")
        return strip_managed_fields(obj)

    mgr = new_manager(
        kube_client,
        health_probe_bind_address="127.0.0.1:0",
        reflector=ReflectorOptions(transform=transform, backoff_initial=0.1, backoff_max=0.5),
    )

    mgr.controller("cms").for_(CONFIGMAPS, namespace=ns).complete(stamping(mgr))
    caplog.set_level(logging.ERROR, logger="kubeloop.cache")
    async with running(mgr):
        await eventually(lambda: "probes" in mgr.endpoints.addresses, "the probe server")
        url = mgr.endpoints.url("probes")
        informer = mgr.cache.informers[0]
        await eventually(lambda: informer.crashes >= 2, "the informer to crash and restart")
        status, body = await healthz(url)
        assert status == 500, body
        assert f"[-]informers failed: {informer.name}: crashed" in body
        assert "transform bug" in body

        broken["on"] = False  # the bug goes away (say, the object that hit it is deleted)
        await eventually(lambda: stamped(kube_client, ns, names), "every object reconciled")
        status, body = await healthz(url)
        assert status == 200, body
    assert any("informer crashed" in r.getMessage() for r in caplog.records)


async def test_a_reconciler_leaking_a_cancellation_is_retried_and_converges(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    names = [f"cm-{i}" for i in range(3)]
    for name in names:
        await kube_client.create(CONFIGMAPS, configmap(name), ns)
    mgr = new_manager(kube_client)
    leaked: list[str] = []

    async def reconcile(req: Request) -> Result:
        if req.name not in leaked:
            leaked.append(req.name)
            other = asyncio.get_running_loop().create_future()
            other.cancel()
            await other  # CancelledError from someone else's task, not ours
        obj = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        if obj is not None:
            await stamp(mgr.client, obj)
        return Result()

    # one worker: had the cancellation killed it, nothing after the first would run
    ctl = mgr.controller("cms").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: stamped(kube_client, ns, names), "every object reconciled")
        assert ctl.dead_workers() is None
    assert sorted(leaked) == names
    panics = mgr.metrics.reconcile_panics_total.labels(controller="cms").value
    assert panics == len(names)


async def test_healthz_fails_when_a_controller_has_a_dead_worker(
    kube_client: Client, kube_namespace: str
) -> None:
    mgr = new_manager(kube_client, health_probe_bind_address="127.0.0.1:0")

    async def reconcile(req: Request) -> Result:
        return Result()

    ctl = (
        mgr.controller("cms")
        .for_(CONFIGMAPS, namespace=kube_namespace)
        .with_options(ControllerOptions(max_concurrent_reconciles=2))
        .complete(reconcile)
    )
    async with running(mgr):
        await eventually(lambda: len(ctl._workers) == 2, "the workers to start")
        url = mgr.endpoints.url("probes")
        assert (await healthz(url))[0] == 200
        ctl._workers[1].cancel()  # nothing inside can end a worker; a bug outside might
        with contextlib.suppress(asyncio.CancelledError):
            await ctl._workers[1]
        status, body = await healthz(url)
    assert status == 500
    assert "[-]workers failed: cms: 1 of 2 workers dead (cms worker 1: cancelled)" in body


async def test_a_dead_leader_election_task_stops_the_manager(
    kube_client: Client, kube_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, configmap("cm"), ns)
    real = LeaderElector._try_acquire_or_renew
    rounds = {"n": 0}

    async def buggy(self: LeaderElector) -> bool:
        rounds["n"] += 1
        if rounds["n"] > 3:  # leads for a while, then the election code hits a bug
            raise RuntimeError("bug in the election loop")
        return await real(self)

    monkeypatch.setattr(LeaderElector, "_try_acquire_or_renew", buggy)
    mgr = new_manager(
        kube_client,
        leader_election=True,
        leader_election_id="dies",
        leader_election_namespace=ns,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.2,
    )
    reconciled: list[str] = []

    async def reconcile(req: Request) -> Result:
        reconciled.append(req.name)
        return Result()

    mgr.controller("cms").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
    with pytest.raises(LeaderElectionLost, match="leader election died"):
        await asyncio.wait_for(mgr.run(), DEADLINE)
    assert reconciled == ["cm"]  # it led (and reconciled) before the election task died


async def test_a_handler_added_during_the_first_list_gets_every_object(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    names = {f"cm-{i:02d}" for i in range(30)}
    for name in sorted(names):
        await kube_client.create(CONFIGMAPS, configmap(name), ns)
    informer = Informer(kube_client, CONFIGMAPS, namespace=ns)
    first: list[str] = []
    late: list[str] = []
    synced_when_added: list[bool] = []

    def late_handler(event: Event) -> None:
        if isinstance(event, Added):
            late.append(event.obj["metadata"]["name"])

    def first_handler(event: Event) -> None:
        if isinstance(event, Added):
            first.append(event.obj["metadata"]["name"])
            if len(first) == 10:  # mid-LIST: 10 objects stored, 20 still to come
                synced_when_added.append(informer.has_synced)
                informer.add_handler(late_handler)

    informer.add_handler(first_handler)
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_synced(), DEADLINE)
    finally:
        await informer.stop()
    assert synced_when_added == [False]
    assert set(first) == names
    assert sorted(late) == sorted(names)  # each object once: replayed or delivered


async def test_a_lost_lease_cancels_in_flight_reconciles_at_once(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, configmap("cm"), ns)
    mgr = new_manager(
        kube_client,
        leader_election=True,
        leader_election_id="stolen",
        leader_election_namespace=ns,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.2,
        # a graceful shutdown would wait this long for the stuck reconcile: far past
        # the deadline below, so only an immediate cancel lets run() end in time
        graceful_shutdown_timeout=3600,
    )
    events: list[str] = []

    async def reconcile(req: Request) -> Result:
        events.append("started")
        try:
            await asyncio.sleep(3600)  # e.g. waiting on a cloud API
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return Result()

    mgr.controller("cms").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
    run = asyncio.create_task(mgr.run())
    try:
        await eventually(lambda: events == ["started"], "the leader to start reconciling")
        # another candidate takes the lease (as after a partition): our renewals now fail
        lease = await kube_client.get(LEASES, "stolen", ns)
        lease["spec"] = {**lease["spec"], "holderIdentity": "thief", "leaseDurationSeconds": 3600}
        await kube_client.update(LEASES, lease)
        with pytest.raises(LeaderElectionLost, match="leader lease lost"):
            await asyncio.wait_for(run, DEADLINE)
    finally:
        if not run.done():
            run.cancel()
    assert events == ["started", "cancelled"]
    held = await kube_client.get(LEASES, "stolen", ns)
    assert held["spec"]["holderIdentity"] == "thief"  # and it did not "release" the thief's lease


async def test_a_list_answered_200_with_html_is_retried_and_the_informer_syncs(
    kube_client: Client, kube_namespace: str, kube_fault_proxy: FaultProxy
) -> None:
    """A proxy in the path answers the informer's LIST with a login page and a 200: the
    reflector takes it as a failed list (backoff, then list again), not as the end."""
    ns, proxy = kube_namespace, kube_fault_proxy
    names = [f"cm-{i}" for i in range(3)]
    for name in names:
        await kube_client.create(CONFIGMAPS, configmap(name), ns)
    page = Respond(200, body=b"<html><body>Sign in</body></html>", content_type="text/html")
    rule = proxy.add_rule(page, client="op", verb="list", resource="configmaps", times=3)
    async with Client(proxy.client_config("op")) as op:
        mgr = new_manager(op, reflector=ReflectorOptions(backoff_initial=0.1, backoff_max=0.5))

        mgr.controller("cms").for_(CONFIGMAPS, namespace=ns).complete(stamping(mgr))
        async with running(mgr):
            await eventually(lambda: stamped(kube_client, ns, names), "every object reconciled")
    lists = proxy.log.entries(client="op", verb="list", resource="configmaps")
    assert [(e.rule, e.action) for e in lists[:4]] == [(rule.id, "respond")] * 3 + [
        (None, "forward")
    ]
    assert [e.status for e in lists[:4]] == [200, 200, 200, 200]
