"""A pool's or Instance's launch settings: the AwsNodeClass its ``spec.nodeClassRef`` names,
read live just before a create (creates are rare; no informer holds node classes).

A missing or unusable class is reported on the referencing object and retried with the
controller's backoff: creating the class is not a spec change of the pool, so waiting for
one would wait for ever.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar

from kubeloop import Cache, Client, NotFound, Object
from nodepool_operator.api import (
    AWSNODECLASSES,
    AwsNodeClassSpec,
    InvalidField,
    NodeClassRef,
    parse_nodeclass,
)
from nodepool_operator.cloud import (
    CloudError,
    CloudProvider,
    InvalidRequest,
    LaunchSettings,
    SelectorTerm,
    Subnet,
    cluster_tags,
)
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


def subnet_terms(spec: AwsNodeClassSpec | None) -> tuple[SelectorTerm, ...]:
    """The node class's subnets as selector terms (ids are terms by id); none: the
    cloud's default subnets."""
    if spec is None:
        return ()
    if spec.subnet_ids:
        return tuple(SelectorTerm(id=i) for i in spec.subnet_ids)
    return tuple(
        SelectorTerm(tags=tuple(sorted((t.tags or {}).items())), id=t.id or "")
        for t in spec.subnet_selector_terms
    )


def group_terms(spec: AwsNodeClassSpec | None) -> tuple[SelectorTerm, ...]:
    """The node class's security group selector terms (empty when it lists ids, or none)."""
    if spec is None:
        return ()
    return tuple(
        SelectorTerm(tags=tuple(sorted((t.tags or {}).items())), id=t.id or "", name=t.name or "")
        for t in spec.security_group_selector_terms
    )


def check_subnets(spec: AwsNodeClassSpec | None, found: Sequence[Subnet]) -> None:
    """Refuse selector terms that select no subnet (launching in the default network
    instead would put the VM outside the cluster's VPC).

    Raises:
        InvalidRequest: naming the field (reason InvalidSubnet).
    """
    if spec is not None and spec.subnet_selector_terms and not found:
        raise InvalidRequest(
            "spec.subnetSelectorTerms of the node class select no subnet", reason="InvalidSubnet"
        )


async def selected_groups(
    list_groups: Callable[[tuple[SelectorTerm, ...]], Awaitable[Sequence[str]]],
    spec: AwsNodeClassSpec | None,
) -> tuple[str, ...] | None:
    """The security groups the class's selector terms find (None: it has none; its ids,
    if any, are in :func:`launch_settings`), listed by ``list_groups`` (the cloud port's
    ``security_groups``, or a cache of it).

    Raises:
        InvalidRequest: terms that select no group, naming the field.
    """
    terms = group_terms(spec)
    if not terms:
        return None
    found = await list_groups(terms)
    if not found:
        raise InvalidRequest(
            "spec.securityGroupSelectorTerms of the node class select no security group",
            reason="InvalidSecurityGroup",
        )
    return tuple(found)


async def resolved_launch(cloud: CloudProvider, spec: AwsNodeClassSpec | None) -> LaunchSettings:
    """:func:`launch_settings` with the class's selector terms read from the cloud (ids
    sorted), for a launch that chooses no zone itself (an Instance: the cloud picks one of
    the subnets by its token)."""
    launch = launch_settings(spec)
    if spec is not None and spec.subnet_selector_terms:
        found = await cloud.subnets(subnet_terms(spec))
        check_subnets(spec, found)
        launch = replace(launch, subnets=tuple(sorted(s.id for s in found)))
    groups = await selected_groups(cloud.security_groups, spec)
    if groups is not None:
        launch = replace(launch, security_groups=groups)
    return launch
