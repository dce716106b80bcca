"""The Instance controller's decisions as pure functions: the repair of a VM one step at a
time, the status written from a typed record, what a cloud refusal means, what deletion
terminates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodepool_operator.api import InstanceSpec
from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudError,
    Instance,
    InvalidRequest,
    PermissionDenied,
    QuotaExceeded,
)
from nodepool_operator.controllers._launch import NodeClassUnavailable
from nodepool_operator.controllers.instance import decide

SPEC = InstanceSpec(image="ami-1", instance_type="m5.large")


def vm(state: str = "running", **fields: Any) -> Instance:
    given: dict[str, Any] = {
        "id": "i-1",
        "name": "ns/a",
        "instance_type": "m5.large",
        "image": "ami-1",
        "state": state,
        "private_ip": "10.0.0.1",
        "public_ip": "203.0.113.1",
        "tags": {},
        "created_at": 0.0,
        "launched_at": 0.0,
    }
    return Instance(**(given | fields))


@pytest.mark.parametrize(
    ("recorded", "found", "kind", "predecessor", "event"),
    [
        (None, None, "launch", None, None),
        ("i-1", None, "launch", "i-1", "DriftRepaired"),
        ("i-1", vm(), "done", None, None),
    ],
)
def test_first(
    recorded: str | None,
    found: Instance | None,
    kind: str,
    predecessor: str | None,
    event: str | None,
) -> None:
    step = decide.first(recorded, found)
    assert (step.kind, step.predecessor) == (kind, predecessor)
    assert (step.event.reason if step.event else None) == event


@pytest.mark.parametrize(
    ("the_vm", "kind", "event", "action"),
    [
        (vm(), "done", None, None),
        (vm("pending"), "done", None, None),
        (vm("terminated"), "launch", "DriftRepaired", "Replace"),
        (vm(instance_type="t3.small"), "replace", "Replacing", "Replace"),
        (vm(image="ami-0"), "replace", "Replacing", "Replace"),
        (vm("stopped"), "start", "DriftRepaired", "Start"),
        # another type and stopped: replaced, not started first
        (vm("stopped", instance_type="t3.small"), "replace", "Replacing", "Replace"),
    ],
)
def test_repair(the_vm: Instance, kind: str, event: str | None, action: str | None) -> None:
    step = decide.repair(the_vm, SPEC)
    assert step.kind == kind
    got = (step.event.reason, step.event.action) if step.event else (None, None)
    assert got == (event, action)
    if kind != "done":
        assert step.predecessor == "i-1"  # the token names the VM it replaces


def test_after_start_gone_means_a_replacement() -> None:
    assert decide.after_start("i-1", vm()).kind == "done"
    step = decide.after_start("i-1", None)
    assert (step.kind, step.predecessor) == ("launch", "i-1")


CHECKED = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC)


def test_report_of_a_running_vm() -> None:
    status: dict[str, Any] = {"conditions": []}
    decide.report(vm(), 4, CHECKED).apply(status)
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "instanceId": "i-1",
        "state": "running",
        "publicIP": "203.0.113.1",
        "observedGeneration": 4,
        "lastCheckedAt": "2026-01-02T03:04:05Z",
    }
    [ready] = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Running")
    assert ready["observedGeneration"] == 4


def test_report_of_a_stopped_vm_drops_its_ip_and_keeps_other_fields() -> None:
    status: dict[str, Any] = {"publicIP": "203.0.113.1", "other": 1}
    decide.report(vm("stopped", public_ip=None), 2, CHECKED).apply(status)
    assert "publicIP" not in status
    assert status["other"] == 1
    assert status["state"] == "stopped"
    [ready] = status["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "Pending",
        "VM i-1 is stopped",
    )


def test_report_keeps_the_transition_time_while_ready_stays() -> None:
    status: dict[str, Any] = {}
    decide.report(vm(), 1, CHECKED).apply(status)
    first = status["conditions"][0]["lastTransitionTime"]
    decide.report(vm(), 2, CHECKED).apply(status)
    assert status["conditions"][0]["lastTransitionTime"] == first


@pytest.mark.parametrize(
    ("err", "reason", "retry"),
    [
        (InvalidRequest("bad type"), "InvalidSpec", None),
        (QuotaExceeded("quota", retry_after=30.0), "CloudQuotaExceeded", 30.0),
        (PermissionDenied("denied", retry_after=60.0), "CloudPermissionDenied", 60.0),
        (NodeClassUnavailable("missing", retry_after=5.0), "NodeClassUnavailable", 5.0),
        (CapacityUnavailable("none", retry_after=15.0), "CapacityUnavailable", 15.0),
    ],
)
def test_refusal(err: CloudError, reason: str, retry: float | None) -> None:
    refusal = decide.refusal(err)
    assert (refusal.reason, refusal.retry_after) == (reason, retry)
    assert refusal.message == str(err)


def test_deletion_terminates_every_tagged_vm_and_the_recorded_one() -> None:
    assert decide.to_terminate(frozenset({"i-2", "i-1"}), "i-3") == ("i-1", "i-2", "i-3")
    assert decide.to_terminate(frozenset(), None) == ()
    assert decide.strays(frozenset({"i-1", "i-2"}), keep="i-2") == ("i-1",)


@pytest.mark.parametrize(
    ("state", "interval", "want"),
    [("pending", 30.0, 1.0), ("pending", 0.5, 0.5), ("running", 30.0, 30.0)],
)
def test_requeue_after(state: str, interval: float, want: float) -> None:
    assert decide.requeue_after(vm(state), interval) == want
