"""The Instance controller's reconcile, once, in process: an Instance from a fixed snapshot and
the real simulated cloud in a known state in; the writes and the cloud calls out, in order.

An Instance is one VM (as ACK's EC2 Instance): created with an idempotency token, checked for
drift on every pass (``status.lastCheckedAt``, the write that would loop without the
``generation_changed`` predicate), deleted with its finalizer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubeloop import Request
from nodepool_operator.cloud import CreateRequest, Instance, SimulatedCloud
from nodepool_operator.controllers.instance import FINALIZER, NAME_TAG, UID_TAG
from nodepool_operator.controllers.instance import controller as instance_controller
from nodepool_operator.controllers.instance._token import idempotency_token
from tests import factories
from tests.unit.nodepool_operator.controllers import in_process

UID = "uid-vm"
VM_REQUEST = Request("vm", "default")
#: The pass's clock, frozen: ``lastCheckedAt`` is this, to the second.
NOW = datetime(2026, 12, 5, 3, 0, 0, tzinfo=UTC)
CHECKED = "2026-12-05T03:00:00Z"


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    return SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0)


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instance_controller, "now", lambda: NOW)


def token(predecessor: str | None = None, instance_type: str = "m5.large") -> str:
    return idempotency_token(UID, predecessor, instance_type, "sim-image")


def instance(
    *,
    status: dict[str, Any] | None = None,
    finalizer: bool = True,
    deleting: bool = False,
    instance_type: str = "m5.large",
) -> dict[str, Any]:
    obj = factories.instance("vm", namespace="default", instance_type=instance_type)
    obj["metadata"].update(uid=UID, generation=2)
    if finalizer:
        obj["metadata"]["finalizers"] = [FINALIZER]
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-12-05T02:59:00Z"
    if status is not None:
        obj["status"] = status
    return obj


async def launch(
    cloud: SimulatedCloud, tok: str | None = None, instance_type: str = "m5.large"
) -> Instance:
    """The Instance's VM as the controller would have created it (by default its token for a
    first launch of this spec)."""
    return await cloud.create(
        CreateRequest(
            name="default/vm",
            instance_type=instance_type,
            image="sim-image",
            idempotency_token=tok or token(instance_type=instance_type),
            tags={UID_TAG: UID, NAME_TAG: "default/vm"},
        )
    )


def checked(vm: Instance, at: str = CHECKED) -> dict[str, Any]:
    """The status a pass that found ``vm`` running as specified at ``at`` writes."""
    return {
        "instanceId": vm.id,
        "publicIP": vm.public_ip,
        "state": "running",
        "lastCheckedAt": at,
        "observedGeneration": 2,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-12-05T02:00:00Z",
                "reason": "Running",
                "message": f"VM {vm.id} is running as specified",
            }
        ],
    }


async def run(objects: list[Any], cloud: SimulatedCloud, tmp_path: Path) -> in_process.Pass:
    config = in_process.settings(tmp_path)
    return await in_process.reconcile(objects, cloud, config, VM_REQUEST, controller="instance")


# -- creation, adoption -----------------------------------------------------------------------


async def test_a_new_instance_gets_its_finalizer_then_one_vm_by_its_token(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    done = await run([instance(finalizer=False)], cloud, tmp_path)

    (vm,) = cloud.snapshot().live
    assert done.timeline() == [
        "patch Instance default/vm",
        "cloud create default/vm",
        "update Instance/status default/vm",
    ]
    assert done.writes[0].body["metadata"]["finalizers"] == [FINALIZER]
    found = await cloud.find(token())
    assert found is not None
    assert found.id == vm.id
    assert vm.tags == {UID_TAG: UID, NAME_TAG: "default/vm"}
    (status,) = done.status_writes()
    assert status["instanceId"] == vm.id
    assert status["lastCheckedAt"] == CHECKED
    assert status["observedGeneration"] == 2


async def test_a_vm_created_before_a_crash_is_adopted_by_its_token_and_strays_swept(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    mine = await launch(cloud)  # created, then the status write was lost
    stray = await launch(cloud, tok=token(instance_type="m5.xlarge"), instance_type="m5.xlarge")

    done = await run([instance()], cloud, tmp_path)

    # the create repeats the token: the cloud answers with the same VM, no second one
    assert done.timeline() == [
        "cloud create default/vm",
        "update Instance/status default/vm",
        f"cloud delete {stray.id}",  # only once the status names the VM kept
    ]
    assert [vm.id for vm in cloud.snapshot().live] == [mine.id]
    assert done.status_writes()[0]["instanceId"] == mine.id


# -- drift ------------------------------------------------------------------------------------


async def test_a_vm_stopped_behind_the_back_is_started(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vm = await launch(cloud)
    cloud.stop_behind_the_back(vm.id)

    done = await run([instance(status=checked(vm))], cloud, tmp_path)

    assert done.journal.mutating() == [f"start {vm.id}"]
    assert [vm.id for vm in cloud.snapshot().live] == [vm.id]
    assert done.events() == [
        ("DriftRepaired", f"VM {vm.id} was stopped outside the operator; starting it")
    ]
    # running again as the status already says: nothing to write
    assert done.kinds() == []


async def test_a_vm_terminated_behind_the_back_is_replaced_with_a_new_token(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    old = await launch(cloud)
    cloud.terminate_behind_the_back(old.id)

    done = await run([instance(status=checked(old))], cloud, tmp_path)

    (new,) = cloud.snapshot().live
    assert new.id != old.id
    replacement = await cloud.find(token(predecessor=old.id))
    assert replacement is not None
    assert replacement.id == new.id
    assert done.journal.mutating() == ["create default/vm"]
    assert done.status_writes()[0]["instanceId"] == new.id
    assert [r for r, _ in done.events()] == ["DriftRepaired"]


async def test_another_type_is_replaced_break_before_make(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    old = await launch(cloud)

    done = await run([instance(status=checked(old), instance_type="m5.xlarge")], cloud, tmp_path)

    assert done.journal.mutating() == [f"delete {old.id}", "create default/vm"]
    (new,) = cloud.snapshot().live
    assert new.instance_type == "m5.xlarge"
    assert done.status_writes()[0]["instanceId"] == new.id
    assert [r for r, _ in done.events()] == ["Replacing"]


# -- nothing changed, the loop trap -----------------------------------------------------------


async def test_a_check_that_changes_nothing_writes_nothing(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vm = await launch(cloud)

    done = await run([instance(status=checked(vm))], cloud, tmp_path)

    assert done.writes == []
    assert done.journal.mutating() == []
    assert done.requeue_after == in_process.settings(tmp_path).drift_interval_seconds


async def test_a_later_check_writes_lastcheckedat_alone(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vm = await launch(cloud)
    before = checked(vm, at="2026-12-05T02:58:00Z")

    done = await run([instance(status=before)], cloud, tmp_path)

    # a status write on every check: why the controller watches with generation_changed
    (status,) = done.status_writes()
    assert {k for k in status if status[k] != before.get(k)} == {"lastCheckedAt"}
    assert status["lastCheckedAt"] == CHECKED
    assert done.journal.mutating() == []


# -- deletion ---------------------------------------------------------------------------------


async def test_a_deleted_instance_terminates_every_vm_then_drops_its_finalizer(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vm = await launch(cloud)
    stray = await launch(cloud, tok=token(instance_type="m5.xlarge"), instance_type="m5.xlarge")

    done = await run([instance(status=checked(vm), deleting=True)], cloud, tmp_path)

    assert done.timeline() == [
        *sorted([f"cloud delete {vm.id}", f"cloud delete {stray.id}"]),
        "patch Instance default/vm",
    ]
    (patch,) = [w for w in done.writes if w.kind == "Instance"]
    assert patch.body["metadata"]["finalizers"] == []
    assert cloud.snapshot().live == ()
    assert [r for r, _ in done.events()] == ["Terminated"]


async def test_a_missing_node_class_is_named_in_ready_and_nothing_is_launched(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    obj = instance()
    obj["spec"]["nodeClassRef"] = {"name": "gone"}

    done = await run([obj], cloud, tmp_path)

    (status,) = done.status_writes()
    (ready,) = status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "NodeClassUnavailable")
    assert "AwsNodeClass 'gone' not found" in ready["message"]
    assert "instanceId" not in status
    assert cloud.snapshot().instances == ()
    assert [r for r, _ in done.events()] == ["NodeClassUnavailable"]
