"""The NodePool controller's reconcile, as a recipe: observe → decide → act (see the package
docstring for what a pass does, and each module for its half)."""

from __future__ import annotations

import contextlib
from dataclasses import replace
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
from nodepool_operator.api import AWSNODECLASSES, NODEPOOLS, InvalidField, NodePool, parse_nodepool
from nodepool_operator.cloud import CloudProvider
from nodepool_operator.controllers import _indexes as indexes
from nodepool_operator.controllers._indexes import pool_of_node
from nodepool_operator.controllers._scope import equality_labels, node_selector
from nodepool_operator.controllers.nodepool import _deletion, act, decide, observe
from nodepool_operator.controllers.nodepool._create_gate import class_version
from nodepool_operator.controllers.nodepool._images import ImageResolver
from nodepool_operator.controllers.nodepool._indexes import NODE_CLASS_INDEX, node_class_of_pool
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
        self.images = ImageResolver(cloud, settings.image_resolve_seconds)

    def register(self) -> Controller:
        # Scale-down needs "which pods are on this node"; Nodes are read per pool.
        indexes.register(self.mgr.cache, self._node_selector)
        # A refused create holds until the pool or its node class changes: a class's new
        # spec (a fixed AMI, subnet, profile) gives the pools naming it a fresh pass.
        self._pools = self.mgr.cache.informer(
            NODEPOOLS, label_selector=self.settings.label_selector
        )
        self._pools.add_index(NODE_CLASS_INDEX, node_class_of_pool)
        return (
            self.mgr.controller(NAME)
            .for_(
                NODEPOOLS,
                predicates=[generation_changed],
                label_selector=self.settings.label_selector,
            )
            .watches(NODES, pool_of_node, label_selector=self._node_selector)
            .watches(AWSNODECLASSES, self._pools_of_class, predicates=[generation_changed])
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
        node_class = await self._class_version(pool)
        launch = await observe.launch_now(self.mgr, self.images, pool, seen, node_class)
        seen = replace(seen, launch=launch)
        holding = self.act.gate.holding(
            pool.metadata.uid, pool.metadata.generation, node_class=node_class
        )
        decision = decide.decide(seen, observe.now(), self.settings, holding)
        p = act.begin(obj, seen, decision, node_class=node_class)
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

    def _pools_of_class(self, node_class: Object) -> list[Request]:
        name = node_class["metadata"]["name"]
        return [Request(key) for key in self._pools.store.index_keys(NODE_CLASS_INDEX, name)]

    async def _class_version(self, pool: NodePool) -> str:
        """The version of the node class ``pool`` names, as the create gate keys holds."""
        ref = pool.spec.node_class_ref
        if ref is None:
            return ""
        return class_version(await self.mgr.cache.get(AWSNODECLASSES, ref.name))

    async def _finalize(self, obj: Object) -> Result:
        """Drain the pool's Nodes, then delete each Node and its VM, then every VM tagged
        with the pool's uid, then the finalizer (:func:`._deletion.plan_deletion`)."""
        if not has_finalizer(obj, FINALIZER):
            return Result()
        deleted = await observe.observe_deleted(self.mgr.client, self.cloud, obj)
        plan = _deletion.plan_deletion(deleted, observe.now())
        return await self.act.delete_pool(obj, deleted, plan)
