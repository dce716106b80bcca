"""What a pass over a live pool ends with: the status it writes and when it looks again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nodepool_operator.api import InstanceRecord, NodePool
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers.nodepool._disruption import disruption_status
from nodepool_operator.controllers.nodepool._instances import desired, live, ready_records
from nodepool_operator.controllers.nodepool._pool_status import (
    CloudFailure,
    PoolStatus,
    pool_status,
)
from nodepool_operator.controllers.nodepool.records import PoolNode
from nodepool_operator.settings import OperatorSettings

__all__ = ["DRAIN_POLL", "MAX_POLL", "MIN_POLL", "SOON", "requeue_after", "status"]


#: While VMs boot: poll when the next one should be running, within these bounds.
MIN_POLL, MAX_POLL = 0.2, 5.0
#: A VM past its expected boot time, or an intent to replace: look again soon.
SOON = 1.0
#: A drain in progress that named no wait of its own: look again in (kubectl drain's 5 s).
#: Each drain pass says when it wants the next (_drain.py: pods terminating, a
#: PodDisruptionBudget refusing, a do-not-disrupt pod holding the node).
DRAIN_POLL = 5.0


def status(
    pool: NodePool,
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
    *,
    failure: CloudFailure | None,
    dropped: frozenset[str],
    held: Sequence[str],
    repair_blocked: str,
    expiring: str = "",
    drifting: str = "",
    zones: tuple[str, ...] | None = None,
) -> PoolStatus:
    """The pool's status after (or during) a pass; ``zones``: the zones it can launch into
    now (None: not known this pass, the written ones kept)."""
    spec = pool.spec
    return pool_status(
        name=pool.metadata.name,
        generation=pool.metadata.generation,
        target=spec.target_nodes,
        desired=desired(pool),
        min_nodes=spec.min_nodes,
        records=records,
        ready=ready_records(records, by_instance),
        failure=failure,
        dropped=dropped,
        held=held,
        repair_blocked=repair_blocked,
        expiring=expiring,
        drifting=drifting,
        disruption=disruption_status(pool, records, nodes, by_instance),
        zones=zones,
    )


def requeue_after(
    *,
    pool: NodePool,
    records: Sequence[InstanceRecord],
    vms: Mapping[str, Instance],
    waits: Sequence[float],
    draining: bool,
    drain_wait: float | None,
    gc_wait: float | None,
    gate_remaining: float | None,
    resting: bool,
    now: float,
    settings: OperatorSettings,
) -> float:
    """When to look at the pool again: the soonest of what is due, and after one garbage
    grace period when idle (to look for leaked VMs again)."""
    out = [settings.gc_grace_seconds, *(max(w, MIN_POLL) for w in waits)]
    if draining:
        out.append(DRAIN_POLL if drain_wait is None else max(drain_wait, MIN_POLL))
    booting = [
        vm
        for r in live(records)
        if (vm := vms.get(r.instance_id or "")) is not None and vm.state == "pending"
    ]
    if booting:
        eta = min(vm.created_at for vm in booting) + settings.boot_seconds - now
        out.append(min(max(eta if eta > 0 else SOON, MIN_POLL), MAX_POLL))
    if gc_wait is not None:
        out.append(max(gc_wait, MIN_POLL))
    if gate_remaining is not None:
        out.append(max(gate_remaining, MIN_POLL))
    elif not booting and len(live(records)) != desired(pool) and not resting:
        out.append(SOON)  # e.g. an intent dropped for a spent token
    return min(out)
