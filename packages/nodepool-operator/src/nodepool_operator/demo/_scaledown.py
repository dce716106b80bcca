"""The demo's second act: part of the workload goes, and the pool drains and shrinks.

Once every fitting pod runs, the demo picks the pool node holding the fewest demo pods (the
victim) and deletes the bare pods on it, the four pods that must not trigger a scale-up (their
part is played), and the smallest fitting pod of each other node that holds more than one (so
the other nodes have room). It then runs a Deployment of :data:`REPLICAS` small pods that prefer
the victim, under a PodDisruptionBudget with ``minAvailable`` :data:`REPLICAS`, and once they
run there it turns the Autoscaler's scale-down on (with a short unneeded time).

The victim then holds only the Deployment's pods, which fit elsewhere, so it is unneeded; the
other nodes hold bare pods, which nothing would recreate, so the default blocker
``NotReplicated`` keeps them (the Autoscaler's ``status.unremovableNodes``). The NodePool
controller taints the victim and evicts its pods through the Eviction API, which refuses (429):
the budget allows no disruption while every replica is needed. The drain waits and asks again.
When the demo sees the refusal it does what the application's owner would, and scales the
Deployment up by one: the new replica lands on another node (the victim is tainted), and once
it is Ready the budget allows one eviction at a time, each waiting for the replacement of the
one before to be Ready. Only then is the node empty, deleted, and its VM terminated.

Why ``minAvailable`` equal to the replicas rather than ``maxUnavailable: 1``: kwok makes a
pod Ready the moment it is bound, so with ``maxUnavailable: 1`` the first eviction's
replacement can be Ready before the drain asks for the second, and whether the budget ever
refuses would be a race. Here the refusal is certain.

The functions here are pure, over what the demo's watches hold, so they can be tested
without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from nodepool_operator.demo._workload import DEMO_LABEL, POOL_NAME, WATCHED_NAMESPACES, Role

#: The budget's name and namespace, and how many of the pods it covers may be down at once.
PDB_NAME: Final = "demo-web"
PDB_NAMESPACE: Final = WATCHED_NAMESPACES[0]
#: The Deployment of the second act: its name (and its pods' ``app`` label), replicas, size.
DEPLOYMENT_NAME: Final = "demo-web"
REPLICAS: Final = 2
#: The budget: every replica must stay available, so a drain waits for a spare one.
PDB_MIN_AVAILABLE: Final = REPLICAS
#: How long the demo waits for the drain's EvictionBlocked Event once it sees the budget
#: hold the drain, before it scales the Deployment up anyway.
REFUSAL_WAIT: Final = 15.0
REPLICA_MEMORY: Final = "1Gi"
REPLICA_CPU: Final = "100m"
#: The demo role label of the Deployment's pods: not a :class:`Role` of the burst.
REPLICATED: Final = "replicated"
#: The taint the NodePool controller puts on a node it drains (controllers/nodepool/_drain.py).
DISRUPTING_TAINT_KEY: Final = "kubeloop.dev/disrupting"
#: The Warning Event the drain writes when a PodDisruptionBudget refuses an eviction.
EVICTION_BLOCKED: Final = "EvictionBlocked"
#: How long a node must be unneeded before the Autoscaler scales it down, in the second act.
UNNEEDED_TIME: Final = "3s"


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


def making_room(victim: str, pods: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) of the pods the second act deletes: every bare demo pod on
    ``victim``, every pod that must not trigger a scale-up (bound into spare room or not, it
    could take the room the replicas need), and on each other node holding more than one
    fitting pod, the smallest of them (at least 4Gi and 500m: room for both replicas)."""
    doomed: set[tuple[str, str]] = set()
    others: dict[str, list[tuple[int, str, str]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or meta.get("ownerReferences"):
            continue
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        node = (pod.get("spec") or {}).get("nodeName")
        role = (meta.get("labels") or {}).get(DEMO_LABEL)
        if node == victim or role != str(Role.FITS):
            doomed.add(key)
        elif node:
            others.setdefault(node, []).append((_memory_of(pod), *key))
    for held in others.values():
        if len(held) > 1:
            _, namespace, name = min(held)
            doomed.add((namespace, name))
    return sorted(doomed)


def _memory_of(pod: Mapping[str, Any]) -> int:
    """The pod's memory request in GiB (the demo's pods ask in whole Gi)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        asked = str(((container.get("resources") or {}).get("requests") or {}).get("memory", ""))
        total += int(asked.removesuffix("Gi") or 0) if asked.endswith("Gi") else 0
    return total


def deployment(victim: str) -> dict[str, Any]:
    """The Deployment whose pods the victim node holds when scale-down begins.

    Its pods *prefer* the victim (a preferred node affinity on the node's name), so they land
    there, and their replacements, once the victim is tainted, land elsewhere: a required
    affinity would leave the replacements pending. No grace period: there is no kubelet."""
    labels = {DEMO_LABEL: REPLICATED, "app": DEPLOYMENT_NAME}
    container = {
        "name": "app",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": REPLICA_CPU, "memory": REPLICA_MEMORY}},
    }
    prefer_victim = {
        "weight": 100,
        "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [victim]}]
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT_NAME, "namespace": PDB_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": DEPLOYMENT_NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container],
                    "terminationGracePeriodSeconds": 0,
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [prefer_victim]
                        }
                    },
                },
            },
        },
    }


def budget() -> dict[str, Any]:
    """The PodDisruptionBudget over the Deployment's pods: all :data:`REPLICAS` must stay."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": PDB_NAME, "namespace": PDB_NAMESPACE},
        "spec": {
            "minAvailable": PDB_MIN_AVAILABLE,
            "selector": {"matchLabels": {"app": DEPLOYMENT_NAME}},
        },
    }


def surge_patch() -> dict[str, Any]:
    """One replica more than the budget needs: room for the drain to evict one at a time."""
    return {"spec": {"replicas": REPLICAS + 1}}


def replicas_on(node: str, pods: Iterable[Mapping[str, Any]]) -> int:
    """The Deployment's pods running (with a pod IP) on ``node``, not being deleted."""
    return sum(
        1
        for p in pods
        if _replica(p)
        and (p.get("spec") or {}).get("nodeName") == node
        and (p.get("status") or {}).get("phase") == "Running"
        and (p.get("status") or {}).get("podIP")
    )


def _replica(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return (meta.get("labels") or {}).get(DEMO_LABEL) == REPLICATED and not meta.get(
        "deletionTimestamp"
    )


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


def draining(node: Mapping[str, Any]) -> bool:
    """The NodePool controller drains the node: it carries the disrupting taint, or is
    cordoned."""
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) or any(
        t.get("key") == DISRUPTING_TAINT_KEY for t in spec.get("taints") or []
    )


def pdb_blocked(
    nodes: Iterable[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    pdb: Mapping[str, Any] | None,
) -> bool:
    """A draining pool node still holds a pod the budget covers, and the budget, as the API
    server holds it, allows no disruption now: the budget holds the drain up."""
    if pdb is None or ((pdb.get("status") or {}).get("disruptionsAllowed", 0)) > 0:
        return False
    drained = {str(n["metadata"]["name"]) for n in nodes if draining(n)}
    return any(_replica(p) and (p.get("spec") or {}).get("nodeName") in drained for p in pods)


def refused_evictions(events: Iterable[Mapping[str, Any]]) -> int:
    """Evictions the API server refused (429) for the budget, from the drain's Warning
    Events (``EvictionBlocked``; a repeated Event counts each time: ``count`` or
    ``series.count``)."""
    total = 0
    for event in events:
        if event.get("reason") != EVICTION_BLOCKED:
            continue
        series = event.get("series") or {}
        total += int(series.get("count") or event.get("count") or 1)
    return total


def blockers(autoscaler: Mapping[str, Any] | None) -> list[str]:
    """The Autoscaler's ``status.unremovableNodes``, one line each: node, reason, pod."""
    found = []
    for entry in ((autoscaler or {}).get("status") or {}).get("unremovableNodes") or []:
        pod = f" (pod {entry['pod']})" if entry.get("pod") else ""
        found.append(f"{entry.get('node')}: {entry.get('reason')}{pod}")
    return found


def disruption_settings(pool: Mapping[str, Any] | None) -> dict[str, Any]:
    """The pool's ``spec.disruption`` as the API server holds it (defaults filled in)."""
    return dict(((pool or {}).get("spec") or {}).get("disruption") or {})


__all__ = [
    "PDB_NAME",
    "PDB_NAMESPACE",
    "POOL_NAME",
    "blockers",
    "budget",
    "deployment",
    "disruption_settings",
    "draining",
    "making_room",
    "pdb_blocked",
    "pods_on",
    "refused_evictions",
    "replicas_on",
    "running",
    "scale_down_patch",
    "surge_patch",
    "victim_node",
]
