"""The intent for one VM: its name, idempotency token and create request, fixed before the
cloud is asked, so that asking again (after a crash, a timeout, a lost response) returns the
same VM instead of a second one (CAPA #5794, #6131).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection
from typing import Final

from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import CreateRequest
from nodepool_operator.controllers._scope import POOL_LABEL

#: VMs carry the pool's uid as well as its name: a re-created pool of the same name is
#: another pool, and garbage collection and deletion act by uid.
POOL_UID_TAG: Final = "kubeloop.dev/nodepool-uid"
#: The one image every pool boots; NodePool has no image field.
NODE_IMAGE: Final = "kubeloop-node"
#: Recorded before the create call; replaced by the cloud's state once it answers.
CREATING: Final = "creating"
#: Recorded before a VM and its Node are removed, so a crash resumes the removal.
DELETING: Final = "deleting"

_SUFFIX_HEX = 5
# A Node name is also its kubernetes.io/hostname label value, at most 63 characters.
_MAX_PREFIX = 63 - 1 - _SUFFIX_HEX


def pool_tags(pool_name: str, pool_uid: str) -> dict[str, str]:
    return {POOL_LABEL: pool_name, POOL_UID_TAG: pool_uid}


def idempotency_token(pool_uid: str, name: str) -> str:
    """Unique per pool incarnation and intent: each intent gets a fresh random name, so a
    scaled-down-then-up pool does not get a terminated VM back for a new intent (if the
    cloud ever returns one, the intent is dropped and another made)."""
    return f"{pool_uid}/{name}"


def create_request(
    *, pool_name: str, pool_uid: str, instance_type: str, name: str, user_data: str = ""
) -> CreateRequest:
    """The request for the VM recorded as ``name``; the same every time it is asked for the
    same spec (``user_data``, how its kubelet registers, follows the pool's labels and
    taints; a create repeated after those changed gets :class:`IdempotencyMismatch`)."""
    return CreateRequest(
        name=name,
        instance_type=instance_type,
        image=NODE_IMAGE,
        idempotency_token=idempotency_token(pool_uid, name),
        tags=pool_tags(pool_name, pool_uid),
        user_data=user_data,
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
