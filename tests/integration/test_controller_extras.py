"""More controller behaviour against the real apiserver: a reconcile timeout, timer and
channel sources, the terminal-error condition, the loop Event, and /readyz on a stalled
watch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import aiohttp
import pytest

from kubeloop import (
    EVENTS,
    ChannelSource,
    Client,
    ControllerOptions,
    ReflectorOptions,
    Request,
    Result,
    TerminalError,
    update_status,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, resource_of, running, simple_crd

pytestmark = pytest.mark.integration

GROUP = "extras.kubeloop.dev"
THING_CRD = simple_crd(
    GROUP,
    "Thing",
    spec={"n": {"type": "integer"}},
    status={
        "phase": {"type": "string", "enum": ["Ready"]},
        "checkedAt": {"type": "string"},
        "conditions": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
)
THINGS = resource_of(THING_CRD)


def thing(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": name}, "spec": {}}


@pytest.fixture
def ns(kube_control_plane: ControlPlane) -> str:
    kube_control_plane.install_crds([THING_CRD])
    return kube_control_plane.create_namespace("extras")


async def test_a_reconcile_that_exceeds_its_timeout_is_cancelled_and_retried(
    kube_client: Client, ns: str
) -> None:
    attempts: list[str] = []
    finished: list[int] = []

    async def reconcile(req: Request) -> Result:
        attempts.append(req.name)
        if len(attempts) < 3:
            await asyncio.sleep(30)  # hangs: the timeout must cut it
        finished.append(len(attempts))
        return Result()

    mgr = new_manager(kube_client)
    mgr.controller("timeout").for_(THINGS, namespace=ns).with_options(
        ControllerOptions(reconcile_timeout=0.3)
    ).complete(reconcile)
    await kube_client.create(THINGS, thing("slow"), ns)
    async with running(mgr):
        await eventually(lambda: bool(finished), "a reconcile to finish after two timeouts")
    assert finished == [3]
    assert attempts == ["slow"] * 3
    assert "controller_runtime_reconcile_errors_total" in mgr.options.registry.render()


async def test_periodic_and_channel_sources_enqueue_requests(kube_client: Client, ns: str) -> None:
    seen: list[Request] = []

    async def reconcile(req: Request) -> Result:
        seen.append(req)
        return Result()

    channel: asyncio.Queue[Request] = asyncio.Queue()
    mgr = new_manager(kube_client)
    (
        mgr.controller("sources")
        .periodic(0.2, lambda: [Request("tick", ns)])
        .watches_source(ChannelSource(channel))
        .complete(reconcile)
    )
    async with running(mgr):
        await eventually(lambda: seen.count(Request("tick", ns)) >= 3, "three timer ticks")
        await channel.put(Request("pushed", ns))
        await eventually(lambda: Request("pushed", ns) in seen, "the pushed request")


async def test_terminal_error_sets_the_configured_condition(kube_client: Client, ns: str) -> None:
    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(THINGS, req.name, req.namespace)
        assert obj is not None

        def bad(status: dict[str, Any]) -> None:
            status["phase"] = "Exploded"  # not in the enum: 422 Invalid

        await update_status(kube_client, THINGS, obj, bad)
        return Result()

    mgr = new_manager(kube_client)
    mgr.controller("terminal").for_(THINGS, namespace=ns).with_options(
        ControllerOptions(terminal_error_condition="Ready")
    ).complete(reconcile)
    await kube_client.create(THINGS, thing("bad"), ns)

    def condition() -> Awaitable[dict[str, Any] | None]:
        return ready_condition(kube_client, "bad", ns)

    async with running(mgr):
        await eventually(lambda: _truthy(condition()), "the Ready condition")
    cond = await condition()
    assert cond is not None
    assert cond["status"] == "False"
    assert cond["reason"] == "Invalid"
    assert "status.phase" in cond["message"]


async def test_a_terminal_error_sets_ready_false_by_default(kube_client: Client, ns: str) -> None:
    async def reconcile(req: Request) -> Result:
        raise TerminalError("spec.n must be even", reason="InvalidSpec")

    mgr = new_manager(kube_client)
    mgr.controller("default-terminal").for_(THINGS, namespace=ns).complete(reconcile)
    await kube_client.create(THINGS, thing("odd"), ns)

    def condition() -> Awaitable[dict[str, Any] | None]:
        return ready_condition(kube_client, "odd", ns)

    async with running(mgr):
        await eventually(lambda: _truthy(condition()), "the Ready condition, by default")
    cond = await condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert cond["message"] == "default-terminal: spec.n must be even"
    assert cond["observedGeneration"] == 1


async def ready_condition(client: Client, name: str, ns: str) -> dict[str, Any] | None:
    obj = await client.get(THINGS, name, ns)
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return dict(cond)
    return None


async def _truthy(value: Any) -> bool:
    return bool(await value)


async def test_a_detected_loop_is_reported_as_an_event_naming_the_field(
    kube_client: Client, ns: str
) -> None:
    writes = 0

    async def reconcile(req: Request) -> Result:
        nonlocal writes
        obj = await mgr.cache.get(THINGS, req.name, req.namespace)
        if obj is None or writes > 50:
            return Result()
        writes += 1
        stamp = str(writes)

        def touch(status: dict[str, Any]) -> None:
            status["checkedAt"] = stamp  # changes every time: the seeds' trap

        await update_status(kube_client, THINGS, obj, touch)
        return Result()

    mgr = new_manager(kube_client)
    controller = mgr.controller("looper").for_(THINGS, namespace=ns).complete(reconcile)
    await kube_client.create(THINGS, thing("loopy"), ns)

    async def loop_event() -> bool:
        events = await kube_client.list(EVENTS, ns)
        return any(
            e.get("reason") == "ReconcileLoop" and e["regarding"]["name"] == "loopy"
            for e in events["items"]
        )

    async with running(mgr):
        await eventually(lambda: controller.loops_detected >= 1, "the loop to be detected")
        await eventually(loop_event, "the ReconcileLoop Event")
    events = await kube_client.list(EVENTS, ns)
    note = next(e["note"] for e in events["items"] if e.get("reason") == "ReconcileLoop")
    assert "looper" in note
    assert "status.checkedAt" in note


async def test_readyz_fails_while_a_watch_shows_no_life(kube_client: Client, ns: str) -> None:
    async def reconcile(req: Request) -> Result:
        return Result()

    mgr = new_manager(
        kube_client,
        health_probe_bind_address="127.0.0.1:0",
        watch_stall_threshold=1.0,
        reflector=ReflectorOptions(read_timeout=600.0),
    )
    mgr.controller("quiet").for_(THINGS, namespace=ns).complete(reconcile)

    async def readyz() -> int:
        async with (
            aiohttp.ClientSession() as http,
            http.get(mgr.endpoints.url("probes") + "/readyz") as resp,
        ):
            return resp.status

    async with running(mgr):
        await eventually(
            lambda: bool(mgr.cache.informers) and all(i.has_synced for i in mgr.cache.informers),
            "cache sync",
        )
        # nothing happens on the resource: after the threshold the watch counts as stalled
        await eventually(lambda: _eq(readyz(), 500), "/readyz to fail on the silent watch")
        await kube_client.create(THINGS, thing("wake"), ns)  # a line on the watch: alive again
        await eventually(lambda: _eq(readyz(), 200), "/readyz to recover")


async def _eq(value: Any, expected: int) -> bool:
    return bool(await value == expected)
