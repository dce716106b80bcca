"""The Pod and Node cache indexes the NodePool and Autoscaler controllers share: which pods
are bound to a Node (a scale-down judges them, a node's room is what they leave), which Nodes
are a pool's (by its label); and which pool an Autoscaler scales (the NodePool controller
gates the new nodes of a pool that one scales: ``_reserve``, unless that one is being deleted).

Both controllers read the same Pod informer and the same (scope-selected) Node informer, so one
index each serves both; :func:`register` is called by each controller and files every object
once, whichever registers first (the store keeps one function per index name). The functions
read whatever the API holds and never assume a shape: a malformed object is filed nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from kubeloop import NODES, PODS, Cache, Request
from nodepool_operator.controllers._scope import POOL_LABEL

__all__ = [
    "NODE_POOL",
    "POD_NODE",
    "autoscaler_pool",
    "deleting",
    "node_pool",
    "pod_node",
    "pool_of_node",
    "register",
    "scaled",
]

#: On the Pod store: the name of the Node a pod is bound to.
POD_NODE: Final = "nodepool-operator/pod-node"
#: On the Node store: the NodePool a Node is in (its pool label).
NODE_POOL: Final = "nodepool-operator/node-pool"


def _mapping(obj: object, key: str) -> Mapping[str, object]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def pod_node(pod: object) -> list[str]:
    name = _mapping(pod, "spec").get("nodeName")
    return [name] if isinstance(name, str) and name else []


def node_pool(node: object) -> list[str]:
    pool = _mapping(_mapping(node, "metadata"), "labels").get(POOL_LABEL)
    return [pool] if isinstance(pool, str) and pool else []


def autoscaler_pool(obj: object) -> list[str]:
    """The NodePool an Autoscaler scales (its ``spec.nodePoolRef.name``)."""
    name = _mapping(_mapping(obj, "spec"), "nodePoolRef").get("name")
    return [name] if isinstance(name, str) and name else []


def deleting(obj: object) -> bool:
    """Its ``metadata.deletionTimestamp`` is set."""
    return bool(_mapping(obj, "metadata").get("deletionTimestamp"))


def generation(obj: object) -> int:
    """Its ``metadata.generation`` (0 when absent)."""
    value = _mapping(obj, "metadata").get("generation")
    return value if isinstance(value, int) else 0


def scaled(pool: str, autoscalers: Iterable[object]) -> bool:
    """Whether an Autoscaler among ``autoscalers`` scales ``pool`` and will lift the gates of
    its new nodes. One being deleted does not count: its controller plans nothing more and
    lifts nothing, so a node gated for it would wait for the backstop (``_reserve``)."""
    return any(pool in autoscaler_pool(obj) and not deleting(obj) for obj in autoscalers)


def pool_of_node(node: object) -> list[Request]:
    """Nodes carry no ownerReference to the pool; their pool label names it."""
    return [Request(pool) for pool in node_pool(node)]


def register(cache: Cache, node_selector: str) -> None:
    """Add both indexes to the cache's Pod informer and to its Node informer for
    ``node_selector`` (the operator's scope); a second call adds nothing."""
    cache.informer(PODS).add_index(POD_NODE, pod_node)
    cache.informer(NODES, label_selector=node_selector).add_index(NODE_POOL, node_pool)
