"""Controllers run by a Manager against the real kube-apiserver.

Each test gets its own namespace and Manager (own metrics registry, no signal
handlers) and records what its reconciler saw: how many runs per object, which
overlapped, in what order. Assertions are about those facts; waits have
generous deadlines and never measure time.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from kubeloop import (
    CONFIGMAPS,
    EVENTS,
    Client,
    Controller,
    ControllerOptions,
    ItemExponentialBackoff,
    Manager,
    Object,
    Request,
    Resource,
    Result,
    TerminalError,
    generation_changed,
    update_status,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, resource_of, running, simple_crd

pytestmark = pytest.mark.integration

GROUP = "ctl.kubeloop.dev"
GIZMO_CRD = simple_crd(
    GROUP,
    "Gizmo",
    spec={"size": {"type": "integer", "minimum": 0}},
    status={
        "phase": {"type": "string", "enum": ["Pending", "Ready"]},
        "count": {"type": "integer"},
    },
)
GIZMOS = resource_of(GIZMO_CRD)

#: Generous deadline for anything the control plane has to do.
DEADLINE = 30.0


def gizmo(name: str, size: int = 1) -> Object:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gizmo",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


@pytest.fixture(scope="module")
def gizmo_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([GIZMO_CRD])


@pytest.fixture
def ns(kube_control_plane: ControlPlane, gizmo_crd: None) -> str:
    return kube_control_plane.create_namespace("ctl")


async def warning_events(client: Client, ns: str, obj: Object) -> list[Object]:
    items, _ = await client.list_all(EVENTS, ns)
    uid = obj["metadata"]["uid"]
    return [
        e for e in items if e.get("regarding", {}).get("uid") == uid and e.get("type") == "Warning"
    ]


async def _has_event(client: Client, ns: str, obj: Object, reason: str) -> bool:
    return any(e.get("reason") == reason for e in await warning_events(client, ns, obj))


def _contains(items: list[str], item: str) -> Callable[[], bool]:
    return lambda: item in items


def counter_value(mgr: Manager, family: str, **labels: str) -> float:
    metric = mgr.metrics.registry.get(family)
    assert metric is not None, family
    child: Any = metric.labels(**labels)
    return float(child.value)


# -- the workqueue's promise: one worker per key ----------------------------------------


async def test_one_key_is_never_reconciled_by_two_workers_at_once(
    kube_client: Client, ns: str
) -> None:
    names = ["hot", *(f"cold-{i}" for i in range(7))]
    for name in names:
        await kube_client.create(GIZMOS, gizmo(name), ns)
    mgr = new_manager(kube_client)
    active: Counter[str] = Counter()
    max_active: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    overall = {"now": 0, "max": 0}
    last_size: dict[str, int] = {}

    async def reconcile(req: Request) -> Result:
        active[req.name] += 1
        overall["now"] += 1
        max_active[req.name] = max(max_active[req.name], active[req.name])
        overall["max"] = max(overall["max"], overall["now"])
        try:
            obj = await mgr.cache.get(GIZMOS, req.name, req.namespace)
            await asyncio.sleep(0.05)  # long enough for many events to arrive meanwhile
            if obj is not None:
                last_size[req.name] = obj["spec"]["size"]
            runs[req.name] += 1
        finally:
            active[req.name] -= 1
            overall["now"] -= 1
        return Result()

    mgr.controller("overlap").for_(GIZMOS, namespace=ns).with_options(
        ControllerOptions(max_concurrent_reconciles=8)
    ).complete(reconcile)
    async with running(mgr):
        await eventually(
            lambda: all(runs[n] >= 1 for n in names), "first reconcile of every object"
        )

        async def burst(name: str, updates: int) -> None:
            for i in range(updates):
                await kube_client.patch(GIZMOS, name, {"spec": {"size": i + 2}}, ns)

        await asyncio.gather(burst("hot", 50), *(burst(n, 5) for n in names if n != "hot"))
        await eventually(
            lambda: (
                last_size.get("hot") == 51
                and all(last_size.get(n) == 6 for n in names if n != "hot")
            ),
            "every object reconciled at its final version",
        )
    # the workers did run in parallel, yet never two on one object
    assert overall["max"] >= 2
    assert max(max_active.values()) == 1, dict(max_active)
    # events arriving during a reconcile were folded, not lost and not run in parallel
    assert 2 <= runs["hot"] <= 51


# -- errors and the requeue policy -----------------------------------------------------


async def test_exception_is_retried_with_backoff_and_does_not_kill_the_controller(
    kube_client: Client, ns: str
) -> None:
    failures = 3
    for name in ("flaky", "steady"):
        await kube_client.create(GIZMOS, gizmo(name), ns)
    mgr = new_manager(kube_client)
    attempts: dict[str, list[int]] = defaultdict(list)
    succeeded: list[str] = []
    controller: Controller | None = None

    async def reconcile(req: Request) -> Result:
        assert controller is not None
        attempts[req.name].append(controller.queue.num_requeues(req))
        if req.name == "flaky" and len(attempts["flaky"]) <= failures:
            raise RuntimeError(f"flaky failure {len(attempts['flaky'])}")
        succeeded.append(req.name)
        return Result()

    controller = mgr.controller("retry").for_(GIZMOS, namespace=ns).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: "flaky" in succeeded, "flaky to succeed after its failures")
        # the controller is alive for new work after the failures
        await kube_client.create(GIZMOS, gizmo("late"), ns)
        await eventually(lambda: "late" in succeeded, "a new object to be reconciled")
        flaky_requeues_after_success = controller.queue.num_requeues(Request("flaky", ns))
    # each retry went through the per-item backoff: one more step per failure
    assert attempts["flaky"] == [0, 1, 2, 3]
    assert flaky_requeues_after_success == 0  # success forgets the backoff
    assert succeeded.count("flaky") == 1
    assert "steady" in succeeded
    assert counter_value(mgr, "controller_runtime_reconcile_errors_total", controller="retry") == 3
    assert (
        counter_value(mgr, "controller_runtime_reconcile_total", controller="retry", result="error")
        == 3
    )


async def test_an_invalid_write_is_not_retried_in_a_loop(kube_client: Client, ns: str) -> None:
    """422 says the request itself is wrong: retrying it cannot help. (403 and 404 say
    "not yet" and are retried: tests/integration/test_retry_until_allowed.py.)"""
    created = await kube_client.create(GIZMOS, gizmo("doomed"), ns)
    mgr = new_manager(kube_client)
    runs: Counter[str] = Counter()
    errors: list[Exception] = []

    async def reconcile(req: Request) -> Result:
        runs[req.name] += 1
        obj = await mgr.cache.get(GIZMOS, req.name, req.namespace)
        assert obj is not None
        try:  # the schema's enum has no "Bogus"
            await update_status(mgr.client, GIZMOS, obj, lambda s: s.update(phase="Bogus"))
        except Exception as err:
            errors.append(err)
            raise
        return Result()

    controller = mgr.controller("terminal").for_(GIZMOS, namespace=ns).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: runs["doomed"] >= 1, "the first reconcile")
        await eventually(
            lambda: _has_event(kube_client, ns, created, "Invalid"),
            "a Warning Event with reason Invalid",
        )
        # the per-item backoff would have retried many times by now (5 ms, 10 ms, ...)
        await asyncio.sleep(2.0)
        assert runs["doomed"] == 1
        req = Request("doomed", ns)
        assert controller.queue.num_delayed == 0  # nothing scheduled for later either
        assert controller.queue.num_requeues(req) == 0
    assert [type(e).__name__ for e in errors] == ["Invalid"]
    assert (
        counter_value(
            mgr, "controller_runtime_terminal_reconcile_errors_total", controller="terminal"
        )
        == 1
    )


async def test_terminal_error_is_not_retried(kube_client: Client, ns: str) -> None:
    created = await kube_client.create(GIZMOS, gizmo("bad-config"), ns)
    mgr = new_manager(kube_client)
    runs: Counter[str] = Counter()

    async def reconcile(req: Request) -> Result:
        runs[req.name] += 1
        raise TerminalError("spec.size cannot be provisioned")

    controller = mgr.controller("terminal-error").for_(GIZMOS, namespace=ns).complete(reconcile)
    async with running(mgr):
        await eventually(
            lambda: _has_event(kube_client, ns, created, "ReconcileFailed"),
            "a ReconcileFailed Warning Event",
        )
        await asyncio.sleep(2.0)
        assert runs["bad-config"] == 1
        assert controller.queue.num_delayed == 0
    assert (
        counter_value(
            mgr, "controller_runtime_terminal_reconcile_errors_total", controller="terminal-error"
        )
        == 1
    )


async def test_requeue_after_reconciles_again_without_events(kube_client: Client, ns: str) -> None:
    await kube_client.create(GIZMOS, gizmo("periodic"), ns)
    mgr = new_manager(kube_client)
    runs: list[int] = []
    controller: Controller | None = None

    async def reconcile(req: Request) -> Result:
        assert controller is not None
        runs.append(controller.queue.num_requeues(req))
        return Result(requeue_after=0.2)

    controller = mgr.controller("requeue-after").for_(GIZMOS, namespace=ns).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: len(runs) >= 4, "four reconciles of an untouched object")
    # requeue_after is a schedule, not a failure: the backoff never grows
    assert set(runs) == {0}
    assert (
        counter_value(
            mgr,
            "controller_runtime_reconcile_total",
            controller="requeue-after",
            result="requeue_after",
        )
        >= 3
    )


# -- read-your-own-writes --------------------------------------------------------------


async def test_cache_read_after_own_status_write_is_never_older_than_the_write(
    kube_client: Client, ns: str
) -> None:
    rounds = 50
    await kube_client.create(GIZMOS, gizmo("ryw"), ns)
    mgr = new_manager(kube_client)
    written: list[str] = []
    checks: list[tuple[str, str]] = []  # (written before this read, what the cache returned)
    stale_store: list[bool] = []  # whether the store alone still had an older version
    done = asyncio.Event()

    async def reconcile(req: Request) -> Result:
        key = f"{req.namespace}/{req.name}"
        if written:
            inf = mgr.cache.informer(GIZMOS, namespace=ns)
            in_store = inf.store.get(key)
            stale_store.append(
                in_store is None or int(in_store["metadata"]["resourceVersion"]) < int(written[-1])
            )
        obj = await mgr.cache.get(GIZMOS, req.name, req.namespace)
        assert obj is not None
        if written:
            checks.append((written[-1], obj["metadata"]["resourceVersion"]))
        count = int((obj.get("status") or {}).get("count", 0))
        if count >= rounds:
            done.set()
            return Result()
        after = await update_status(mgr.client, GIZMOS, obj, lambda s: s.update(count=count + 1))
        written.append(after["metadata"]["resourceVersion"])
        return Result(requeue=True)  # at once: the watch has likely not delivered it yet

    mgr.controller("ryw").for_(GIZMOS, namespace=ns).with_options(
        ControllerOptions(rate_limiter=ItemExponentialBackoff(base=1e-6, cap=1e-6))
    ).complete(reconcile)
    async with running(mgr):
        async with asyncio.timeout(DEADLINE * 2):
            await done.wait()
    assert len(written) == rounds
    assert len(checks) >= rounds
    behind = [(w, got) for w, got in checks if int(got) < int(w)]
    assert behind == [], f"cache returned versions older than our own write: {behind}"
    # the reads had to wait for the watch at least sometimes, or nothing was tested
    assert any(stale_store), "the watch always delivered before the read; RYW was not exercised"
    assert mgr.cache.live_read_fallbacks == 0


# -- sources: owns(), predicates, resync ------------------------------------------------


async def test_owned_child_change_enqueues_its_controller_owner(
    kube_client: Client, ns: str
) -> None:
    owner = await kube_client.create(GIZMOS, gizmo("parent"), ns)
    await kube_client.create(GIZMOS, gizmo("bystander"), ns)

    def child(name: str, controller: bool) -> Object:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "ownerReferences": [
                    {
                        "apiVersion": f"{GROUP}/v1",
                        "kind": "Gizmo",
                        "name": "parent",
                        "uid": owner["metadata"]["uid"],
                        "controller": controller,
                    }
                ],
            },
            "data": {"v": "0"},
        }

    await kube_client.create(CONFIGMAPS, child("owned", controller=True), ns)
    await kube_client.create(CONFIGMAPS, child("merely-referencing", controller=False), ns)
    mgr = new_manager(kube_client)
    log: list[str] = []

    async def reconcile(req: Request) -> Result:
        if req.namespace == ns:
            log.append(req.name)
        return Result()

    controller = (
        mgr.controller("owner")
        .for_(GIZMOS, namespace=ns, predicates=[generation_changed])
        .owns(CONFIGMAPS)
        .complete(reconcile)
    )
    # every ConfigMap event; handlers run in one synchronous dispatch, so once this
    # one has seen an event, the controller's handler has decided about it too
    delivered: list[str] = []
    mgr.cache.informer(CONFIGMAPS).add_handler(
        lambda e: delivered.append(e.obj["metadata"]["resourceVersion"])
    )

    async def patch_and_settle(name: str) -> None:
        patched = await kube_client.patch(CONFIGMAPS, name, {"data": {"v": "1"}}, ns)
        rv = patched["metadata"]["resourceVersion"]
        await eventually(lambda: rv in delivered, f"the update of {name} on the watch")
        await controller.queue.wait_idle()  # covers a reconcile it may have caused

    async with running(mgr):
        # start-up: all Added events are queued before the workers start, so each
        # Gizmo is reconciled once (the owned child's Added folds into the parent's)
        await eventually(lambda: {"parent", "bystander"} <= set(log), "the start-up reconciles")
        await controller.queue.wait_idle()
        assert Counter(log) == {"parent": 1, "bystander": 1}
        await patch_and_settle("merely-referencing")  # controller: false
        assert Counter(log) == {"parent": 1, "bystander": 1}
        await patch_and_settle("owned")
        await eventually(lambda: Counter(log)["parent"] == 2, "the owner reconciled for its child")
    assert Counter(log) == {"parent": 2, "bystander": 1}  # never the ConfigMaps themselves


async def test_generation_changed_drops_status_only_updates(kube_client: Client, ns: str) -> None:
    await kube_client.create(GIZMOS, gizmo("quiet"), ns)
    mgr = new_manager(kube_client)
    runs: list[int] = []  # the generation each reconcile saw

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(GIZMOS, req.name, req.namespace)
        assert obj is not None
        runs.append(obj["metadata"]["generation"])
        return Result()

    controller = (
        mgr.controller("generation")
        .for_(GIZMOS, namespace=ns, predicates=[generation_changed])
        .complete(reconcile)
    )
    # every event the informer delivers, in order; handlers run in one synchronous
    # dispatch, so once this one has seen an event the controller's has too
    delivered: list[str] = []
    mgr.cache.informer(GIZMOS, namespace=ns).add_handler(
        lambda e: delivered.append(e.obj["metadata"]["resourceVersion"])
    )
    async with running(mgr):
        await eventually(lambda: runs == [1], "the start-up reconcile")
        await controller.queue.wait_idle()
        for phase in ("Pending", "Ready", "Pending", "Ready", "Pending"):
            current = await kube_client.get(GIZMOS, "quiet", ns)
            current["status"] = {"phase": phase}
            rv = (await kube_client.update_status(GIZMOS, current))["metadata"]["resourceVersion"]
            # once we saw the event the controller has decided about it; had it
            # enqueued a reconcile, wait_idle would wait for that reconcile
            await eventually(_contains(delivered, rv), "the status update on the watch")
            await controller.queue.wait_idle()
        assert runs == [1]
        await kube_client.patch(GIZMOS, "quiet", {"spec": {"size": 7}}, ns)
        await eventually(lambda: runs == [1, 2], "a reconcile for the spec change")


async def test_resync_reconciles_even_when_predicates_drop_every_event(
    kube_client: Client, ns: str
) -> None:
    for name in ("a", "b"):
        await kube_client.create(GIZMOS, gizmo(name), ns)
    mgr = new_manager(kube_client)
    runs: Counter[str] = Counter()
    dropped: list[object] = []

    def drop_all(event: object) -> bool:
        dropped.append(event)
        return False

    async def reconcile(req: Request) -> Result:
        runs[req.name] += 1
        return Result()

    mgr.controller("resync").for_(GIZMOS, namespace=ns, predicates=[drop_all]).with_options(
        ControllerOptions(resync_period=0.5)
    ).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: len(dropped) >= 2, "the Added events to reach the predicate")
        await kube_client.patch(GIZMOS, "a", {"spec": {"size": 3}}, ns)
        await eventually(lambda: runs["a"] >= 3 and runs["b"] >= 3, "three resyncs of each object")
    assert len(dropped) >= 3  # Added a, Added b, the update of a: all dropped


# -- graceful shutdown -----------------------------------------------------------------


async def test_shutdown_lets_the_reconcile_in_flight_finish_and_starts_no_new_one(
    kube_client: Client, ns: str
) -> None:
    await kube_client.create(GIZMOS, gizmo("first"), ns)
    mgr = new_manager(kube_client)
    log: list[str] = []
    started, stop_called = asyncio.Event(), asyncio.Event()

    async def reconcile(req: Request) -> Result:
        log.append(f"start {req.name}")
        started.set()
        await stop_called.wait()  # still in flight when the manager is told to stop
        await asyncio.sleep(1.0)  # and then slow to finish
        log.append(f"end {req.name}")
        return Result()

    controller = mgr.controller("graceful").for_(GIZMOS, namespace=ns).complete(reconcile)
    task = asyncio.create_task(mgr.run())
    try:
        async with asyncio.timeout(DEADLINE):
            await started.wait()
        await kube_client.create(GIZMOS, gizmo("second"), ns)
        await eventually(lambda: controller.queue.depth >= 1, "the second object to be queued")
        assert log == ["start first"]
        mgr.stop()
        stop_called.set()
        async with asyncio.timeout(DEADLINE):
            await task
    finally:
        stop_called.set()
        if not task.done():
            task.cancel()
    assert log == ["start first", "end first"]
    # nothing picks up work after the manager returned
    await kube_client.create(GIZMOS, gizmo("third"), ns)
    await asyncio.sleep(0.5)
    assert log == ["start first", "end first"]


# -- /metrics, /healthz, /readyz -------------------------------------------------------


def _samples(text: str, metric: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric in Prometheus text: (labels, value) per line."""
    out = []
    for line in text.splitlines():
        m = re.fullmatch(rf"{metric}(?:\{{(.*)\}})? (\S+)", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
            out.append((labels, float(m.group(2))))
    return out


def _value(text: str, metric: str, /, **labels: str) -> float:
    """The sum of ``metric``'s samples whose labels include ``labels``."""
    matches = [v for lbl, v in _samples(text, metric) if labels.items() <= lbl.items()]
    assert matches, f"no sample {metric}{labels}"
    return sum(matches)


async def test_metrics_and_probes(kube_client: Client, ns: str) -> None:
    await kube_client.create(GIZMOS, gizmo("measured"), ns)
    mgr = new_manager(
        kube_client,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )
    steps: list[str] = []
    name = "metrics"

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(GIZMOS, req.name, req.namespace)
        assert obj is not None
        step = len(steps)
        steps.append(f"run {step}")
        if step == 0:
            # someone else writes meanwhile, so our status write meets a 409 and is re-applied
            await mgr.client.patch(
                GIZMOS, req.name, {"metadata": {"labels": {"touched": "yes"}}}, req.namespace
            )
            await update_status(mgr.client, GIZMOS, obj, lambda s: s.update(phase="Ready"))
            return Result(requeue=True)
        if step == 1:
            raise RuntimeError("a transient failure")
        # the status already says so: this write is skipped
        await update_status(mgr.client, GIZMOS, obj, lambda s: s.update(phase="Ready"))
        steps.append("done")
        return Result()

    mgr.controller(name).for_(GIZMOS, namespace=ns, predicates=[generation_changed]).complete(
        reconcile
    )
    resource = GIZMOS.key
    async with running(mgr), aiohttp.ClientSession() as http:
        await eventually(lambda: "done" in steps, "the three reconciles")
        probes = mgr.endpoints.url("probes")
        async with http.get(f"{probes}/healthz") as resp:
            assert resp.status == 200
        async with http.get(f"{probes}/readyz") as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(f"{mgr.endpoints.url('metrics')}/metrics") as resp:
            assert resp.status == 200
            text = await resp.text()

    ctl = {"controller": name}
    assert _value(text, "controller_runtime_reconcile_total", **ctl, result="requeue") == 1
    assert _value(text, "controller_runtime_reconcile_total", **ctl, result="error") == 1
    assert _value(text, "controller_runtime_reconcile_total", **ctl, result="success") == 1
    assert _value(text, "controller_runtime_reconcile_errors_total", **ctl) == 1
    assert _value(text, "controller_runtime_reconcile_time_seconds_count", **ctl) == 3
    assert _value(text, "controller_runtime_reconcile_time_seconds_bucket", **ctl, le="+Inf") == 3
    wq = {"name": name}
    assert _value(text, "workqueue_depth", **wq) == 0
    assert _value(text, "workqueue_adds_total", **wq) >= 3
    assert _value(text, "workqueue_queue_duration_seconds_bucket", **wq, le="+Inf") >= 3
    assert _value(text, "workqueue_retries_total", **wq) >= 2  # the requeue and the error
    # labelled by HTTP method, as client-go does: LIST and WATCH are GETs, an update a PUT
    assert _value(text, "rest_client_requests_total", method="GET", code="200") >= 2
    assert _value(text, "rest_client_requests_total", method="PATCH", code="200") >= 1
    assert _value(text, "rest_client_requests_total", method="PUT", code="409") == 1
    writes = {"controller": name, "resource": resource}
    assert _value(text, "kubeloop_api_writes_total", **writes, verb="patch", subresource="") == 1
    assert (
        _value(text, "kubeloop_api_writes_total", **writes, verb="update", subresource="status")
        == 1
    )
    assert _value(text, "kubeloop_writes_skipped_total", **writes, subresource="status") == 1
    assert _value(text, "kubeloop_conflicts_total", **writes, outcome="retried") == 1
    assert _value(text, "kubeloop_conflicts_total", **writes, outcome="resolved") == 1


async def test_readyz_fails_until_caches_sync(kube_client: Client, ns: str) -> None:
    mgr = new_manager(kube_client, health_probe_bind_address="127.0.0.1:0")

    async def reconcile(req: Request) -> Result:
        return Result()

    mgr.controller("ready").for_(GIZMOS, namespace=ns).complete(reconcile)
    # a started informer that has not listed yet makes the manager not ready; this one
    # never will (its kind is not served), so the probe cannot race its sync
    await mgr.endpoints.start(None, "127.0.0.1:0")
    try:
        mgr.cache.informer(Resource("missing.kubeloop.dev", "v1", "nothings", "Nothing")).start()
        url = f"{mgr.endpoints.url('probes')}/readyz"
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            assert resp.status == 500
            assert "informers-synced" in await resp.text()
    finally:
        await mgr.cache.stop()
        await mgr.endpoints.stop()
