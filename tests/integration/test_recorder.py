"""EventRecorder against the real kube-apiserver: one Event per distinct event,
repeats folded into ``series``, and failures that never reach the caller."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubeloop._client import Client
from kubeloop._recorder import EventRecorder
from kubeloop._resource import CONFIGMAPS, EVENTS, NAMESPACES, Object
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually

pytestmark = pytest.mark.integration

CONTROLLER = "status.kubeloop.dev/recorder-test"
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.fixture
async def client(kube_control_plane: ControlPlane) -> AsyncIterator[Client]:
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig) as c:
        yield c


@pytest.fixture
async def recorder(client: Client) -> AsyncIterator[EventRecorder]:
    # A short interval so a repeat is flushed soon after the create.
    rec = EventRecorder(
        client, reporting_controller=CONTROLLER, reporting_instance="test-0", series_interval=0.05
    )
    rec.start()
    yield rec
    await rec.close()


async def _configmap(client: Client, namespace: str, name: str = "cm") -> Object:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}
    return await client.create(CONFIGMAPS, body, namespace)


async def _events_about(client: Client, namespace: str, obj: Object) -> list[Object]:
    uid = obj["metadata"]["uid"]
    items, _ = await client.list_all(EVENTS, namespace)
    return [e for e in items if e.get("regarding", {}).get("uid") == uid]


async def _until(check: Callable[[], bool]) -> None:
    """Wait (at most ~10 s) for the recorder's background task to get somewhere."""
    await eventually(check, "the recorder to get there", timeout=10.0, interval=0.01)


async def test_ten_identical_warnings_make_one_event_with_a_series(
    client: Client, recorder: EventRecorder, kube_namespace: str
) -> None:
    cm = await _configmap(client, kube_namespace)
    recorder.warning(cm, "ProvisioningFailed", "quota exceeded", action="Provision")
    await _until(lambda: recorder.created == 1)
    for _ in range(9):
        recorder.warning(cm, "ProvisioningFailed", "quota exceeded", action="Provision")
    await _until(lambda: recorder.series_updates == 1)

    events = await _events_about(client, kube_namespace, cm)
    assert len(events) == 1
    event = events[0]
    assert event["series"]["count"] == 10
    assert MICRO_TIME.fullmatch(event["series"]["lastObservedTime"])
    assert recorder.created == 1
    assert recorder.series_updates == 1  # nine repeats, one PATCH

    assert event["type"] == "Warning"
    assert event["reason"] == "ProvisioningFailed"
    assert event["action"] == "Provision"
    assert event["note"] == "quota exceeded"
    assert event["reportingController"] == CONTROLLER
    assert event["reportingInstance"] == "test-0"
    assert MICRO_TIME.fullmatch(event["eventTime"])
    assert re.fullmatch(r"cm\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == kube_namespace
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "cm",
        "namespace": kube_namespace,
        "uid": cm["metadata"]["uid"],
        "resourceVersion": cm["metadata"]["resourceVersion"],
    }


async def test_repeats_before_the_create_ride_on_it(client: Client, kube_namespace: str) -> None:
    cm = await _configmap(client, kube_namespace)
    rec = EventRecorder(client, reporting_controller=CONTROLLER)
    for _ in range(10):
        rec.warning(cm, "Broken", "it broke")
    await rec.close()  # never started: close drains

    events = await _events_about(client, kube_namespace, cm)
    assert len(events) == 1
    assert events[0]["series"]["count"] == 10
    assert events[0]["action"] == "Broken"  # the API requires one; the reason stands in
    assert (rec.created, rec.series_updates, rec.dropped, rec.failed) == (1, 0, 0, 0)


async def test_close_flushes_unwritten_repeats(client: Client, kube_namespace: str) -> None:
    cm = await _configmap(client, kube_namespace)
    # An interval far beyond the test: only close() can write the repeats.
    rec = EventRecorder(client, reporting_controller=CONTROLLER, series_interval=3600.0)
    rec.start()
    rec.normal(cm, "Scaled", "scaled to 3")
    await _until(lambda: rec.created == 1)
    rec.normal(cm, "Scaled", "scaled to 3")
    rec.normal(cm, "Scaled", "scaled to 3")
    assert rec.series_updates == 0
    await rec.close()

    assert rec.series_updates == 1
    events = await _events_about(client, kube_namespace, cm)
    assert [e["series"]["count"] for e in events] == [3]

    rec.normal(cm, "Scaled", "scaled to 3")  # after close: dropped, not raised
    assert rec.dropped == 1


async def test_distinct_events_are_not_merged(
    client: Client, recorder: EventRecorder, kube_namespace: str
) -> None:
    cm = await _configmap(client, kube_namespace)
    recorder.warning(cm, "QuotaExceeded", "no quota")
    recorder.warning(cm, "Forbidden", "no rights")
    recorder.normal(cm, "Forbidden", "no rights")  # same reason, other type
    await _until(lambda: recorder.created == 3)

    events = await _events_about(client, kube_namespace, cm)
    got = sorted((e["type"], e["reason"], e["note"]) for e in events)
    assert got == [
        ("Normal", "Forbidden", "no rights"),
        ("Warning", "Forbidden", "no rights"),
        ("Warning", "QuotaExceeded", "no quota"),
    ]
    assert all("series" not in e or e["series"] is None for e in events)
    assert len({e["metadata"]["name"] for e in events}) == 3


async def test_the_note_is_not_part_of_the_aggregation_key(
    client: Client, kube_namespace: str
) -> None:
    """A retried failure whose message changes every time (here: the attempt number)
    is one Event with a series, as client-go aggregates, not one Event per attempt."""
    cm = await _configmap(client, kube_namespace)
    rec = EventRecorder(client, reporting_controller="kubeloop.dev/test", series_interval=3600)
    rec.start()
    for attempt in range(5):
        rec.warning(cm, "SyncFailed", f"attempt {attempt}: 503 from the cloud")
    await rec.close()

    events = await _events_about(client, kube_namespace, cm)
    assert [(e["reason"], e["note"], e["series"]["count"]) for e in events] == [
        ("SyncFailed", "attempt 0: 503 from the cloud", 5)
    ]
    assert rec.created == 1


async def test_cluster_scoped_object_gets_its_event_in_default(
    client: Client, recorder: EventRecorder, kube_namespace: str
) -> None:
    namespace_obj = await client.get(NAMESPACES, kube_namespace)
    namespace_obj.setdefault("apiVersion", "v1")
    namespace_obj.setdefault("kind", "Namespace")
    related: dict[str, Any] = await _configmap(client, kube_namespace, "related")
    recorder.event(namespace_obj, "Normal", "Inspected", "looked at it", related=related)
    await _until(lambda: recorder.created == 1)

    events = await _events_about(client, "default", namespace_obj)
    assert len(events) == 1
    assert events[0]["metadata"]["namespace"] == "default"
    assert "namespace" not in events[0]["regarding"]
    assert events[0]["regarding"]["kind"] == "Namespace"
    assert events[0]["related"]["uid"] == related["metadata"]["uid"]


async def test_api_errors_are_logged_never_raised(
    kube_control_plane: ControlPlane, client: Client, kube_namespace: str
) -> None:
    cm = await _configmap(client, kube_namespace)
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig_for("nobody")) as nobody:
        rec = EventRecorder(nobody, reporting_controller=CONTROLLER)
        rec.start()
        rec.warning(cm, "Broken", "it broke")
        await _until(lambda: rec.failed == 1)
        await rec.close()
    assert (rec.created, rec.failed) == (0, 1)
    assert await _events_about(client, kube_namespace, cm) == []


async def test_bad_input_is_dropped_or_trimmed(
    client: Client, recorder: EventRecorder, kube_namespace: str
) -> None:
    cm = await _configmap(client, kube_namespace)
    recorder.event(cm, "Fatal", "Nope", "not a valid type")  # type: ignore[arg-type]
    assert recorder.dropped == 1
    recorder.warning(cm, "Long", "é" * 2000)  # 4000 bytes; the API allows 1024
    await _until(lambda: recorder.created == 1)
    events = await _events_about(client, kube_namespace, cm)
    assert [len(e["note"].encode()) for e in events] == [1024]
    assert recorder.failed == 0


def test_reporting_controller_must_be_a_qualified_name() -> None:
    with pytest.raises(ValueError, match="reporting_controller"):
        EventRecorder(None, reporting_controller="not a name!")  # type: ignore[arg-type]
