"""The demo's second act: part of the workload goes, and the pool drains and shrinks.

Once every fitting pod runs, the demo deletes the demo pods of the pool node that holds the
fewest, puts a PodDisruptionBudget over the pods that stay, and turns the Autoscaler's
scale-down on (with a short unneeded time). The emptied node is then unneeded, the
Autoscaler lowers ``targetNodes``, and the NodePool controller drains that node (cordon,
evictions through the Eviction API, which the budget may refuse) before it terminates its VM.

The functions here are pure, over what the demo's watches hold, so they can be tested
without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from nodepool_operator.demo._workload import DEMO_LABEL, POOL_NAME, WATCHED_NAMESPACES, Role

#: The budget's name and namespace, and how many of the pods it covers may be down at once.
PDB_NAME: Final = "demo-fits"
PDB_NAMESPACE: Final = WATCHED_NAMESPACES[0]
PDB_MAX_UNAVAILABLE: Final = 1
#: How long a node must be unneeded before the Autoscaler scales it down, in the second act.
UNNEEDED_TIME: Final = "3s"
EVICTION_TARGET: Final = "create pods/eviction"


def victim_node(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> str | None:
    """The pool node holding the fewest demo pods (ties: by name), or None without nodes."""
    counts: dict[str, int] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            counts[str(meta.get("name", ""))] = 0
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name in counts:
            counts[node_name] += 1
    if not counts:
        return None
    return min(counts, key=lambda name: (counts[name], name))


def pods_on(node: str, pods: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) of the demo pods bound to ``node``."""
    return sorted(
        (str(p["metadata"].get("namespace", "")), str(p["metadata"]["name"]))
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == node
    )


def budget() -> dict[str, Any]:
    """The PodDisruptionBudget over the fitting pods of :data:`PDB_NAMESPACE`."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": PDB_NAME, "namespace": PDB_NAMESPACE},
        "spec": {
            "maxUnavailable": PDB_MAX_UNAVAILABLE,
            "selector": {"matchLabels": {DEMO_LABEL: str(Role.FITS)}},
        },
    }


def scale_down_patch() -> dict[str, Any]:
    return {"spec": {"scaleDownEnabled": True, "scaleDownUnneededTime": UNNEEDED_TIME}}


def running(pods: Iterable[Mapping[str, Any]]) -> int:
    """Fitting demo pods that run (phase Running, with a pod IP), not being deleted."""
    return sum(
        1
        for p in pods
        if (p.get("metadata") or {}).get("labels", {}).get(DEMO_LABEL) == str(Role.FITS)
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") == "Running"
        and (p.get("status") or {}).get("podIP")
    )


def pdb_blocked(nodes: Iterable[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> bool:
    """A cordoned pool node still holds a pod the budget covers: its drain waits on it."""
    cordoned = {
        str(n["metadata"]["name"]) for n in nodes if (n.get("spec") or {}).get("unschedulable")
    }
    return any(
        (p.get("spec") or {}).get("nodeName") in cordoned
        and p["metadata"].get("namespace") == PDB_NAMESPACE
        and (p["metadata"].get("labels") or {}).get(DEMO_LABEL) == str(Role.FITS)
        and not p["metadata"].get("deletionTimestamp")
        for p in pods
    )


def evictions(writes_by_target: Mapping[str, int]) -> int:
    """Evictions the operator made, from its write counters (``<controller> create
    pods/eviction``)."""
    return sum(n for key, n in writes_by_target.items() if key.endswith(EVICTION_TARGET))


__all__ = [
    "PDB_NAME",
    "PDB_NAMESPACE",
    "POOL_NAME",
    "budget",
    "evictions",
    "pdb_blocked",
    "pods_on",
    "running",
    "scale_down_patch",
    "victim_node",
]
