"""The pool's instance records (``status.instances``) read together with its Nodes: which
are live, which Node each registered as, which are Ready, which a scale-down is removing, and
how many the pool wants."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from nodepool_operator.api import InstanceRecord, NodePool
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers.nodepool._intent import DELETING
from nodepool_operator.controllers.nodepool._plan import desired_nodes
from nodepool_operator.controllers.nodepool.records import PoolNode

__all__ = ["desired", "live", "node_of", "ready_records", "scaled_down", "update"]


def live(records: Sequence[InstanceRecord]) -> list[InstanceRecord]:
    """Records of VMs that exist and stay: an id, not being removed."""
    return [r for r in records if r.instance_id and r.state != DELETING]


def serving(
    records: Sequence[InstanceRecord],
    by_instance: Mapping[str, PoolNode],
    *,
    leaving: Collection[str],
) -> int:
    """The pool's Ready nodes not being disrupted, without those ``leaving`` (by record
    name): once they are as many as the pool wants, the replacements of the leaving ones
    are serving and those may go (expiry, drift, interruptions)."""
    return sum(
        1
        for r in live(records)
        if r.name not in leaving
        and (node := node_of(r, by_instance)) is not None
        and node.ready
        and not node.disrupting
    )


def desired(pool: NodePool) -> int:
    spec = pool.spec
    return desired_nodes(spec.target_nodes, spec.min_nodes, spec.max_nodes)


def node_of(r: InstanceRecord, by_instance: Mapping[str, PoolNode]) -> PoolNode | None:
    """The Node ``r``'s VM registered, found by providerID."""
    return by_instance.get(r.instance_id) if r.instance_id else None


def update(
    records: Sequence[InstanceRecord], name: str, **changes: Any
) -> tuple[InstanceRecord, ...]:
    """``records`` with the one named ``name`` changed."""
    return tuple(replace(r, **changes) if r.name == name else r for r in records)


def scaled_down(
    r: InstanceRecord, by_instance: Mapping[str, PoolNode], vms: Mapping[str, Instance]
) -> bool:
    """Whether ``r`` is being removed by a scale-down: marked deleting, its VM alive and its
    Node Ready and not deleted by someone (the other reasons to go: VM gone, Node deleted,
    never registered, not Ready)."""
    node = node_of(r, by_instance)
    alive = r.instance_id is not None and r.instance_id in vms
    return r.state == DELETING and alive and node is not None and node.scaling_down


def ready_records(
    records: Sequence[InstanceRecord], by_instance: Mapping[str, PoolNode]
) -> set[str]:
    """Records registered as a Ready node of a running VM."""
    ready = set()
    for r in live(records):
        node = node_of(r, by_instance)
        if r.state == "running" and node is not None and node.ready:
            ready.add(r.name)
    return ready
