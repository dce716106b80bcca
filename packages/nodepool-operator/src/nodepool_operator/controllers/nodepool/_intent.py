"""The intent for one VM: its name, idempotency token and create request, fixed before the
cloud is asked, so that asking again (after a crash, a timeout, a lost response) returns the
same VM instead of a second one (CAPA #5794, #6131).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Final

from nodepool_operator.api import AwsNodeClassSpec, InstanceRecord
from nodepool_operator.cloud import CreateRequest, MarketType, Subnet
from nodepool_operator.controllers._launch import launch_settings, launch_tags
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.nodepool._launch_record import CLASS_HASH_TAG, class_hash

#: VMs carry the pool's uid as well as its name: a re-created pool of the same name is
#: another pool, and garbage collection and deletion act by uid.
POOL_UID_TAG: Final = "kubeloop.dev/nodepool-uid"
#: The image of a pool without a node class (NodePool has no image field): enough for the
#: simulated cloud; on EC2 a pool names an AwsNodeClass with its AMI.
NODE_IMAGE: Final = "kubeloop-node"
#: Recorded before the create call; replaced by the cloud's state once it answers.
CREATING: Final = "creating"
#: Recorded before a VM and its Node are removed, so a crash resumes the removal.
DELETING: Final = "deleting"

_SUFFIX_HEX = 5
# 160 bits of sha256: no two intents collide, and "np-" + 40 is well within 64 characters.
_TOKEN_HEX = 40
# A Node name is also its kubernetes.io/hostname label value, at most 63 characters.
_MAX_PREFIX = 63 - 1 - _SUFFIX_HEX


def pool_tags(pool_name: str, pool_uid: str) -> dict[str, str]:
    return {POOL_LABEL: pool_name, POOL_UID_TAG: pool_uid}


def idempotency_token(pool_uid: str, name: str) -> str:
    """Unique per pool incarnation and intent: each intent gets a fresh random name, so a
    scaled-down-then-up pool does not get a terminated VM back for a new intent (if the
    cloud ever returns one, the intent is dropped and another made).

    A hash of ``<pool uid>/<name>``, not the text itself: that is up to 100 characters, and
    EC2 takes a ClientToken of at most 64 (:data:`~nodepool_operator.cloud.MAX_TOKEN_LENGTH`).
    """
    digest = hashlib.sha256(f"{pool_uid}/{name}".encode()).hexdigest()
    return f"np-{digest[:_TOKEN_HEX]}"


def create_request(
    *,
    pool_name: str,
    pool_uid: str,
    instance_type: str,
    name: str,
    user_data: str = "",
    node_class: AwsNodeClassSpec | None = None,
    capacity_type: MarketType = "on-demand",
    subnet: Subnet | None = None,
    security_groups: Sequence[str] | None = None,
) -> CreateRequest:
    """The request for the VM recorded as ``name``; the same every time it is asked for the
    same spec (``user_data``, how its kubelet registers, follows the pool's labels and
    taints; a create repeated after those changed gets :class:`IdempotencyMismatch`, as it
    does after an edit of the node class: the controller then adopts the VM it finds).

    With a node class, the VM boots its AMI in its network with its tags (and, when the class
    names a cluster, the cluster's ownership tags); with amiFamily
    Custom its ``userData`` template (rendered for this VM) replaces ``user_data`` (other
    families merge it into ``user_data``: :mod:`._userdata`).

    ``subnet``: the one chosen for this VM (:mod:`._zone_choice`), with its zone; None: the
    class's subnets as they are (no zones to choose from). ``security_groups``: those the
    class's selector terms found; None: its ids.
    """
    launch = launch_settings(node_class)
    if subnet is not None:
        launch = replace(launch, subnets=(subnet.id,))
    if security_groups is not None:
        launch = replace(launch, security_groups=tuple(security_groups))
    return CreateRequest(
        name=name,
        instance_type=instance_type,
        image=node_class.image if node_class is not None else NODE_IMAGE,
        idempotency_token=idempotency_token(pool_uid, name),
        # the pool's tags last: a class cannot take a VM out of its pool; the launch's
        # record for drift (:mod:`._launch_record`) with them
        tags=launch_tags(
            node_class,
            {**pool_tags(pool_name, pool_uid), CLASS_HASH_TAG: class_hash(node_class)},
        ),
        launch=launch,
        user_data=_user_data(user_data, node_class, name, pool_name, instance_type),
        capacity_type=capacity_type,
        zone=subnet.zone if subnet is not None else "",
    )


def new_intents(
    pool_name: str,
    count: int,
    taken: Collection[str],
    token_hex: Callable[[int], str] = secrets.token_hex,
) -> list[InstanceRecord]:
    """``count`` records in state ``creating``, named ``<pool>-<5 hex>``, none in ``taken``."""
    prefix = pool_name[:_MAX_PREFIX].rstrip("-.")
    names: list[str] = []
    while len(names) < count:
        name = f"{prefix}-{token_hex(3)[:_SUFFIX_HEX]}"
        if name not in taken and name not in names:
            names.append(name)
    return [InstanceRecord(name=name, state=CREATING) for name in names]


def _user_data(
    bootstrap: str,
    node_class: AwsNodeClassSpec | None,
    name: str,
    pool_name: str,
    instance_type: str,
) -> str:
    if node_class is None or node_class.user_data is None or node_class.ami_family != "Custom":
        return bootstrap  # none, or merged into the bootstrap already (AL2023, Bottlerocket)
    rendered = node_class.render_user_data(
        node_name=name, pool_name=pool_name, instance_type=instance_type
    )
    return rendered or ""
