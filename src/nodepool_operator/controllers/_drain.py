"""Draining a Node before its VM goes: cordon it, then evict its pods through the Eviction API.

This is the minimum the NodePool controller's termination path needs (``kubectl delete node``
and scale-down both end here); the scale-down planner's drain may replace or extend it, so the
contract is the one function :func:`drain_node` and its :class:`DrainResult`:

- it is called again on every pass until the result says ``drained``, so each call does one
  round of work and never waits: a pod a PodDisruptionBudget protects (the Eviction API's 429)
  is counted as ``blocked`` and tried again on the next call, not treated as an error;
- the pods are listed from the server *after* the cordon, so a pod bound between the caller's
  plan and the cordon is seen and evicted too;
- DaemonSet pods, mirror (static) pods and finished pods do not hold a drain up, as for
  ``kubectl drain --ignore-daemonsets``;
- a pod already terminating is waited for (kwok or the kubelet finishes it after its grace
  period), never deleted with a zero grace period.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubeloop import NODES, PODS, Client, NotFound, Object, TooManyRequests

log = logging.getLogger("nodepool_operator.drain")

_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
_TERMINAL: Final = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class DrainResult:
    """What one drain round found and did."""

    evicted: int = 0
    """Evictions the API accepted in this round."""
    blocked: int = 0
    """Pods whose eviction a PodDisruptionBudget refused (429) in this round."""
    terminating: int = 0
    """Pods already being deleted, not gone yet."""

    @property
    def drained(self) -> bool:
        """No pod that holds the node up is left (evicted ones may still be terminating)."""
        return self.blocked == 0 and self.terminating == 0 and self.evicted == 0


def _owned_by_daemonset(pod: Mapping[str, Any]) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(ref.get("kind") == "DaemonSet" and ref.get("controller") for ref in refs)


def holds_node(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` must leave before its node is removed: not a DaemonSet or mirror pod,
    and not finished."""
    meta = pod.get("metadata") or {}
    if _MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    if _owned_by_daemonset(pod):
        return False
    return (pod.get("status") or {}).get("phase") not in _TERMINAL


async def cordon(client: Client, node: Object) -> None:
    """Mark the Node unschedulable (nothing new is bound to it from now on)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return
    with contextlib.suppress(NotFound):
        await client.patch(NODES, node["metadata"]["name"], {"spec": {"unschedulable": True}})


def eviction(pod: Mapping[str, Any]) -> Object:
    meta = pod["metadata"]
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }


async def drain_node(client: Client, node: Object) -> DrainResult:
    """One drain round for ``node``: cordon it, then evict every pod that holds it up.

    Call it again until :attr:`DrainResult.drained`; see the module docstring.
    """
    name = node["metadata"]["name"]
    await cordon(client, node)
    pods, _ = await client.list_all(PODS, field_selector=f"spec.nodeName={name}")
    evicted = blocked = terminating = 0
    for pod in pods:
        if not holds_node(pod):
            continue
        if pod["metadata"].get("deletionTimestamp"):
            terminating += 1
            continue
        try:
            await client.create(PODS, eviction(pod), subresource="eviction")
        except NotFound:
            continue  # gone meanwhile
        except TooManyRequests:
            blocked += 1  # a PodDisruptionBudget allows no disruption now: try again later
            continue
        evicted += 1
    result = DrainResult(evicted=evicted, blocked=blocked, terminating=terminating)
    if not result.drained:
        log.info(
            "draining",
            extra={"node": name, "evicted": evicted, "blocked": blocked, "waiting": terminating},
        )
    return result
