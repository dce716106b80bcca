"""Draining a Node before its VM goes: taint it, evict its pods, wait until they are gone.

The order is Karpenter's termination flow:

1. :func:`taint_disrupting` puts :data:`DISRUPTING_TAINT` (``kubeloop.dev/disrupting:
   NoSchedule``, as ``karpenter.sh/disrupted``) on the Node *when it is chosen*, before
   anything else is done to it, so no pod is bound to it between the choice and the drain;
2. :func:`drain_node` evicts its workload pods (:func:`~nodepool_operator.scheduling.
   is_workload`: DaemonSet and mirror pods stay, they go with the node) through the Eviction
   API, which enforces PodDisruptionBudgets: a 429 means "not now", so the drain waits and
   asks again later, it is not an error. No grace period is given, so each pod gets its own
   ``terminationGracePeriodSeconds`` from its kubelet;
3. a blocker (:mod:`nodepool_operator.scheduling._blockers`) stops the drain before any
   eviction (evicting the others would disrupt them for nothing), with an Event, until it
   ends or its annotation goes: always a pod annotated do-not-disrupt (kubeloop's or
   Karpenter's) or ``safe-to-evict: "false"``; for a voluntary removal (scale-down) also the
   Node's own do-not-disrupt annotation and the pool's default blockers (a pod no controller
   owns, local storage, kube-system without a PodDisruptionBudget), so a bare pod is never
   evicted and lost;
4. only when no workload pod is left on the Node does :func:`drain_node` say ``done``, and the
   caller deletes the Node and its VM.

Pods are listed from the API server (``spec.nodeName`` field selector), not a cache: a pod
bound a moment ago must not be missed by the check that lets the VM go.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kubeloop import NODES, PODS, Client, Invalid, NotFound, PatchType, TooManyRequests
from nodepool_operator.controllers._blocked import kube_system_budgets
from nodepool_operator.controllers._node_fields import JsonPatch, NodeFields
from nodepool_operator.controllers._node_manifest import DISRUPTING_TAINT
from nodepool_operator.controllers._unneeded import format_time, parse_time
from nodepool_operator.scheduling import (
    DefaultBlockers,
    PodRef,
    PodView,
    needs_budgets,
    node_blocker,
    pod_view,
)

__all__ = [
    "DISRUPTING_TAINT",
    "TERMINATING_POLL",
    "DrainStatus",
    "disrupting_since",
    "drain_node",
    "has_disrupting_taint",
    "pods_on",
    "taint_disrupting",
    "taint_patch",
    "untaint_disrupting",
    "untaint_patch",
]

log = logging.getLogger("nodepool_operator.drain")

#: How soon to look again while pods terminate (their kubelet is at work).
TERMINATING_POLL: Final = 1.0
#: How soon to ask again after a PodDisruptionBudget refused an eviction, when the server
#: gives no Retry-After.
PDB_RETRY: Final = 5.0
#: How soon to look again while a blocker holds the node.
BLOCKED_POLL: Final = 10.0
_TERMINAL: Final = ("Succeeded", "Failed")

EventSink = Callable[[str, str], None]
"""``(reason, note)`` of a Warning Event about the drain, e.g. on the pool."""


@dataclass(frozen=True, slots=True)
class DrainStatus:
    """Where a drain stands after one pass.

    Attributes:
        done: no workload pod is left on the node: it may be deleted.
        retry_after: when to pass again, if not done.
        evicted: evictions the API server accepted in this pass.
        pdb_blocked: evictions refused by a PodDisruptionBudget in this pass.
        blocked_by: the pod holding the node (``namespace/name``), or the node itself when
            its own annotation holds it, if any.
        message: what it waits for, for logs and Events.
    """

    done: bool
    retry_after: float = 0.0
    evicted: int = 0
    pdb_blocked: int = 0
    blocked_by: str | None = None
    message: str = ""


def has_disrupting_taint(node: NodeFields) -> bool:
    return node.taint(DISRUPTING_TAINT.key) is not None


def disrupting_since(node: NodeFields) -> float | None:
    """When :data:`DISRUPTING_TAINT` was put on ``node`` (its ``timeAdded``), or None: the
    start of its drain, kept by the cluster, for the drain timeout."""
    taint = node.taint(DISRUPTING_TAINT.key)
    return None if taint is None else parse_time(taint.get("timeAdded"))


def taint_patch(node: NodeFields, now: float | None = None) -> JsonPatch:
    """The JSON patch that adds :data:`DISRUPTING_TAINT` to ``node``, stamped ``timeAdded``
    ``now`` (the drain's start); ``[]`` if it has it.

    Appending to an existing taint list is atomic on the server (nothing someone else added
    meanwhile is lost); creating the list is guarded by the resourceVersion.
    """
    if has_disrupting_taint(node):
        return []
    taint = {
        "key": DISRUPTING_TAINT.key,
        "effect": DISRUPTING_TAINT.effect,
        "timeAdded": format_time(time.time() if now is None else now),
    }
    if node.taints:
        return [{"op": "add", "path": "/spec/taints/-", "value": taint}]
    guard = {"op": "test", "path": "/metadata/resourceVersion", "value": node.resource_version}
    return [guard, {"op": "add", "path": "/spec/taints", "value": [taint]}]


def untaint_patch(node: NodeFields) -> JsonPatch:
    """The JSON patch that removes :data:`DISRUPTING_TAINT` from ``node``; ``[]`` if it has
    none. Each removal tests the element first, so a list that shifted meanwhile is refused
    (422) rather than losing another taint."""
    taints = node.taints or ()
    ops: JsonPatch = []
    for index in reversed(range(len(taints))):
        if isinstance(taints[index], dict) and taints[index].get("key") == DISRUPTING_TAINT.key:
            path = f"/spec/taints/{index}"
            ops += [
                {"op": "test", "path": path, "value": taints[index]},
                {"op": "remove", "path": path},
            ]
    return ops


async def taint_disrupting(client: Client, node: NodeFields) -> bool:
    """Add :data:`DISRUPTING_TAINT` to ``node`` (as last read); ``False`` if the Node is gone
    or changed under a guarded patch (the next pass, with a fresh read, tries again)."""
    return await _patch(client, node, taint_patch(node))


async def untaint_disrupting(client: Client, node: NodeFields) -> bool:
    """Take :data:`DISRUPTING_TAINT` off ``node`` (it was chosen, then kept after all)."""
    return await _patch(client, node, untaint_patch(node))


async def _patch(client: Client, node: NodeFields, ops: JsonPatch) -> bool:
    if not ops:
        return True
    try:
        await client.patch(NODES, node.name, ops, patch_type=PatchType.JSON)
    except (NotFound, Invalid):
        return False
    return True


async def pods_on(client: Client, node_name: str) -> list[PodView]:
    """The pods bound to ``node_name`` that have not ended, read from the API server."""
    items, _ = await client.list_all(PODS, field_selector=f"spec.nodeName={node_name}")
    views = []
    for item in items:
        try:
            view = pod_view(item)
        except ValueError:
            # Bad quantities do not matter to a drain: keep the pod with what we can read.
            meta = item.get("metadata") or {}
            ref = PodRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            view = PodView(ref=ref, uid=str(meta.get("uid") or ""))
        if view.phase not in _TERMINAL:
            views.append(view)
    return views


async def drain_node(
    client: Client,
    node_name: str,
    *,
    warn: EventSink | None = None,
    voluntary: bool = False,
    switches: DefaultBlockers | None = None,
    hold: str = "",
) -> DrainStatus:
    """One pass of draining ``node_name``; call again after ``retry_after`` until ``done``.

    The Node should carry :data:`DISRUPTING_TAINT` already (:func:`taint_disrupting`), or
    evicted pods' replacements may land on it again. ``warn`` receives a Warning Event's
    reason and note when a blocker or a PodDisruptionBudget holds the drain. ``voluntary``
    (a scale-down): the Node's ``hold`` annotation and the default blockers ``switches``
    apply as well as the pods' own annotations.
    """
    workload = [p for p in await pods_on(client, node_name) if p.workload]
    if not workload:
        return DrainStatus(done=True, message="no workload pods")
    switches = switches or DefaultBlockers()
    budgets = (
        await kube_system_budgets(client) if voluntary and needs_budgets(workload, switches) else []
    )
    blocked = node_blocker(
        node_name,
        workload,
        hold=hold if voluntary else "",
        voluntary=voluntary,
        switches=switches,
        budgets=budgets,
    )
    if blocked is not None:
        if warn is not None:
            warn("DisruptionBlocked", blocked.note)
        holder = str(blocked.pod) if blocked.pod is not None else node_name
        return DrainStatus(False, BLOCKED_POLL, blocked_by=holder, message=blocked.note)
    evicted = refused = 0
    retry = TERMINATING_POLL
    for pod in sorted(workload, key=lambda p: p.ref):
        if pod.terminating:
            continue
        try:
            await client.evict(pod.ref.name, pod.ref.namespace)
        except TooManyRequests as err:
            refused += 1
            retry = max(retry, err.retry_after or PDB_RETRY)
            if warn is not None:
                warn(
                    "EvictionBlocked",
                    f"node {node_name}: evicting {pod.ref} would violate a "
                    "PodDisruptionBudget; waiting",
                )
            continue
        except NotFound:
            continue  # gone already
        evicted += 1
    message = f"{len(workload)} pod(s) on {node_name}: {evicted} evicted, {refused} held by PDB"
    log.info(
        "draining",
        extra={"node": node_name, "pods": len(workload), "evicted": evicted, "pdb": refused},
    )
    return DrainStatus(False, retry, evicted=evicted, pdb_blocked=refused, message=message)
