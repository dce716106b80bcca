"""What a pool's VM records of its launch, in the create call itself (a tag no later call
can lose), for drift (:mod:`._drift`): :data:`CLASS_HASH_TAG`, a hash of the node class's
fields that a running node cannot be brought in line with (its family, cluster, kubelet
options, root volume, security groups, instance profile, user data, tags), as Karpenter's
nodeclass hash annotation. Pure.

The AMI selector and the subnets are not hashed: the AMI is compared as resolved (EC2's
ImageId against the class's image now), and a subnet added to a class must not roll every
node. The pool's labels and taints are not either: they are applied to running Nodes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from nodepool_operator.api import AwsNodeClassSpec, to_api

__all__ = ["CLASS_HASH_TAG", "HASH_VERSION", "class_hash"]

#: The VM's tag recording its node class's hash at launch.
CLASS_HASH_TAG: Final = "node.kubeloop.dev/nodeclass-hash"
#: Bumped when the fields hashed change, so nodes hashed the old way are not taken as drifted.
HASH_VERSION: Final = "v1"
#: The node class fields a launch reads and a running node cannot follow (API names).
_HASHED: Final = (
    "amiFamily",
    "cluster",
    "kubelet",
    "rootVolume",
    "securityGroupIds",
    "instanceProfile",
    "userData",
    "tags",
)


def class_hash(spec: AwsNodeClassSpec | None) -> str:
    """``<version>:<hex>`` of the class's launch fields (no class: the empty class). Fields
    left empty are left out, so a field added later with an empty default changes nothing."""
    body: dict[str, Any] = {}
    if spec is not None:
        api = to_api(spec)
        body = {k: api[k] for k in _HASHED if api.get(k) not in (None, "", [], {})}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"{HASH_VERSION}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"
