"""What a pass over an Instance does, decided from what it read: pure functions (``now``
comes in), tested as tables (tests/unit/nodepool_operator/controllers/instance/).

The repair is a short loop (:mod:`.act` runs it): each round :func:`repair` says what the VM
as last seen needs (launch a replacement, replace it for another type or image, start it, or
nothing), the act does it and describes the VM again. :func:`report` is the status written
from a typed :class:`~nodepool_operator.api.InstanceStatus`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from kubeloop import set_condition
from nodepool_operator.api import InstanceSpec, InstanceStatus, to_api
from nodepool_operator.cloud import (
    CloudError,
    InvalidRequest,
    PermissionDenied,
    QuotaExceeded,
)
from nodepool_operator.cloud import Instance as VM
from nodepool_operator.controllers import _launch as launching

READY = "Ready"
#: How soon to look again while a VM boots: its IP and ``running`` should show up promptly,
#: without waiting a whole drift interval.
PENDING_RECHECK_SECONDS = 1.0
#: Repairs per reconcile. Each repair leaves the VM pending or running unless someone works
#: against us at the same moment; then the next reconcile (with backoff) carries on.
MAX_REPAIRS = 3

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True, slots=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    note: str
    action: str


def lost(instance_id: str, what: str) -> Event:
    note = f"VM {instance_id} {what} outside the operator; launching a replacement"
    return Event("Warning", "DriftRepaired", note, "Replace")


@dataclass(frozen=True, slots=True)
class Step:
    """One repair round's move."""

    kind: Literal["launch", "replace", "start", "done"]
    predecessor: str | None = None
    """The VM a launch replaces (its id is part of the create's token)."""
    event: Event | None = None


def first(recorded: str | None, found: VM | None) -> Step:
    """Before the repair loop: launch when no VM is recorded, or the recorded one is unknown
    to the cloud; else repair the one found."""
    if recorded is None:
        return Step("launch")
    if found is None:
        return Step("launch", recorded, lost(recorded, "is unknown to the cloud"))
    return Step("done")


def repair(vm: VM, spec: InstanceSpec) -> Step:
    """What ``vm`` needs to be pending or running as ``spec`` says. Another type or image is
    replaced break before make (terminate, then launch): a VM cannot change type in place,
    and at most one live VM per Instance holds at every moment."""
    if vm.state == "terminated":
        # Also a repeated token answering with a VM terminated meanwhile.
        return Step("launch", vm.id, lost(vm.id, "was terminated"))
    if (vm.instance_type, vm.image) != (spec.instance_type, spec.image):
        note = (
            f"VM {vm.id} is {vm.instance_type}/{vm.image}; the spec wants "
            f"{spec.instance_type}/{spec.image}: terminating it and launching another"
        )
        return Step("replace", vm.id, Event("Normal", "Replacing", note, "Replace"))
    if vm.state == "stopped":
        note = f"VM {vm.id} was stopped outside the operator; starting it"
        return Step("start", vm.id, Event("Warning", "DriftRepaired", note, "Start"))
    return Step("done")


def after_start(instance_id: str, found: VM | None) -> Step:
    """A started VM described again: gone meanwhile means a replacement."""
    if found is None:
        return Step("launch", instance_id, lost(instance_id, "is unknown to the cloud"))
    return Step("done")


@dataclass(frozen=True, slots=True)
class Report:
    """The status one pass writes: the typed fields, and the Ready condition."""

    status: InstanceStatus
    ready: tuple[ConditionStatus, str, str]

    def apply(self, status: dict[str, Any]) -> None:
        """The ``update_status`` mutation: the fields from one :func:`to_api`, the condition
        set so its lastTransitionTime moves only when it flips."""
        written = to_api(replace(self.status, conditions=[]))
        written.pop("conditions", None)
        if "publicIP" not in written:
            status.pop("publicIP", None)  # like EC2, a stopped VM has given its IP up
        status.update(written)
        generation = self.status.observed_generation
        set_condition(conditions_of(status), READY, *self.ready, observed_generation=generation)


def conditions_of(status: dict[str, Any]) -> list[Any]:
    """``status.conditions``, created empty when missing or malformed."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    return conditions


def report(vm: VM, generation: int, checked: datetime) -> Report:
    """The status after a check of ``vm`` at ``checked`` (changes on every check: why the
    controller needs ``generation_changed``)."""
    if vm.state == "running":
        ready: tuple[ConditionStatus, str, str] = (
            "True",
            "Running",
            f"VM {vm.id} is running as specified",
        )
    else:
        ready = ("False", "Pending", f"VM {vm.id} is {vm.state}")
    status = InstanceStatus(
        instance_id=vm.id,
        state=vm.state,
        public_ip=vm.public_ip or None,
        observed_generation=generation,
        last_checked_at=checked.replace(microsecond=0),
    )
    return Report(status, ready)


def requeue_after(vm: VM, drift_interval: float) -> float:
    """Look again soon while the VM boots; else after one drift interval."""
    if vm.state == "pending":
        return min(PENDING_RECHECK_SECONDS, drift_interval)
    return drift_interval


@dataclass(frozen=True, slots=True)
class Refusal:
    """A cloud refusal retrying soon cannot fix: Ready=False, and when to look again."""

    reason: str
    message: str
    retry_after: float | None
    """None: only a spec change helps (and it triggers a reconcile anyway)."""


def refusal(err: CloudError) -> Refusal:
    if isinstance(err, InvalidRequest):
        reason, retry = "InvalidSpec", None
    elif isinstance(err, QuotaExceeded):
        reason, retry = "CloudQuotaExceeded", err.retry_after
    elif isinstance(err, PermissionDenied):
        reason, retry = "CloudPermissionDenied", err.retry_after
    elif isinstance(err, launching.NodeClassUnavailable):
        reason, retry = "NodeClassUnavailable", err.retry_after
    else:
        reason, retry = "CapacityUnavailable", err.retry_after
    return Refusal(reason, str(err), retry)


def to_terminate(owned: frozenset[str], recorded: str | None) -> tuple[str, ...]:
    """On deletion: every VM tagged for the Instance, and the recorded one regardless (the
    list may lag behind a fresh create)."""
    return tuple(sorted(owned | {recorded} if recorded else owned))


def strays(owned: frozenset[str], keep: str) -> tuple[str, ...]:
    """After a launch, once the status names the new VM: the other live VMs tagged for the
    Instance (a crash after a create and a spec change before the restart)."""
    return tuple(sorted(owned - {keep}))
