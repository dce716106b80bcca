"""A pool's or Instance's launch settings: the AwsNodeClass its ``spec.nodeClassRef`` names,
read live just before a create (creates are rare; no informer holds node classes).

A missing or unusable class is reported on the referencing object and retried with the
controller's backoff: creating the class is not a spec change of the pool, so waiting for
one would wait for ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from kubeloop import Cache, Client, NotFound, Object
from nodepool_operator.api import (
    AWSNODECLASSES,
    AwsNodeClassSpec,
    InvalidField,
    NodeClassRef,
    parse_nodeclass,
)
from nodepool_operator.cloud import CloudError, LaunchSettings, cluster_tags
from nodepool_operator.controllers._node_resources import root_volume


class NodeClassUnavailable(CloudError):
    """The referenced AwsNodeClass does not exist, or breaks its schema. Retryable: the
    class may be created or fixed at any moment (default ``retry_after`` 10 s)."""

    retryable: ClassVar[bool] = True
    default_retry_after: ClassVar[float | None] = 10.0


async def node_class(
    client: Client, ref: NodeClassRef | None, *, cache: Cache | None = None
) -> AwsNodeClassSpec | None:
    """The referenced class's spec; None when there is no reference. Read live, or from
    ``cache`` when given (the Autoscaler reads it on every plan; a create reads it live).

    Raises:
        NodeClassUnavailable: naming the class and what is wrong with it.
    """
    if ref is None:
        return None
    obj: Object | None
    if cache is not None:
        obj = await cache.get(AWSNODECLASSES, ref.name)
    else:
        try:
            obj = await client.get(AWSNODECLASSES, ref.name)
        except NotFound:
            obj = None
    if obj is None:
        raise NodeClassUnavailable(f"spec.nodeClassRef: AwsNodeClass {ref.name!r} not found")
    try:
        return parse_nodeclass(obj).spec
    except InvalidField as err:
        raise NodeClassUnavailable(
            f"spec.nodeClassRef: AwsNodeClass {ref.name!r} is invalid: {err}"
        ) from err


def launch_settings(spec: AwsNodeClassSpec | None) -> LaunchSettings:
    """The port's launch settings from a node class (its user data is rendered per VM by the
    caller, into :attr:`~nodepool_operator.cloud.CreateRequest.user_data`)."""
    if spec is None:
        return LaunchSettings()
    return LaunchSettings(
        subnets=tuple(spec.subnet_ids),
        security_groups=tuple(spec.security_group_ids),
        instance_profile=spec.instance_profile,
        root_volume=root_volume(spec),
    )


def launch_tags(spec: AwsNodeClassSpec | None, own: Mapping[str, str]) -> dict[str, str]:
    """The tags a VM (and its volumes) is launched with: the class's, the cluster's ownership
    tags when the class names a cluster, then ``own`` (the owner's: pool or Instance). Later
    ones win, so a class can neither take a VM from its owner nor from its cluster."""
    if spec is None:
        return dict(own)
    owned = cluster_tags(spec.cluster.name) if spec.cluster is not None else {}
    return {**spec.tags, **owned, **own}
