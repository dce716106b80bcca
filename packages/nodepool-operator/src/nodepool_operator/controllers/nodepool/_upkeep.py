"""The rest of a pass over a live pool, after the plan is recorded: stopped VMs to start,
records that follow their VM and Node (adoption), the reservation backstop, and what no record
knows (garbage VMs and orphan Nodes)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers._reserve import RESERVATION_BACKSTOP
from nodepool_operator.controllers.nodepool._instances import live, node_of
from nodepool_operator.controllers.nodepool.records import PoolNode

__all__ = ["Adoption", "Garbage", "adoption", "backstop_due", "garbage", "to_restart"]


def to_restart(
    records: Sequence[InstanceRecord], vms: Mapping[str, Instance]
) -> list[tuple[str, Instance]]:
    """Live records whose VM was stopped (outside the operator): start it."""
    out = []
    for r in live(records):
        vm = vms.get(r.instance_id or "")
        if vm is not None and vm.state == "stopped":
            out.append((r.name, vm))
    return out


@dataclass(frozen=True, slots=True)
class Adoption:
    record: str
    vm: Instance
    node: PoolNode | None
    """Its Node, to bring in line with the pool (None: not registered, or deleted)."""
    registered: bool
    """Its Node registered since the last pass (a ``Registered`` Event)."""
    node_name: str | None


def adoption(
    records: Sequence[InstanceRecord],
    vms: Mapping[str, Instance],
    by_instance: Mapping[str, PoolNode],
) -> list[Adoption]:
    """A live record's Node, found by providerID, is the pool's; the record follows its VM's
    state. A record whose VM is gone is left to the next pass (it retires it)."""
    out = []
    for r in live(records):
        vm = vms.get(r.instance_id or "")
        if vm is None:
            continue
        node = node_of(r, by_instance)
        synced = node if node is not None and not node.deleting else None
        out.append(
            Adoption(
                record=r.name,
                vm=vm,
                node=synced,
                registered=synced is not None and r.node_name is None,
                node_name=node.name if node is not None else None,
            )
        )
    return out


def backstop_due(node: PoolNode, now: float, landing_grace: float) -> float | None:
    """Seconds until a reserved Node's reservation is lifted by the backstop (≤ 0: now), or
    None when it has none or is not Ready. The Autoscaler lifts it once its planned pods are
    bound; should none do it, the Node opens :data:`RESERVATION_BACKSTOP` landing graces after
    it became Ready, so a pool never keeps a node no pod may use."""
    if not node.reserved or not node.ready:
        return None
    return RESERVATION_BACKSTOP * landing_grace - (node.ready_for(now) or 0.0)


@dataclass(frozen=True, slots=True)
class Garbage:
    vms: tuple[Instance, ...] = ()
    """VMs tagged for the pool that no record knows, past the grace period."""
    wait: float | None = None
    """Seconds until the next such VM's grace period ends."""
    nodes: tuple[str, ...] = ()
    """Nodes of the pool whose VM is neither recorded nor alive."""


def garbage(
    records: Sequence[InstanceRecord],
    listed: Sequence[Instance],
    removed: Collection[str],
    nodes: Mapping[str, PoolNode],
    now: float,
    grace: float,
) -> Garbage:
    """What no record knows: VMs tagged with the pool's uid older than ``grace`` (a VM just
    created may not be recorded yet), and Nodes labelled for the pool (a leaked VM's Node
    stays until that VM is adopted or collected)."""
    known = {r.instance_id for r in records if r.instance_id} | set(removed)
    intents = {r.name for r in records if not r.instance_id}  # ids not back yet
    vms, wait = [], math.inf
    for vm in listed:
        if vm.id in known or vm.name in intents:
            continue
        age = now - vm.created_at
        if age < grace:
            wait = min(wait, grace - age)
        else:
            vms.append(vm)
    recorded = {r.instance_id for r in records if r.instance_id}
    alive = {vm.id for vm in listed if vm.id not in removed}
    orphans = tuple(
        name
        for name, node in nodes.items()
        if node.instance_id not in recorded
        and node.instance_id not in alive
        and name not in intents
    )
    return Garbage(tuple(vms), None if wait == math.inf else wait, orphans)
