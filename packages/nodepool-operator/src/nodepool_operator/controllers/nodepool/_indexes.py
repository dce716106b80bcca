"""The cache index only the NodePool controller registers and reads: which pools name an
AwsNodeClass (a class's new spec gives them a fresh pass). The Pod-by-node and Node-by-pool
indexes it shares with the Autoscaler are in :mod:`nodepool_operator.controllers._indexes`.
"""

from __future__ import annotations

from typing import Final

from kubeloop import Object

NODE_CLASS_INDEX: Final = "nodepool:nodeClassRef"


def node_class_of_pool(pool: Object) -> list[str]:
    """The AwsNodeClass a NodePool names (``spec.nodeClassRef.name``), if any."""
    ref = (pool.get("spec") or {}).get("nodeClassRef") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    return [name] if isinstance(name, str) and name else []
