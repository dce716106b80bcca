"""The cloud calls and writes of a pass over an Instance: the repair loop :mod:`.decide`
steers, the finalizer, the status, the sweep of stray VMs."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubeloop import Manager, NotFound, Object, PatchType, set_condition, update_status
from nodepool_operator import failpoints
from nodepool_operator.api import INSTANCES, Instance
from nodepool_operator.cloud import (
    CloudError,
    CloudProvider,
    CreateRequest,
    InstanceNotFound,
    InvalidRequest,
)
from nodepool_operator.cloud import Instance as VM
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers.instance import decide
from nodepool_operator.controllers.instance._token import idempotency_token
from nodepool_operator.controllers.instance.observe import UID_TAG, Observation, describe, owned

log = logging.getLogger("nodepool_operator.instance")

FINALIZER = "kubeloop.dev/instance-cleanup"
#: Cloud tag on every VM of an Instance naming it, for people.
NAME_TAG = "kubeloop.dev/instance"


class StillDrifting(Exception):
    """The VM changed under us during every repair of this reconcile; retry with backoff."""


@dataclass(frozen=True, slots=True)
class Outcome:
    vm: VM
    launched: bool
    """Whether this reconcile created a VM (then older unrecorded ones are swept)."""


class Act:
    def __init__(self, mgr: Manager, cloud: CloudProvider) -> None:
        self.mgr = mgr
        self.cloud = cloud

    def emit(self, obj: Object, event: decide.Event | None) -> None:
        if event is None:
            return
        post = self.mgr.recorder.warning if event.type == "Warning" else self.mgr.recorder.normal
        post(obj, event.reason, event.note, action=event.action)

    # -- the repair loop --------------------------------------------------------------------

    async def converge(self, obj: Object, seen: Observation) -> Outcome:
        """Carry out :func:`.decide.first`, then :func:`.decide.repair` until the VM is
        pending or running as specified."""
        inst = seen.instance
        step = decide.first(seen.recorded, seen.vm)
        self.emit(obj, step.event)
        if step.kind == "done" and seen.vm is not None:
            vm, launched = seen.vm, False
        else:  # nothing recorded, or unknown to the cloud
            vm, launched = await self._launch(inst, step.predecessor), True
        for _ in range(decide.MAX_REPAIRS):
            step = decide.repair(vm, inst.spec)
            if step.kind == "done":
                return Outcome(vm, launched)
            if step.kind == "replace":
                await self._check_instance_type(inst.spec.instance_type)
                self.emit(obj, step.event)
                await self.cloud.delete(vm.id)
            elif step.kind == "start":
                self.emit(obj, step.event)
                # Terminated or gone since the describe: the next round replaces it.
                with contextlib.suppress(InstanceNotFound, InvalidRequest):
                    await self.cloud.start(vm.id)
                found = await describe(self.cloud, vm.id)
                if found is not None:
                    vm = found
                    continue
                step = decide.after_start(vm.id, found)
                self.emit(obj, step.event)
            else:
                self.emit(obj, step.event)
            vm = await self._launch(inst, step.predecessor)
            launched = True
        raise StillDrifting(f"VM {vm.id} is still {vm.state} after {decide.MAX_REPAIRS} repairs")

    async def _launch(self, inst: Instance, predecessor: str | None) -> VM:
        meta = inst.metadata
        # Unique per Instance, and unlike any NodePool VM's "<pool>-<index>".
        name = f"{meta.namespace}/{meta.name}"
        node_class = await launching.node_class(self.mgr.client, inst.spec.node_class_ref)
        launch = await launching.resolved_launch(self.cloud, node_class)
        user_data = (
            node_class.render_user_data(
                node_name=meta.name, pool_name="", instance_type=inst.spec.instance_type
            )
            if node_class is not None
            else None
        ) or ""
        request = CreateRequest(
            name=name,
            instance_type=inst.spec.instance_type,
            image=inst.spec.image,
            idempotency_token=idempotency_token(
                meta.uid, predecessor, inst.spec.instance_type, inst.spec.image, launch, user_data
            ),
            # Part of the create, so no VM ever exists untagged; ours last, so a node class
            # cannot take the VM away from its Instance.
            tags=launching.launch_tags(node_class, {UID_TAG: meta.uid, NAME_TAG: name}),
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
            raise InvalidRequest(
                f"unknown instance type {instance_type!r}", reason="InvalidInstanceType"
            )

    async def sweep(self, inst: Instance, keep: str) -> None:
        """Terminate this Instance's live VMs other than ``keep``. Best effort: the cloud's
        list may lag, and a failure here must not fail a reconcile whose VM is already
        recorded; deletion sweeps again."""
        try:
            for instance_id in decide.strays(await owned(self.cloud, inst), keep):
                log.warning("terminating an unrecorded VM", extra={"instance_id": instance_id})
                await self.cloud.delete(instance_id)
        except CloudError as err:
            log.warning("could not sweep unrecorded VMs: %s", err)

    # -- finalizer and deletion -------------------------------------------------------------

    async def ensure_finalizer(self, obj: Object, inst: Instance) -> Object:
        finalizers = inst.metadata.finalizers
        if FINALIZER in finalizers:
            return obj
        return await self._patch_finalizers(inst, [*finalizers, FINALIZER])

    async def finalize(self, obj: Object, inst: Instance) -> None:
        """Terminate every VM of the Instance, then drop the finalizer."""
        if FINALIZER not in inst.metadata.finalizers:
            return
        ids = decide.to_terminate(await owned(self.cloud, inst), inst.status.instance_id)
        for instance_id in ids:
            await self.cloud.delete(instance_id)  # idempotent: gone or terminated is fine
        if ids:
            note = f"terminated VM {', '.join(ids)}"
            self.emit(obj, decide.Event("Normal", "Terminated", note, "Delete"))
        with contextlib.suppress(NotFound):
            await self._patch_finalizers(
                inst, [f for f in inst.metadata.finalizers if f != FINALIZER]
            )

    async def _patch_finalizers(self, inst: Instance, finalizers: list[str]) -> Object:
        meta = inst.metadata
        # A merge patch replaces the whole list; the resourceVersion makes it fail with a
        # Conflict (retried with backoff) instead of dropping someone else's finalizer.
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.resource_version}}
        return await self.mgr.client.patch(
            INSTANCES, meta.name, body, meta.namespace, patch_type=PatchType.MERGE
        )

    # -- status -----------------------------------------------------------------------------

    async def write_status(self, obj: Object, report: decide.Report) -> None:
        await update_status(self.mgr.client, INSTANCES, obj, report.apply)

    async def refused(self, obj: Object, generation: int, refusal: decide.Refusal) -> None:
        """Ready=False for a failure retrying soon cannot fix."""
        self.emit(obj, decide.Event("Warning", refusal.reason, refusal.message, "Launch"))

        def mutate(status: dict[str, Any]) -> None:
            set_condition(
                decide.conditions_of(status),
                decide.READY,
                "False",
                refusal.reason,
                refusal.message,
                observed_generation=generation,
            )

        with contextlib.suppress(NotFound):
            await update_status(self.mgr.client, INSTANCES, obj, mutate)


def now() -> datetime:
    return datetime.now(UTC)
