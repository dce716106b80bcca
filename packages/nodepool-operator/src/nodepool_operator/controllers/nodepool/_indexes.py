"""The cache indexes the NodePool controller registers and reads: which pods are bound to a
Node (a scale-down judges them), which Nodes are a pool's (by its label).

The Autoscaler's ``controllers/_watch.py`` indexes the same two things under its own names;
they are kept apart here, in one place, until both controllers share one set.
"""

from __future__ import annotations

from typing import Final

from kubeloop import Object, Request
from nodepool_operator.controllers._scope import POOL_LABEL

POD_NODE_INDEX: Final = "nodepool:spec.nodeName"
NODE_POOL_INDEX: Final = "nodepool:pool"
NODE_CLASS_INDEX: Final = "nodepool:nodeClassRef"


def pod_node(pod: Object) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def node_pool(node: Object) -> list[str]:
    pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL)
    return [pool] if pool else []


def pool_of_node(node: Object) -> list[Request]:
    """Nodes carry no ownerReference to the pool; their pool label names it."""
    return [Request(pool) for pool in node_pool(node)]


def node_class_of_pool(pool: Object) -> list[str]:
    """The AwsNodeClass a NodePool names (``spec.nodeClassRef.name``), if any."""
    ref = (pool.get("spec") or {}).get("nodeClassRef") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    return [name] if isinstance(name, str) and name else []
