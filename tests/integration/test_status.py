"""Status write discipline against the real kube-apiserver.

Every test counts the HTTP requests the client really sent (through its
``observer`` hook), so "nothing was written" and "exactly one re-read" are
facts about the wire, not about our bookkeeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop._backoff import Backoff
from kubeloop._client import Client, PatchType
from kubeloop._conditions import get_condition, needs_reconcile
from kubeloop._errors import Conflict, Forbidden, Invalid, NotFound
from kubeloop._metrics import Registry, RuntimeMetrics
from kubeloop._resource import Object, Resource
from kubeloop._status import StaleGeneration, retry_update, set_status_condition, update_status
from kubeloop.envtest import ControlPlane
from kubeloop.testing import resource_of, simple_crd

GROUP = "status.kubeloop.dev"

_CONDITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "status", "lastTransitionTime", "reason", "message"],
    "properties": {
        "type": {"type": "string"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "observedGeneration": {"type": "integer", "minimum": 0},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "reason": {"type": "string"},
        "message": {"type": "string"},
    },
}

GADGET_CRD = simple_crd(
    GROUP,
    "Gadget",
    spec={"size": {"type": "integer", "minimum": 0}},
    status={
        "observedGeneration": {"type": "integer"},
        "phase": {"type": "string", "enum": ["Pending", "Ready"]},
        "conditions": {"type": "array", "items": _CONDITION_SCHEMA},
    },
)
GADGETS = resource_of(GADGET_CRD)

pytestmark = pytest.mark.integration


class Calls:
    """A RequestObserver that keeps ``(verb, subresource, code)`` per HTTP attempt."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str | None, int]] = []

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        self.log.append((verb, subresource, code))

    def clear(self) -> None:
        self.log.clear()


@pytest.fixture(scope="module")
def gadget_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([GADGET_CRD])


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
async def client(
    kube_control_plane: ControlPlane, gadget_crd: None, calls: Calls
) -> AsyncIterator[Client]:
    """The client under test; every request it sends lands in ``calls``."""
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, observer=calls) as c:
        yield c


@pytest.fixture
async def other(kube_control_plane: ControlPlane, gadget_crd: None) -> AsyncIterator[Client]:
    """A second writer (think: the autoscaler) whose requests are not counted."""
    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig, field_manager="other-writer"
    ) as c:
        yield c


@pytest.fixture
def metrics() -> RuntimeMetrics:
    return RuntimeMetrics(Registry())


async def _gadget(other: Client, namespace: str, name: str = "g", size: int = 1) -> Object:
    return await other.create(
        GADGETS,
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Gadget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"size": size},
        },
    )


def _skipped(metrics: RuntimeMetrics, subresource: str = "status") -> float:
    return metrics.writes_skipped_total.labels("test", GADGETS.key, subresource).value


def _conflicts(metrics: RuntimeMetrics, outcome: str) -> float:
    return metrics.conflicts_total.labels("test", GADGETS.key, outcome).value


async def test_writes_status_then_sends_nothing_when_unchanged(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    obj = await _gadget(other, kube_namespace)

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"

    written = await update_status(client, GADGETS, obj, ready, controller="test", metrics=metrics)
    assert calls.log == [("update", "status", 200)]
    assert written["status"] == {"phase": "Ready"}
    assert "status" not in obj  # the caller's object is not modified

    calls.clear()
    again = await update_status(client, GADGETS, written, ready, controller="test", metrics=metrics)
    assert calls.log == []
    assert again is written
    assert _skipped(metrics) == 1
    latest = await other.get(GADGETS, "g", kube_namespace)
    assert latest["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


async def test_conflict_at_a_new_generation_stops_without_writing(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    """The seed's NodePool story: the autoscaler raises spec while we provision. The
    status we computed describes generation 1; the object is at 2 now: not written."""
    await _gadget(other, kube_namespace, size=1)
    pool = await client.get(GADGETS, "g", kube_namespace)
    processed_generation = pool["metadata"]["generation"]
    expensive_runs = 0

    async def provision(spec: dict[str, Any]) -> None:
        nonlocal expensive_runs
        expensive_runs += 1
        # Meanwhile another controller changes the spec: a new generation.
        await other.patch(
            GADGETS, "g", {"spec": {"size": 2}}, kube_namespace, patch_type=PatchType.MERGE
        )

    await provision(pool["spec"])

    def done(status: dict[str, Any]) -> None:
        status["observedGeneration"] = processed_generation
        status["phase"] = "Ready"

    calls.clear()
    with pytest.raises(StaleGeneration) as info:
        await update_status(client, GADGETS, pool, done, controller="test", metrics=metrics)

    assert isinstance(info.value, Conflict), "the controller requeues it as a conflict"
    assert (info.value.read_generation, info.value.live_generation) == (
        processed_generation,
        processed_generation + 1,
    )
    assert calls.log == [("update", "status", 409), ("get", None, 200)]
    assert expensive_runs == 1
    assert _conflicts(metrics, "retried") == 1
    assert _conflicts(metrics, "superseded") == 1
    assert _conflicts(metrics, "resolved") == 0
    # who: the other writer's field manager, read from the live managedFields
    assert metrics.conflict_writers_total.labels("test", "other-writer").value == 1

    stored = await other.get(GADGETS, "g", kube_namespace)
    assert "status" not in stored, "nothing was written for the old spec"
    assert stored["spec"] == {"size": 2}  # the other writer's change survived
    assert needs_reconcile(stored)


async def test_conflict_at_the_same_generation_reapplies_only_the_status_change(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    """A metadata-only change by another writer (no new generation): re-read, re-apply."""
    await _gadget(other, kube_namespace, size=1)
    pool = await client.get(GADGETS, "g", kube_namespace)
    generation = pool["metadata"]["generation"]
    await other.patch(GADGETS, "g", {"metadata": {"labels": {"team": "a"}}}, kube_namespace)

    def done(status: dict[str, Any]) -> None:
        status["observedGeneration"] = generation
        status["phase"] = "Ready"

    calls.clear()
    result = await update_status(client, GADGETS, pool, done, controller="test", metrics=metrics)

    assert calls.log == [("update", "status", 409), ("get", None, 200), ("update", "status", 200)]
    assert result["status"] == {"observedGeneration": generation, "phase": "Ready"}
    assert result["metadata"]["labels"] == {"team": "a"}
    assert _conflicts(metrics, "retried") == 1
    assert _conflicts(metrics, "resolved") == 1
    assert metrics.conflict_writers_total.labels("test", "other-writer").value == 1
    stored = await other.get(GADGETS, "g", kube_namespace)
    assert stored["status"] == result["status"]


async def test_conflict_skips_the_write_when_latest_already_says_it(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    stale = await _gadget(other, kube_namespace)
    await other.patch(
        GADGETS,
        "g",
        {"status": {"phase": "Ready"}},
        kube_namespace,
        patch_type=PatchType.MERGE,
        subresource="status",
    )

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"

    result = await update_status(client, GADGETS, stale, ready, controller="test", metrics=metrics)
    assert calls.log == [("update", "status", 409), ("get", None, 200)]
    assert result["status"] == {"phase": "Ready"}
    assert _skipped(metrics) == 1
    assert _conflicts(metrics, "resolved") == 1


async def test_gives_up_when_the_backoff_runs_out(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    stale = await _gadget(other, kube_namespace)
    await other.patch(GADGETS, "g", {"spec": {"size": 3}}, kube_namespace)

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"

    with pytest.raises(Conflict):
        await update_status(
            client, GADGETS, stale, ready, controller="test", metrics=metrics, backoff=Backoff()
        )
    # one read after the last conflict, only to name the other writer
    assert calls.log == [("update", "status", 409), ("get", None, 200)]
    assert metrics.conflict_writers_total.labels("test", "other-writer").value == 1
    assert _conflicts(metrics, "gave_up") == 1
    assert _conflicts(metrics, "retried") == 0


async def test_invalid_status_is_raised_at_once(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    obj = await _gadget(other, kube_namespace)

    def bogus(status: dict[str, Any]) -> None:
        status["phase"] = "Exploded"  # not in the schema's enum

    with pytest.raises(Invalid) as info:
        await update_status(client, GADGETS, obj, bogus, controller="test", metrics=metrics)
    assert calls.log == [("update", "status", 422)]
    assert any(cause.field == "status.phase" for cause in info.value.causes)
    assert _conflicts(metrics, "retried") == 0


async def test_forbidden_is_raised_at_once(
    kube_control_plane: ControlPlane, other: Client, kube_namespace: str, gadget_crd: None
) -> None:
    obj = await _gadget(other, kube_namespace)
    nobody_calls = Calls()

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"

    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig_for("nobody"), observer=nobody_calls
    ) as nobody:
        with pytest.raises(Forbidden):
            await update_status(nobody, GADGETS, obj, ready)
    assert nobody_calls.log == [("update", "status", 403)]


async def test_recreated_object_is_not_given_the_old_status(
    client: Client, other: Client, kube_namespace: str, calls: Calls
) -> None:
    old = await _gadget(other, kube_namespace)
    await other.delete(GADGETS, "g", kube_namespace)
    await _gadget(other, kube_namespace)

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"

    with pytest.raises(NotFound):
        await update_status(client, GADGETS, old, ready)
    assert calls.log == [("update", "status", 409), ("get", None, 200)]
    fresh = await other.get(GADGETS, "g", kube_namespace)
    assert "status" not in fresh


async def test_set_status_condition_reports_a_terminal_error_once(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    obj = await _gadget(other, kube_namespace)
    generation = obj["metadata"]["generation"]

    first = await set_status_condition(
        client,
        GADGETS,
        obj,
        "Ready",
        "False",
        "Forbidden",
        "cannot create nodes",
        observed_generation=generation,
        controller="test",
        metrics=metrics,
    )
    cond = get_condition(first["status"]["conditions"], "Ready")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "False",
        "Forbidden",
        generation,
    )

    calls.clear()
    second = await set_status_condition(
        client,
        GADGETS,
        first,
        "Ready",
        "False",
        "Forbidden",
        "cannot create nodes",
        observed_generation=generation,
        controller="test",
        metrics=metrics,
    )
    assert calls.log == []
    assert second is first
    assert _skipped(metrics) == 1

    with pytest.raises(ValueError, match="reason"):
        await set_status_condition(client, GADGETS, first, "Ready", "False", "not a reason!")
    assert calls.log == []


async def test_retry_update_writes_main_resource_only_when_changed(
    client: Client, other: Client, kube_namespace: str, calls: Calls, metrics: RuntimeMetrics
) -> None:
    await _gadget(other, kube_namespace)

    def label(obj: Object) -> None:
        obj["metadata"].setdefault("labels", {})["team"] = "a"

    result = await retry_update(
        client, GADGETS, "g", kube_namespace, label, controller="test", metrics=metrics
    )
    assert result["metadata"]["labels"] == {"team": "a"}
    assert calls.log == [("get", None, 200), ("update", None, 200)]

    calls.clear()
    same = await retry_update(
        client, GADGETS, "g", kube_namespace, label, controller="test", metrics=metrics
    )
    assert calls.log == [("get", None, 200)]
    assert same["metadata"]["resourceVersion"] == result["metadata"]["resourceVersion"]
    assert _skipped(metrics, "") == 1
