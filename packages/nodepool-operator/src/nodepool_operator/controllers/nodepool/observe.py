"""Every read one pass over a pool makes, before it decides anything: the cache (Nodes, the
pods bound to them), the cloud (the pool's VMs) and, when a kube-system pod may block a
scale-down, kube-system's PodDisruptionBudgets. Each returns one frozen observation that
:mod:`.decide` reads.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from kubeloop import NODES, PODS, Client, Manager, Object
from nodepool_operator.api import (
    Disruption,
    InvalidField,
    NodePool,
    parse_nodepool,
)
from nodepool_operator.cloud import CloudError, CloudProvider, Instance, InstanceNotFound
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers._blocked import PDBS, kube_system_budgets, switches
from nodepool_operator.controllers._capacity import scale_down_node
from nodepool_operator.controllers._indexes import NODE_POOL, POD_NODE
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers._unneeded import parse_time
from nodepool_operator.controllers.nodepool import _surplus
from nodepool_operator.controllers.nodepool._drift import Launch
from nodepool_operator.controllers.nodepool._images import ImageResolver
from nodepool_operator.controllers.nodepool._intent import DELETING, POOL_UID_TAG, idempotency_token
from nodepool_operator.controllers.nodepool._launch_record import class_hash
from nodepool_operator.controllers.nodepool._type_choice import candidates
from nodepool_operator.controllers.nodepool.records import NodePods, PoolNode, decode_node
from nodepool_operator.scheduling import PdbView, is_workload, needs_budgets, pdb_view

_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Observation:
    """What one pass over a live pool read, once."""

    pool: NodePool
    nodes: Mapping[str, PoolNode]
    """The pool's Nodes by name."""
    listed: tuple[Instance, ...] = ()
    """The pool's VMs as the cloud listed them (possibly lagging)."""
    vms: Mapping[str, Instance] = field(default_factory=dict)
    """The pool's live VMs by id: the list, and each recorded id it missed, described."""
    pods: Mapping[str, NodePods] = field(default_factory=dict)
    """The pods of each Node a scale-down may judge (only read when one is looked at)."""
    budgets: tuple[PdbView, ...] = ()
    """The PodDisruptionBudgets a scale-down reads: every namespace's when it has a Node to
    choose and a judged Node runs a workload pod (a Node whose pods can be evicted now goes
    first), else kube-system's when a pod there may block it."""
    refused: CloudError | None = None
    """The cloud refused the list (or a describe): nothing else was read."""
    launch: Launch | None = None
    """What a node of the pool would be launched with now (drift, :mod:`._drift`); None:
    not known (its node class unreadable), so no node is taken as drifted."""

    def by_instance(self) -> dict[str, PoolNode]:
        return {n.instance_id: n for n in self.nodes.values() if n.instance_id}


async def pool_nodes(mgr: Manager, pool: NodePool, node_selector: str) -> dict[str, PoolNode]:
    """The pool's Nodes from the cache (its pool-label index), decoded."""
    objs = await mgr.cache.list(
        NODES, index=(NODE_POOL, pool.metadata.name), label_selector=node_selector
    )
    conditions = pool.spec.disruption.repair.unhealthy_conditions
    return {n.name: n for n in (decode_node(o, conditions) for o in objs)}


async def pool_vms(
    cloud: CloudProvider, pool: NodePool
) -> tuple[tuple[Instance, ...], dict[str, Instance]]:
    """The pool's VMs: one list by the pool's uid tag, and a describe of each recorded id the
    list misses (a list may lag a create). Raises the cloud's refusal."""
    listed = tuple(await cloud.list({POOL_UID_TAG: pool.metadata.uid}))
    vms = {vm.id: vm for vm in listed}
    for r in pool.status.instances:
        if r.instance_id and r.instance_id not in vms and r.state != DELETING:
            with contextlib.suppress(InstanceNotFound):
                vm = await cloud.describe(r.instance_id)
                if vm.state != "terminated":
                    vms[vm.id] = vm
    return listed, vms


async def node_pods(
    mgr: Manager,
    pool: NodePool,
    nodes: Mapping[str, PoolNode],
    names: set[str],
    *,
    choosing: bool = False,
) -> tuple[dict[str, NodePods], tuple[PdbView, ...]]:
    """The pods bound to each of ``names`` (cache index), and the budgets that judge them:
    every namespace's when ``choosing`` which Node goes and one runs a workload pod (read
    live, once per choice: whose pods can be evicted now), else kube-system's when a pod
    there may block."""
    pods: dict[str, NodePods] = {}
    for name, node in nodes.items():
        if name not in names:
            continue
        bound = await mgr.cache.list(PODS, index=(POD_NODE, name))
        empty = not any(is_workload(p) and not _finished(p) for p in bound)
        pods[name] = NodePods(scale_down_node(node.raw, bound), empty)
    if choosing and not all(n.empty for n in pods.values()):
        items, _ = await mgr.client.list_all(PDBS)
        return pods, tuple(pdb_view(item) for item in items)
    views = [pod for n in pods.values() for pod in n.view.pods]
    if not needs_budgets(views, switches(pool)):
        return pods, ()
    return pods, tuple(await kube_system_budgets(mgr.client))


async def observe(
    mgr: Manager, cloud: CloudProvider, pool: NodePool, node_selector: str
) -> Observation:
    """One pass's reads of a live pool (:attr:`Observation.refused`: the cloud's refusal)."""
    nodes = await pool_nodes(mgr, pool, node_selector)
    try:
        listed, vms = await pool_vms(cloud, pool)
    except CloudError as err:
        return Observation(pool=pool, nodes=nodes, refused=err)
    seen = Observation(pool=pool, nodes=nodes, listed=listed, vms=vms)
    judged = _surplus.judged_nodes(seen)
    if not judged:
        return seen
    choosing = _surplus.choosing(seen)
    pods, budgets = await node_pods(mgr, pool, nodes, judged, choosing=choosing)
    return replace(seen, pods=pods, budgets=budgets)


async def launch_now(
    mgr: Manager, images: ImageResolver, pool: NodePool, seen: Observation, class_version: str
) -> Launch | None:
    """What a node of ``pool`` would be launched with now (:mod:`._drift`): its node class
    read from the cache, its image its ``amiId`` or, for an SSM parameter, as
    :class:`._images.ImageResolver` knows it (a cloud call at most once per image and period,
    or when the class changed: ``class_version``). None when the class cannot be read: no
    node is taken as drifted then."""
    types = frozenset(candidates(pool.spec.instance_type, pool.spec.instance_types))
    ref = pool.spec.node_class_ref
    if ref is None:
        return Launch(class_hash(None), types)
    try:
        spec = await launching.node_class(mgr.client, ref, cache=mgr.cache)
    except launching.NodeClassUnavailable:
        return None
    assert spec is not None  # a reference reads a class or raises
    if spec.ami_ssm_parameter is None:
        return Launch(class_hash(spec), types, spec.ami_id)  # an AMI id is its own answer
    images.seen(spec.image, seen.vms.values())
    image_id = await images.current(spec.image, class_version)
    # A parameter moves with no event: look again when it is due to be asked again.
    return Launch(class_hash(spec), types, image_id, images.remaining(spec.image))


def _finished(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in _FINISHED


# -- a pool being deleted ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deleted:
    """What one pass over a deleted pool read."""

    name: str
    uid: str
    generation: int
    deleted_at: float | None
    """Its ``deletionTimestamp``."""
    grace: timedelta
    """``spec.disruption.terminationGracePeriod`` (the default if its spec is invalid)."""
    nodes: tuple[PoolNode, ...]
    alive: frozenset[str]
    """Ids of its VMs the cloud lists, not terminated."""
    ids: frozenset[str]
    """Every VM id to terminate: alive, recorded, or found by a recorded intent's token."""


def _disruption(obj: Object) -> Disruption:
    """The pool's ``spec.disruption``; the defaults when its spec is invalid (a pool that
    bypassed admission must still be deletable)."""
    try:
        return parse_nodepool(obj).spec.disruption
    except InvalidField:
        return Disruption()


async def observe_deleted(client: Client, cloud: CloudProvider, obj: Object) -> Deleted:
    """The reads of a pass over a deleted pool: its VMs (list by uid tag; a recorded intent
    with no id yet is looked for by its token), its Nodes (live, by the pool label)."""
    meta = obj["metadata"]
    name, uid = meta["name"], meta["uid"]
    listed = await cloud.list({POOL_UID_TAG: uid})
    alive = {vm.id for vm in listed if vm.state != "terminated"}
    ids = set(alive)
    by_name = {vm.name: vm for vm in listed}
    for entry in (obj.get("status") or {}).get("instances") or ():
        if entry.get("instanceId"):
            ids.add(entry["instanceId"])
            continue
        vm = by_name.get(entry["name"]) or await cloud.find(idempotency_token(uid, entry["name"]))
        if vm is not None:
            ids.add(vm.id)
    objs, _ = await client.list_all(NODES, label_selector=f"{POOL_LABEL}={name}")
    return Deleted(
        name=name,
        uid=uid,
        generation=int(meta.get("generation") or 0),
        deleted_at=parse_time(meta.get("deletionTimestamp")),
        grace=_disruption(obj).termination_grace_period,
        nodes=tuple(decode_node(o) for o in objs),
        alive=frozenset(alive),
        ids=frozenset(ids),
    )


def now() -> float:
    """The wall clock a pass decides with (one reading per step)."""
    return time.time()
