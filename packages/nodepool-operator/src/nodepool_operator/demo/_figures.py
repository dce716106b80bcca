"""The demo's result in numbers: the JSON line of ``--json`` and the table of the report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from nodepool_operator.cloud import Instance
from nodepool_operator.demo._sample import Sample
from nodepool_operator.demo._workload import POOL_LABEL, POOL_NAME, Role, Workload


@dataclass(frozen=True)
class Figures:
    """What a run ended with; :data:`MEANINGS` says what each figure is. A perfect run has
    ``pods_scheduled == pods_fitting``, ``nodes == nodes_lower_bound`` and no duplicate or
    leaked VMs."""

    pods: int
    pods_fitting: int
    pods_scheduled: int
    pods_not_triggering: int
    nodes: int
    nodes_lower_bound: int
    vms: int
    duplicate_vms: int
    leaked_vms: int
    api_writes: int
    conflicts: int
    seconds: float
    pods_running: int = 0
    nodes_drained: int = 0
    evictions: int = 0
    pdb_blocked_s: float = 0.0
    evictions_refused: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def problems(self) -> list[str]:
        """What keeps this run from being a perfect one, in words; empty when it is."""
        found = []
        if self.pods_scheduled != self.pods_fitting:
            found.append(f"{self.pods_fitting - self.pods_scheduled} fitting pods not scheduled")
        if self.pods_running != self.pods_fitting:
            found.append(f"{self.pods_fitting - self.pods_running} fitting pods not running")
        if self.nodes_drained < 1:
            found.append("no node was drained in the scale-down act")
        if self.nodes_drained and self.evictions < 1:
            found.append("the drained node held no pod to evict")
        if self.evictions and not (self.pdb_blocked_s > 0 or self.evictions_refused):
            found.append("the PodDisruptionBudget held no eviction")
        if self.nodes != self.nodes_lower_bound:
            found.append(f"{self.nodes} nodes where {self.nodes_lower_bound} would do")
        if self.duplicate_vms:
            found.append(f"{self.duplicate_vms} duplicate VMs")
        if self.leaked_vms:
            found.append(f"{self.leaked_vms} leaked VMs")
        return found


MEANINGS: dict[str, str] = {
    "pods": "pods in the burst",
    "pods_fitting": "pods that fit a node of the pool, in a watched namespace",
    "pods_scheduled": "fitting pods bound to a node (spec.nodeName set)",
    "pods_not_triggering": (
        "pods that must not cause a scale-up (too big, unwatched namespace, a nodeSelector the "
        "pool cannot satisfy, a missing Secret) and did not: the Autoscaler's NotTriggerScaleUp "
        "Event on the pod, or a namespace it does not watch"
    ),
    "nodes": "Nodes of the pool (label kubeloop.dev/nodepool) at the end of the first act",
    "nodes_lower_bound": "fewest nodes that could hold the fitting pods (scheduling.lower_bound)",
    "vms": "live (not terminated) VMs in the cloud at the end of the first act",
    "duplicate_vms": "live VMs beyond the first of each name (SimulatedCloud.duplicates())",
    "leaked_vms": "live VMs tagged for the pool that are neither a Node nor in status.instances",
    "api_writes": (
        "successful writes the operator sent to the API server from the burst to the end of "
        "the second act"
    ),
    "conflicts": (
        "409 Conflicts the operator met from the burst to the end of the second act (retried "
        "or given up on)"
    ),
    "seconds": "from creating the pods to the last fitting pod bound (or to the timeout)",
    "pods_running": (
        "fitting pods Running with a pod IP (kwok runs them) at the end of the first act"
    ),
    "nodes_drained": (
        "pool Nodes there when the second act (scale-down) began and gone at its end: "
        "cordoned, drained, deleted, their VMs terminated"
    ),
    "evictions": (
        "demo pods the API server evicted through the Eviction API (their DisruptionTarget "
        "condition, reason EvictionByEvictionAPI, seen on the demo's watch)"
    ),
    "pdb_blocked_s": (
        "about how long (in 0.25 s samples) a draining pool node held a pod of the "
        "PodDisruptionBudget demo-web while that budget, as the API server held it, allowed "
        "no disruption: how long the budget held the drain up"
    ),
    "evictions_refused": (
        "evictions the API server refused (429) for the budget: the drain's EvictionBlocked "
        "Warning Events, with their counts"
    ),
}


def compute_figures(
    workload: Workload,
    final: Sample,
    *,
    vms: Sequence[Instance],
    nodes: Iterable[Mapping[str, Any]],
    pool: Mapping[str, Any] | None,
    duplicates: int,
    seconds: float,
    pods_running: int = 0,
    nodes_drained: int = 0,
    evictions: int = 0,
    pdb_blocked_s: float = 0.0,
) -> Figures:
    """The figures of a run from its last sample and the cloud as it stands.

    ``vms`` are the cloud's live VMs, ``nodes`` the pool's Nodes.
    """
    pool_vms = [vm for vm in vms if vm.tags.get(POOL_LABEL) == POOL_NAME]
    roles = workload.roles().values()
    return Figures(
        pods=len(workload.pods()),
        pods_fitting=sum(1 for r in roles if r is Role.FITS),
        pods_scheduled=final.fitting.scheduled,
        pods_not_triggering=len(final.not_triggering),
        nodes=final.nodes,
        nodes_lower_bound=workload.nodes_lower_bound(),
        vms=len(vms),
        duplicate_vms=duplicates,
        leaked_vms=len(leaked_vms(pool_vms, nodes, pool)),
        api_writes=final.api.writes,
        conflicts=final.api.conflicts,
        seconds=round(seconds, 1),
        pods_running=pods_running,
        nodes_drained=nodes_drained,
        evictions=evictions,
        pdb_blocked_s=round(pdb_blocked_s, 1),
    )


def leaked_vms(
    vms: Sequence[Instance], nodes: Iterable[Mapping[str, Any]], pool: Mapping[str, Any] | None
) -> list[Instance]:
    """Live VMs of the pool that nothing accounts for: no Node registered for them and no
    entry in the pool's ``status.instances``.

    A VM is matched to a Node by the Node's name or its ``spec.providerID`` (which ends with
    the instance id, as ``aws:///zone/i-...`` does), and to an instance record by name or id.
    """
    known: set[str] = set()
    for node in nodes:
        known.add(str(node.get("metadata", {}).get("name", "")))
        provider_id = str(node.get("spec", {}).get("providerID", ""))
        if provider_id:
            known.add(provider_id.rsplit("/", 1)[-1])
    for record in (pool or {}).get("status", {}).get("instances") or []:
        known.update(str(record[k]) for k in ("name", "instanceId", "nodeName") if record.get(k))
    known.discard("")
    return [vm for vm in vms if vm.id not in known and vm.name not in known]
