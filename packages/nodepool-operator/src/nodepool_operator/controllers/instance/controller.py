"""The Instance controller's reconcile, as a recipe: observe → decide → act (see the package
docstring for what a pass does)."""

from __future__ import annotations

import logging

from kubeloop import (
    Controller,
    ControllerOptions,
    Manager,
    NotFound,
    Object,
    Request,
    Result,
    generation_changed,
)
from nodepool_operator.api import INSTANCES
from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudProvider,
    InvalidRequest,
    PermissionDenied,
    QuotaExceeded,
    TransientCloudError,
)
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers.instance import decide, observe
from nodepool_operator.controllers.instance.act import FINALIZER, NAME_TAG, Act, now
from nodepool_operator.controllers.instance.decide import PENDING_RECHECK_SECONDS, READY
from nodepool_operator.controllers.instance.observe import UID_TAG
from nodepool_operator.settings import OperatorSettings

__all__ = [
    "FINALIZER",
    "NAME",
    "NAME_TAG",
    "PENDING_RECHECK_SECONDS",
    "READY",
    "UID_TAG",
    "InstanceController",
]

log = logging.getLogger("nodepool_operator.instance")

NAME = "instance"
#: Refusals a retry soon cannot fix: reported in Ready, looked at again when they may be.
_REFUSALS = (
    InvalidRequest,
    QuotaExceeded,
    CapacityUnavailable,
    PermissionDenied,
    launching.NodeClassUnavailable,
)


class InstanceController:
    """Reconciles Instances against their VMs; wired by :func:`nodepool_operator.operator`."""

    def __init__(self, mgr: Manager, cloud: CloudProvider, settings: OperatorSettings) -> None:
        self.mgr = mgr
        self.cloud = cloud
        self.settings = settings
        self.act = Act(mgr, cloud)

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
        inst = observe.decode(obj)
        if inst.metadata.deletion_timestamp is not None:
            await self.act.finalize(obj, inst)
            return Result()
        obj = await self.act.ensure_finalizer(obj, inst)
        # Captured before the cloud work: the status claims this generation, never a later
        # one that arrived meanwhile (see kubeloop.update_status).
        generation = inst.metadata.generation
        try:
            seen = await observe.observe(self.cloud, inst)
            outcome = await self.act.converge(obj, seen)
        except _REFUSALS as err:
            refusal = decide.refusal(err)
            await self.act.refused(obj, generation, refusal)
            return Result(requeue_after=refusal.retry_after)
        try:
            await self.act.write_status(obj, decide.report(outcome.vm, generation, now()))
        except NotFound:
            return Result()  # gone meanwhile (only possible without our finalizer)
        if outcome.launched:
            await self.act.sweep(inst, keep=outcome.vm.id)
        return Result(
            requeue_after=decide.requeue_after(outcome.vm, self.settings.drift_interval_seconds)
        )
