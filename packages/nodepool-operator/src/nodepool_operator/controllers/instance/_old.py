"""The Instance controller: one cloud VM per Instance, kept as specified (the seeds' EC2Instance).

What a reconcile does, in order:

1. Deleted (``deletionTimestamp``)? Terminate the VM, then drop the finalizer
   ``kubeloop.dev/instance-cleanup``. Otherwise make sure the finalizer is there *before*
   any cloud call, so no VM can outlive its Instance.
2. Drift check: ``describe`` the VM named by ``status.instanceId`` and repair what differs:

   - none recorded yet: launch one;
   - terminated, or unknown to the cloud: launch a replacement (Warning ``DriftRepaired``);
   - instance type or image differs from the spec: terminate it, then launch a replacement
     (Normal ``Replacing``). Break before make: a VM cannot change type in place, and
     terminating first keeps "at most one live VM per Instance" true at every moment;
   - stopped: start it (Warning ``DriftRepaired``).
3. Write status (``instanceId``, ``publicIP``, ``state``, ``observedGeneration``, ``Ready``
   and ``lastCheckedAt``) and come back in ``drift_interval_seconds`` (about a second while
   the VM boots).

**The loop trap.** ``lastCheckedAt`` changes on every check, so every reconcile writes status,
and every status write comes back as a watch event. The ``generation_changed`` predicate drops
those events (status and metadata writes leave ``metadata.generation`` alone), so the drift
check runs once per ``drift_interval_seconds``, plus once per spec change or deletion (both
bump the generation), never once per own write.

**Idempotency tokens.** A create's token is a pure function of *what is intended*::

    <Instance uid>/<sha256(predecessor id, instance type, image)[:16]>

where the predecessor is the VM being replaced (empty for the first VM). Retrying the same
intent (after a crash between the create and the status write, a lost response, a conflict)
therefore sends the same token and gets the same VM; the status still names the predecessor
until the replacement is recorded, so the token is re-derived without storing anything. A
new intent (another lost VM, another spec) gets a new token: a token is never reused with
different arguments, so :class:`~nodepool_operator.cloud.IdempotencyMismatch` cannot happen.
That is also why the "replacement number" is the predecessor's id rather than a counter: the
Instance's status has no field for a counter, and a counter read back from a status that a
crash did not get to write would be wrong in exactly the case tokens exist for.

The one leak that leaves: a crash after a create *and* a spec change before the restart (a
new intent, a new VM; the first one was never recorded). Every VM is tagged with its
Instance's uid, so after each create, once the status names the new VM, the other live VMs
with that tag are terminated; on deletion all of them are.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from kubeloop import (
    Controller,
    ControllerOptions,
    Manager,
    NotFound,
    Object,
    PatchType,
    Request,
    Result,
    TerminalError,
    generation_changed,
    set_condition,
    update_status,
)
from nodepool_operator import failpoints
from nodepool_operator.api import INSTANCES, Instance, InvalidField, parse_instance
from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudError,
    CloudProvider,
    CreateRequest,
    InstanceNotFound,
    InvalidRequest,
    LaunchSettings,
    PermissionDenied,
    QuotaExceeded,
    TransientCloudError,
)
from nodepool_operator.cloud import Instance as VM
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.settings import OperatorSettings

log = logging.getLogger("nodepool_operator.instance")

NAME = "instance"
FINALIZER = "kubeloop.dev/instance-cleanup"
#: Cloud tags on every VM of an Instance: the uid finds them all (cleanup), the name is for people.
UID_TAG = "kubeloop.dev/instance-uid"
NAME_TAG = "kubeloop.dev/instance"
READY = "Ready"

#: How soon to look again while a VM boots: its IP and ``running`` should show up promptly,
#: without waiting a whole drift interval.
PENDING_RECHECK_SECONDS = 1.0
#: Repairs per reconcile. Each repair leaves the VM pending or running unless someone works
#: against us at the same moment; then the next reconcile (with backoff) carries on.
_MAX_REPAIRS = 3


class _StillDrifting(Exception):
    """The VM changed under us during every repair of this reconcile; retry with backoff."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    vm: VM
    launched: bool
    """Whether this reconcile created a VM (then older unrecorded ones are swept)."""


def idempotency_token(
    uid: str,
    predecessor: str | None,
    instance_type: str,
    image: str,
    launch: LaunchSettings | None = None,
    user_data: str = "",
) -> str:
    """The create token for one intent; see the module docstring. At most 53 characters
    (EC2 takes 64). Launch settings and user data from a node class are part of the intent."""
    intent = f"{predecessor or ''}\n{instance_type}\n{image}"
    if (launch is not None and launch != LaunchSettings()) or user_data:
        intent += f"\n{launch!r}\n{user_data}"
    return f"{uid}/{hashlib.sha256(intent.encode()).hexdigest()[:16]}"


def _now() -> str:
    # RFC 3339 at seconds precision, as metav1.Time serialises.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class InstanceController:
    """Reconciles Instances against their VMs; wired by :func:`nodepool_operator.operator`."""

    def __init__(self, mgr: Manager, cloud: CloudProvider, settings: OperatorSettings) -> None:
        self.mgr = mgr
        self.cloud = cloud
        self.settings = settings

    def register(self) -> Controller:
        return (
            self.mgr.controller(NAME)
            .for_(
                INSTANCES,
                # Without it, the lastCheckedAt write of every check triggers the next check.
                predicates=[generation_changed],
                label_selector=self.settings.label_selector,
            )
            .with_options(
                ControllerOptions(max_concurrent_reconciles=self.settings.instance_workers)
            )
            .complete(self.reconcile)
        )

    # -- reconcile --------------------------------------------------------------------------

    async def reconcile(self, req: Request) -> Result:
        # Read from the informer of for_()'s scope: no second, cluster-wide watch, and an
        # Instance whose labels left our selector is another operator's, not ours.
        obj = await self.mgr.cache.get(
            INSTANCES, req.name, req.namespace, label_selector=self.settings.label_selector
        )
        if obj is None:
            return Result()  # deleted (its VM went with the finalizer), or no longer ours
        try:
            return await self._reconcile(obj)
        except TransientCloudError as err:
            # Expected weather, not a bug: no traceback, the per-item backoff retries it. A
            # create that took effect anyway is found again by its token.
            log.warning("cloud call failed; retrying with backoff: %s", err)
            return Result(requeue=True)

    async def _reconcile(self, obj: Object) -> Result:
        try:
            inst = parse_instance(obj)
        except InvalidField as err:
            raise TerminalError(f"invalid Instance: {err}", reason="InvalidSpec") from err
        if obj["metadata"].get("deletionTimestamp"):
            await self._finalize(obj, inst)
            return Result()
        obj = await self._ensure_finalizer(obj)
        # Captured before the cloud work: the status claims this generation, never a later
        # one that arrived meanwhile (see kubeloop.update_status).
        generation = int(obj["metadata"].get("generation") or 0)
        try:
            outcome = await self._converge(obj, inst)
        except (
            InvalidRequest,
            QuotaExceeded,
            CapacityUnavailable,
            PermissionDenied,
            launching.NodeClassUnavailable,
        ) as err:
            return await self._report_cloud_error(obj, generation, err)
        try:
            await self._write_status(obj, generation, outcome.vm)
        except NotFound:
            return Result()  # gone meanwhile (only possible without our finalizer)
        if outcome.launched:
            await self._sweep(obj, keep=outcome.vm.id)
        if outcome.vm.state == "pending":
            return Result(
                requeue_after=min(PENDING_RECHECK_SECONDS, self.settings.drift_interval_seconds)
            )
        return Result(requeue_after=self.settings.drift_interval_seconds)

    async def _converge(self, obj: Object, inst: Instance) -> _Outcome:
        """Describe the VM and repair it until it is pending or running as specified."""
        spec = inst.spec
        recorded = inst.status.instance_id
        launched = False
        if recorded is None:
            vm = await self._launch(obj, inst, predecessor=None)
            launched = True
        else:
            found = await self._describe(recorded)
            if found is None:
                self._event_lost(obj, recorded, "is unknown to the cloud")
                vm = await self._launch(obj, inst, predecessor=recorded)
                launched = True
            else:
                vm = found
        for _ in range(_MAX_REPAIRS):
            if vm.state == "terminated":
                # Also a repeated token answering with a VM terminated meanwhile.
                self._event_lost(obj, vm.id, "was terminated")
                vm = await self._launch(obj, inst, predecessor=vm.id)
                launched = True
            elif (vm.instance_type, vm.image) != (spec.instance_type, spec.image):
                await self._check_instance_type(spec.instance_type)
                self.mgr.recorder.normal(
                    obj,
                    "Replacing",
                    f"VM {vm.id} is {vm.instance_type}/{vm.image}; the spec wants "
                    f"{spec.instance_type}/{spec.image}: terminating it and launching another",
                    action="Replace",
                )
                await self.cloud.delete(vm.id)
                vm = await self._launch(obj, inst, predecessor=vm.id)
                launched = True
            elif vm.state == "stopped":
                self.mgr.recorder.warning(
                    obj,
                    "DriftRepaired",
                    f"VM {vm.id} was stopped outside the operator; starting it",
                    action="Start",
                )
                # Terminated or gone since the describe: the next round replaces it.
                with contextlib.suppress(InstanceNotFound, InvalidRequest):
                    await self.cloud.start(vm.id)
                found = await self._describe(vm.id)
                if found is None:
                    self._event_lost(obj, vm.id, "is unknown to the cloud")
                    found = await self._launch(obj, inst, predecessor=vm.id)
                    launched = True
                vm = found
            else:
                return _Outcome(vm, launched)
        raise _StillDrifting(f"VM {vm.id} is still {vm.state} after {_MAX_REPAIRS} repairs")

    # -- cloud steps ------------------------------------------------------------------------

    async def _describe(self, instance_id: str) -> VM | None:
        try:
            return await self.cloud.describe(instance_id)
        except InstanceNotFound:
            return None

    async def _launch(self, obj: Object, inst: Instance, *, predecessor: str | None) -> VM:
        meta = obj["metadata"]
        # Unique per Instance, and unlike any NodePool VM's "<pool>-<index>".
        name = f"{meta['namespace']}/{meta['name']}"
        node_class = await launching.node_class(self.mgr.client, inst.spec.node_class_ref)
        launch = launching.launch_settings(node_class)
        user_data = (
            node_class.render_user_data(
                node_name=meta["name"], pool_name="", instance_type=inst.spec.instance_type
            )
            if node_class is not None
            else None
        ) or ""
        request = CreateRequest(
            name=name,
            instance_type=inst.spec.instance_type,
            image=inst.spec.image,
            idempotency_token=idempotency_token(
                meta["uid"],
                predecessor,
                inst.spec.instance_type,
                inst.spec.image,
                launch,
                user_data,
            ),
            # Part of the create, so no VM ever exists untagged; ours last, so a node class
            # cannot take the VM away from its Instance.
            tags={
                **(node_class.tags if node_class is not None else {}),
                UID_TAG: meta["uid"],
                NAME_TAG: name,
            },
            launch=launch,
            user_data=user_data,
        )
        vm = await self.cloud.create(request)
        # A crash here is the case the token exists for: the retry gets this same VM.
        failpoints.hit("instance-after-cloud-create")
        log.info(
            "launched VM",
            extra={"instance_id": vm.id, "predecessor": predecessor, "type": vm.instance_type},
        )
        return vm

    async def _check_instance_type(self, instance_type: str) -> None:
        # Checked before terminating the old VM for a replacement: with a type the cloud
        # cannot launch, the create would fail after the working VM was already gone.
        offered = {t.name for t in await self.cloud.instance_types()}
        if instance_type not in offered:
            raise InvalidRequest(f"unknown instance type {instance_type!r}")

    async def _sweep(self, obj: Object, *, keep: str) -> None:
        """Terminate this Instance's live VMs other than ``keep`` (see the module docstring).

        Best effort: the cloud's list may lag, and a failure here must not fail a reconcile
        whose VM is already recorded; deletion sweeps again.
        """
        try:
            for vm in await self.cloud.list({UID_TAG: obj["metadata"]["uid"]}):
                if vm.id != keep:
                    log.warning("terminating an unrecorded VM", extra={"instance_id": vm.id})
                    await self.cloud.delete(vm.id)
        except CloudError as err:
            log.warning("could not sweep unrecorded VMs: %s", err)

    def _event_lost(self, obj: Object, instance_id: str, what: str) -> None:
        self.mgr.recorder.warning(
            obj,
            "DriftRepaired",
            f"VM {instance_id} {what} outside the operator; launching a replacement",
            action="Replace",
        )

    # -- deletion ---------------------------------------------------------------------------

    async def _ensure_finalizer(self, obj: Object) -> Object:
        finalizers: list[str] = list(obj["metadata"].get("finalizers") or [])
        if FINALIZER in finalizers:
            return obj
        return await self._patch_finalizers(obj, [*finalizers, FINALIZER])

    async def _finalize(self, obj: Object, inst: Instance) -> None:
        finalizers: list[str] = list(obj["metadata"].get("finalizers") or [])
        if FINALIZER not in finalizers:
            return
        ids = {vm.id for vm in await self.cloud.list({UID_TAG: obj["metadata"]["uid"]})}
        if inst.status.instance_id:
            # The list may lag behind a fresh create; the recorded VM is deleted regardless.
            ids.add(inst.status.instance_id)
        for instance_id in sorted(ids):
            await self.cloud.delete(instance_id)  # idempotent: gone or terminated is fine
        if ids:
            self.mgr.recorder.normal(
                obj, "Terminated", f"terminated VM {', '.join(sorted(ids))}", action="Delete"
            )
        with contextlib.suppress(NotFound):
            await self._patch_finalizers(obj, [f for f in finalizers if f != FINALIZER])

    async def _patch_finalizers(self, obj: Object, finalizers: list[str]) -> Object:
        meta = obj["metadata"]
        # A merge patch replaces the whole list; the resourceVersion makes it fail with a
        # Conflict (retried with backoff) instead of dropping someone else's finalizer.
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        return await self.mgr.client.patch(
            INSTANCES, meta["name"], body, meta["namespace"], patch_type=PatchType.MERGE
        )

    # -- status -----------------------------------------------------------------------------

    async def _write_status(self, obj: Object, generation: int, vm: VM) -> None:
        checked = _now()
        if vm.state == "running":
            ready: tuple[Literal["True", "False"], str, str] = (
                "True",
                "Running",
                f"VM {vm.id} is running as specified",
            )
        else:
            ready = ("False", "Pending", f"VM {vm.id} is {vm.state}")

        def mutate(status: dict[str, Any]) -> None:
            status["instanceId"] = vm.id
            status["state"] = vm.state
            if vm.public_ip:
                status["publicIP"] = vm.public_ip
            else:
                status.pop("publicIP", None)  # like EC2, a stopped VM has given its IP up
            status["observedGeneration"] = generation
            # Changes on every check: why the controller needs generation_changed.
            status["lastCheckedAt"] = checked
            set_condition(_conditions(status), READY, *ready, observed_generation=generation)

        await update_status(self.mgr.client, INSTANCES, obj, mutate)

    async def _report_cloud_error(self, obj: Object, generation: int, err: CloudError) -> Result:
        """Ready=False for a failure retrying soon cannot fix; look again when it may have."""
        if isinstance(err, InvalidRequest):
            # The spec must change first, and a spec change triggers a reconcile anyway.
            reason, retry = "InvalidSpec", None
        elif isinstance(err, QuotaExceeded):
            reason, retry = "CloudQuotaExceeded", err.retry_after
        elif isinstance(err, PermissionDenied):
            reason, retry = "CloudPermissionDenied", err.retry_after
        elif isinstance(err, launching.NodeClassUnavailable):
            reason, retry = "NodeClassUnavailable", err.retry_after
        else:
            reason, retry = "CapacityUnavailable", err.retry_after
        self.mgr.recorder.warning(obj, reason, str(err), action="Launch")

        def mutate(status: dict[str, Any]) -> None:
            set_condition(
                _conditions(status),
                READY,
                "False",
                reason,
                str(err),
                observed_generation=generation,
            )

        with contextlib.suppress(NotFound):
            await update_status(self.mgr.client, INSTANCES, obj, mutate)
        return Result(requeue_after=retry)


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    return conditions
