"""The Instance controller end to end: one VM per Instance, drift repaired, no reconcile loop.

Only the instance controller runs (``env.start(controllers=("instance",))``), mostly with a
one-second drift interval so that "the next drift check" comes quickly. Assertions are about
counts, orders and states: no count is taken over a fixed time window.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubeloop import EVENTS, Controller, Event, Informer, Manager, NotFound
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import INSTANCES
from nodepool_operator.cloud import Instance as VM
from nodepool_operator.controllers.instance import FINALIZER, NAME, UID_TAG
from nodepool_operator.failpoints import ENV as FAILPOINTS_ENV
from tests import factories
from tests.e2e.conftest import OperatorEnv

pytestmark = pytest.mark.integration

DRIFT = 1.0  # seconds between drift checks in these tests


def _async(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return check()

    return probe


def _controller(mgr: Manager) -> Controller:
    return next(c for c in mgr.controllers if c.name == NAME)


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})


async def _create(env: OperatorEnv, ns: str, name: str, **spec: str) -> dict[str, Any]:
    obj: dict[str, Any] = await env.create(INSTANCES, factories.instance(name, **spec), ns)
    return obj


async def _running(
    env: OperatorEnv, ns: str, name: str, *, other_than: str | None = None
) -> dict[str, Any]:
    """Wait until the status reports a running, Ready VM (other than ``other_than``)."""

    async def probe() -> dict[str, Any]:
        status: dict[str, Any] = (await env.client.get(INSTANCES, name, ns)).get("status", {})
        ok = (
            status.get("state") == "running"
            and _ready(status).get("status") == "True"
            and status.get("instanceId") not in (None, other_than)
        )
        return status if ok else {}

    return await env.eventually(probe, f"Instance {name} to report a running VM")


async def _live(env: OperatorEnv, uid: str) -> list[VM]:
    return await env.cloud.list({UID_TAG: uid})


async def _events(env: OperatorEnv, ns: str, uid: str, reason: str) -> list[dict[str, Any]]:
    items = (await env.client.list(EVENTS, ns))["items"]
    return [e for e in items if e["regarding"].get("uid") == uid and e["reason"] == reason]


async def test_create_launches_one_vm_and_reports_it(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",))
    uid = (await _create(env, ns, "web", instance_type="c5.large", image="ami-1"))["metadata"][
        "uid"
    ]

    status = await _running(env, ns, "web")
    vm = await env.cloud.describe(status["instanceId"])
    assert (vm.state, vm.instance_type, vm.image) == ("running", "c5.large", "ami-1")
    assert vm.tags[UID_TAG] == uid
    assert status["publicIP"] == vm.public_ip
    assert status["lastCheckedAt"]
    assert status["observedGeneration"] == 1
    assert _ready(status)["reason"] == "Running"
    assert [v.id for v in await _live(env, uid)] == [vm.id]
    assert env.cloud.duplicates() == 0

    obj = await env.client.get(INSTANCES, "web", ns)
    assert FINALIZER in obj["metadata"]["finalizers"]
    # docs/ownership.md: the Instance controller owns status and the finalizer
    owners = {(m["manager"], m.get("subresource", "")) for m in obj["metadata"]["managedFields"]}
    assert ("kubeloop-instance", "status") in owners


async def test_vm_terminated_behind_the_back_is_replaced(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    uid = (await _create(env, ns, "db"))["metadata"]["uid"]
    old = (await _running(env, ns, "db"))["instanceId"]

    await asyncio.to_thread(env.cloud.terminate_behind_the_back, old)

    status = await _running(env, ns, "db", other_than=old)
    assert (await env.cloud.describe(old)).state == "terminated"
    assert [v.id for v in await _live(env, uid)] == [status["instanceId"]]
    warnings = await env.eventually(
        lambda: _events(env, ns, uid, "DriftRepaired"), "a DriftRepaired Event"
    )
    assert warnings[0]["type"] == "Warning"
    assert old in warnings[0]["note"]


async def test_vm_stopped_behind_the_back_is_started(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    uid = (await _create(env, ns, "cache"))["metadata"]["uid"]
    vm_id = (await _running(env, ns, "cache"))["instanceId"]

    await asyncio.to_thread(env.cloud.stop_behind_the_back, vm_id)

    async def started_again() -> bool:
        return (await env.cloud.describe(vm_id)).state == "running" and env.cloud.calls()[
            "start"
        ] >= 1

    await env.eventually(started_again, "the stopped VM to be started again")
    status = await _running(env, ns, "cache")
    assert status["instanceId"] == vm_id, "a stopped VM is started, not replaced"
    assert env.cloud.calls()["create"] == 1
    warnings = await env.eventually(
        lambda: _events(env, ns, uid, "DriftRepaired"), "a DriftRepaired Event"
    )
    assert warnings[0]["type"] == "Warning"
    assert "stopped" in warnings[0]["note"]


async def test_lastcheckedat_writes_do_not_loop(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    """The seeds' trap: every drift check writes status.lastCheckedAt. With the
    generation_changed predicate those writes trigger nothing: the Instance is checked once
    per drift interval, not hundreds of times."""
    env, ns = operator_env, kube_namespace
    mgr = await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    controller = _controller(mgr)
    await _create(env, ns, "quiet")
    first = await _running(env, ns, "quiet")

    # Count the checks the apiserver saw (each writes a new lastCheckedAt) and compare with
    # the work done meanwhile: with the predicate every reconcile is a timed check that
    # writes; in a loop each write would trigger one more reconcile (and cloud describe)
    # that finds the same second on the clock and writes nothing (twice the work). No
    # window: we wait for five checks however long they take.
    checks: list[str] = []

    def on_event(event: Event) -> None:
        checked = (event.obj.get("status") or {}).get("lastCheckedAt")
        if checked and (not checks or checks[-1] != checked):
            checks.append(checked)

    watch = Informer(env.client, INSTANCES, namespace=ns)
    watch.add_handler(on_event)
    watch.start()
    try:
        await watch.wait_synced()
        reconciles, describes = controller.reconciles, env.cloud.calls()["describe"]
        baseline = len(checks)
        await env.eventually(
            _async(lambda: len(checks) - baseline >= 5), "five drift checks", timeout=60
        )
        reconciles = controller.reconciles - reconciles
        describes = env.cloud.calls()["describe"] - describes
        written = len(checks) - baseline
    finally:
        await watch.stop()
    # each reconcile wrote; at most one in flight and one whose write was not delivered yet
    assert reconciles <= written + 2, (reconciles, checks)
    assert describes <= written + 2, (describes, checks)
    last = (await env.client.get(INSTANCES, "quiet", ns))["status"]
    assert last["lastCheckedAt"] != first["lastCheckedAt"], "the checks did write status"
    assert last["instanceId"] == first["instanceId"]
    assert controller.loops_detected == 0
    # one watch, scoped to this operator's label: reads come from it too
    assert [i.name for i in mgr.cache.informers] == [
        f"instances.kubeloop.dev?{env.settings.label_selector}"
    ]
    metrics = env.registry.render()
    assert not re.search(r"^kubeloop_reconcile_loops_detected_total\{[^}]*\} [1-9]", metrics, re.M)
    assert not re.search(r"^kubeloop_self_triggered_reconciles_total\{[^}]*\} [1-9]", metrics, re.M)


async def test_deleting_the_instance_terminates_its_vm(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    uid = (await _create(env, ns, "tmp"))["metadata"]["uid"]
    vm_id = (await _running(env, ns, "tmp"))["instanceId"]

    await env.client.delete(INSTANCES, "tmp", ns)

    async def gone() -> bool:
        try:
            await env.client.get(INSTANCES, "tmp", ns)
        except NotFound:
            return True
        return False

    await env.eventually(gone, "the Instance to be deleted (finalizer removed)")
    assert (await env.cloud.describe(vm_id)).state == "terminated"
    assert await _live(env, uid) == []


async def test_spec_change_replaces_the_vm(operator_env: OperatorEnv, kube_namespace: str) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    uid = (await _create(env, ns, "app"))["metadata"]["uid"]
    old = (await _running(env, ns, "app"))["instanceId"]

    await env.client.patch(INSTANCES, "app", {"spec": {"instanceType": "r5.large"}}, ns)

    status = await _running(env, ns, "app", other_than=old)
    assert status["observedGeneration"] == 2
    assert (await env.cloud.describe(status["instanceId"])).instance_type == "r5.large"
    assert (await env.cloud.describe(old)).state == "terminated"
    assert [v.id for v in await _live(env, uid)] == [status["instanceId"]]
    assert await env.eventually(lambda: _events(env, ns, uid, "Replacing"), "a Replacing Event")


async def test_unknown_instance_type_keeps_the_running_vm(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    env, ns = operator_env, kube_namespace
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    await _create(env, ns, "keep")
    vm_id = (await _running(env, ns, "keep"))["instanceId"]

    await env.client.patch(INSTANCES, "keep", {"spec": {"instanceType": "z9.huge"}}, ns)

    async def rejected() -> bool:
        status = (await env.client.get(INSTANCES, "keep", ns))["status"]
        return _ready(status).get("reason") == "InvalidSpec"

    await env.eventually(rejected, "Ready=False, InvalidSpec")
    assert (await env.cloud.describe(vm_id)).state == "running", "not terminated for nothing"
    assert env.cloud.calls()["create"] == 1


async def test_lost_create_response_yields_one_vm(
    operator_env: OperatorEnv, kube_namespace: str
) -> None:
    """The cloud makes the VM but the answer is lost: the retry's token finds it."""
    env, ns = operator_env, kube_namespace
    await asyncio.to_thread(env.cloud.inject, "create", applied=True)
    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)
    uid = (await _create(env, ns, "once"))["metadata"]["uid"]

    status = await _running(env, ns, "once")
    assert env.cloud.calls()["create"] >= 2, "the first create's answer was lost"
    snapshot = await asyncio.to_thread(env.cloud.snapshot)
    assert [i.id for i in snapshot.instances] == [status["instanceId"]]
    assert [v.id for v in await _live(env, uid)] == [status["instanceId"]]


_RUN_INSTANCE_CONTROLLER = """
import asyncio, sys
from pathlib import Path
from kubeloop import Client
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.operator import FIELD_MANAGER, build_manager
from nodepool_operator.settings import OperatorSettings

settings = OperatorSettings(
    cloud_state=Path(sys.argv[2]), boot_seconds=1.0, install_crds=False, handle_signals=False,
    metrics_bind_address=None, health_probe_bind_address=None, label_selector=sys.argv[3],
)

async def main() -> None:
    async with Client.from_kubeconfig(sys.argv[1], field_manager=FIELD_MANAGER) as client:
        cloud = SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
        await build_manager(client, cloud, settings, controllers=("instance",)).run()

asyncio.run(main())
"""


async def test_sigkill_between_create_and_status_write(
    operator_env: OperatorEnv, kube_namespace: str, kube_control_plane: ControlPlane
) -> None:
    env, ns = operator_env, kube_namespace
    uid = (await _create(env, ns, "crash"))["metadata"]["uid"]

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _RUN_INSTANCE_CONTROLLER,
        str(kube_control_plane.kubeconfig),
        str(env.settings.cloud_state),
        env.settings.label_selector or "",
        env={**os.environ, FAILPOINTS_ENV: "instance-after-cloud-create=kill"},
    )
    assert await asyncio.wait_for(proc.wait(), timeout=120) == -9, "the failpoint kills it"
    orphan = await _live(env, uid)
    assert len(orphan) == 1
    assert "instanceId" not in (await env.client.get(INSTANCES, "crash", ns)).get("status", {})

    await env.start(controllers=("instance",), drift_interval_seconds=DRIFT)

    status = await _running(env, ns, "crash")
    assert status["instanceId"] == orphan[0].id, "the retry's token returned the same VM"
    snapshot = await asyncio.to_thread(env.cloud.snapshot)
    assert len(snapshot.instances) == 1
