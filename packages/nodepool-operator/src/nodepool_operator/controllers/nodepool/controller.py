"""The NodePool controller's reconcile, as a recipe: observe → decide → act (see the package
docstring for what a pass does, and each module for its half)."""

from __future__ import annotations

import contextlib
from typing import Final

from kubeloop import (
    NODES,
    Controller,
    ControllerOptions,
    Manager,
    Object,
    Request,
    Result,
    add_finalizer,
    generation_changed,
    has_finalizer,
)
from nodepool_operator.api import NODEPOOLS, InvalidField, parse_nodepool
from nodepool_operator.cloud import CloudProvider
from nodepool_operator.controllers import _indexes as indexes
from nodepool_operator.controllers._indexes import pool_of_node
from nodepool_operator.controllers._scope import equality_labels, node_selector
from nodepool_operator.controllers.nodepool import act, decide, observe
from nodepool_operator.settings import OperatorSettings

NAME: Final = "nodepool"
FINALIZER: Final = act.FINALIZER
NODE_FINALIZER: Final = act.NODE_FINALIZER


class NodePoolController:
    """Converges each NodePool's VMs and Nodes; see :mod:`nodepool_operator.controllers.
    nodepool`."""

    def __init__(self, mgr: Manager, cloud: CloudProvider, settings: OperatorSettings) -> None:
        self.mgr = mgr
        self.cloud = cloud
        self.settings = settings
        run_labels = equality_labels(settings.label_selector)
        self._node_selector = node_selector(run_labels)
        self.act = act.Act(mgr, cloud, settings, run_labels)

    def register(self) -> Controller:
        # Scale-down needs "which pods are on this node"; Nodes are read per pool.
        indexes.register(self.mgr.cache, self._node_selector)
        return (
            self.mgr.controller(NAME)
            .for_(
                NODEPOOLS,
                predicates=[generation_changed],
                label_selector=self.settings.label_selector,
            )
            .watches(NODES, pool_of_node, label_selector=self._node_selector)
            .with_options(
                ControllerOptions(max_concurrent_reconciles=self.settings.nodepool_workers)
            )
            .complete(self.reconcile)
        )

    async def reconcile(self, req: Request) -> Result:
        obj = await self.mgr.cache.get(
            NODEPOOLS, req.name, label_selector=self.settings.label_selector
        )
        if obj is None:
            return Result()
        if obj["metadata"].get("deletionTimestamp"):
            return await self._finalize(obj)
        if not has_finalizer(obj, FINALIZER):
            obj = await add_finalizer(self.mgr.client, NODEPOOLS, obj, FINALIZER)
        try:
            pool = parse_nodepool(obj)
        except InvalidField as err:
            await self.act.invalid(obj, err)
            return Result()  # nothing to do until the spec changes

        seen = await observe.observe(self.mgr, self.cloud, pool, self._node_selector)
        if seen.refused is not None:
            await self.act.refused(obj, seen, seen.refused)
            raise seen.refused
        holding = self.act.gate.holding(pool.metadata.uid, pool.metadata.generation)
        decision = decide.decide(seen, observe.now(), self.settings, holding)
        p = act.begin(obj, seen, decision)
        await self.act.record(p, decision)
        try:
            await self.act.converge(p, decision)
        except Exception:
            # Keep what the cloud already did (new ids) before the workqueue backs off.
            with contextlib.suppress(Exception):
                await self.act.write_status(p)
            raise
        await self.act.write_status(p)
        return self.act.requeue(p)

    async def _finalize(self, obj: Object) -> Result:
        """Drain the pool's Nodes, then delete each Node and its VM, then every VM tagged
        with the pool's uid, then the finalizer (:func:`.decide.plan_deletion`)."""
        if not has_finalizer(obj, FINALIZER):
            return Result()
        deleted = await observe.observe_deleted(self.mgr.client, self.cloud, obj)
        plan = decide.plan_deletion(deleted, observe.now())
        return await self.act.delete_pool(obj, deleted, plan)
