"""Records that must be replaced whatever the target says: their VM is gone, their Node was
deleted, it never registered, or it is unhealthy past the repair toleration (:mod:`._repair`);
and those whose scale-down drain timed out a short while ago, which rest before they may be
chosen again (:mod:`._drain_deadline`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodepool_operator.api import InstanceRecord, NodePool
from nodepool_operator.controllers.nodepool._instances import live, node_of
from nodepool_operator.controllers.nodepool._intent import DELETING
from nodepool_operator.controllers.nodepool._repair import Unhealthy, decide_repair
from nodepool_operator.settings import OperatorSettings

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["Leaving", "leaving", "repair_toleration", "resting"]


@dataclass(frozen=True, slots=True)
class Leaving:
    """Records that must be replaced, and what the repair threshold holds back."""

    why: Mapping[str, tuple[str, str]]
    """The Event (reason, note) that says why, by record."""
    waits: tuple[float, ...] = ()
    repair_blocked: str = ""
    repair_held: tuple[str, ...] = ()


def repair_toleration(pool: NodePool, settings: OperatorSettings) -> float:
    toleration = pool.spec.disruption.repair.toleration
    return toleration.total_seconds() if toleration is not None else settings.node_repair_seconds


def leaving(
    obs: Observation,
    records: Sequence[InstanceRecord],
    now: float,
    settings: OperatorSettings,
) -> Leaving:
    """Records that must be replaced: VM gone, Node deleted by someone, no Node registered
    within ``registration_timeout_seconds``, or unhealthy past the repair toleration
    (:mod:`._repair`: one at a time, none while too much of the pool is unhealthy)."""
    by_instance = obs.by_instance()
    why: dict[str, tuple[str, str]] = {}
    waits: list[float] = []
    unhealthy: list[Unhealthy] = []
    timeout = settings.registration_timeout_seconds
    for r in live(records):
        vm = obs.vms.get(r.instance_id or "")
        if vm is None:
            why[r.name] = ("VMGone", f"the VM of {r.name} is gone; replacing it")
            continue
        node = node_of(r, by_instance)
        if node is not None and node.deleting:
            why[r.name] = ("NodeDeleted", f"node {node.name} of {r.name} was deleted; replacing it")
        elif node is None and vm.state == "running":
            due = (vm.launched_at or vm.created_at) + timeout - now
            if due <= 0:
                note = f"VM {vm.id} ({r.name}) registered no Node within {timeout:g}s; replacing it"
                why[r.name] = ("RegistrationTimeout", note)
            else:
                waits.append(due)
        elif node is not None and vm.state == "running" and node.unhealthy is not None:
            unhealthy.append(Unhealthy(r.name, node.name, *node.unhealthy))
    for r in records:  # the ones being repaired count, and are the one at a time
        node = node_of(r, by_instance)
        alive = r.instance_id is not None and r.instance_id in obs.vms
        if r.state != DELETING or node is None or not alive or node.deleting:
            continue
        if node.unhealthy is not None:
            unhealthy.append(Unhealthy(r.name, node.name, *node.unhealthy, repairing=True))
    toleration = repair_toleration(obs.pool, settings)
    pool_nodes = sum(1 for r in live(records) if node_of(r, by_instance) is not None)
    pool_nodes += sum(1 for u in unhealthy if u.repairing)
    decided = decide_repair(
        unhealthy,
        pool_nodes=pool_nodes,
        toleration=toleration,
        max_unhealthy_percent=obs.pool.spec.disruption.repair.max_unhealthy_percent,
        now=now,
    )
    for u in decided.replace:
        note = (
            f"node {u.node} of {u.record} unhealthy ({u.why}) for more than "
            f"{toleration:g}s; draining and replacing it"
        )
        why[u.record] = ("NodeRepair", note)
    if decided.wait is not None:
        waits.append(decided.wait)
    return Leaving(why, tuple(waits), decided.message, decided.held)


def resting(
    obs: Observation, records: Sequence[InstanceRecord], now: float
) -> tuple[frozenset[str], tuple[float, ...]]:
    """The live records whose Node's scale-down drain timed out less than
    :data:`._drain_deadline.RECHECK_SECONDS` ago, and when each may be chosen again."""
    by_instance = obs.by_instance()
    names, waits = set(), []
    for r in live(records):
        node = node_of(r, by_instance)
        rest = node.resting(now) if node is not None else 0.0
        if rest > 0:
            names.add(r.name)
            waits.append(rest)
    return frozenset(names), tuple(waits)
