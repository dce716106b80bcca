"""The user data a pool's VM boots with: how its kubelet joins the cluster, by the node
class's ``amiFamily``.

- **AL2023** (the default): a nodeadm ``NodeConfig`` (:mod:`nodepool_operator.cloud`'s
  ``al2023_user_data``) with the cluster's coordinates (the class's, completed by EKS
  DescribeCluster through the cloud port), the kubelet settings of the instance type (the
  ones the Autoscaler's node template subtracts: :mod:`.._node_resources`), and the
  pool's labels and taints, after the parts of the class's own ``userData``.
- **Bottlerocket**: the same content as TOML ``[settings.kubernetes]``, merged into the
  class's own TOML ``userData`` (``bottlerocket_user_data``).
- **Custom**: the class's ``userData`` alone (rendered by :func:`._intent.create_request`).
- **No node class** (the simulated cloud): the simulated kubelets' own settings
  (:class:`~nodepool_operator.cloud.NodeBootstrap`), the VM's name being its Node's.
"""

from __future__ import annotations

from collections.abc import Mapping

from nodepool_operator.api import AwsNodeClassSpec, NodePool
from nodepool_operator.cloud import (
    CloudProvider,
    ClusterInfo,
    InstanceType,
    InvalidRequest,
    MarketType,
    al2023_user_data,
    bottlerocket_user_data,
    node_config,
)
from nodepool_operator.controllers._launch import NodeClassUnavailable
from nodepool_operator.controllers._node_manifest import node_bootstrap, pool_shape
from nodepool_operator.controllers._node_resources import class_kubelet
from nodepool_operator.controllers._reserve import reservation_taint


async def pool_user_data(
    cloud: CloudProvider,
    pool: NodePool,
    name: str,
    instance_type: InstanceType | None,
    node_class: AwsNodeClassSpec | None,
    *,
    run_labels: Mapping[str, str] | None = None,
    type_name: str | None = None,
    capacity_type: MarketType | None = None,
    gated: bool = False,
) -> str:
    """The user data of the VM recorded as ``name`` (the same for the same pool, type and
    class, as the idempotency token requires). ``type_name``: the type it is launched as,
    when not the pool's ``instanceType`` (a fallback); ``capacity_type``: its market, when
    not the pool's (a spot create launched on-demand); ``gated``: an Autoscaler scales the
    pool, so the node registers with the reservation taint (``_reserve``).

    Raises:
        NodeClassUnavailable: the class cannot bootstrap a node (no cluster, a userData
            that cannot be merged: MIME without parts for AL2023, not TOML for Bottlerocket).
        InvalidRequest: the type is not in the cloud's catalogue (its max pods unknown).
        CloudError: DescribeCluster failed.
    """
    type_name = type_name or pool.spec.instance_type
    if node_class is None:
        return node_bootstrap(
            pool,
            name,
            type_name,
            instance_type,
            run_labels=run_labels,
            capacity_type=capacity_type,
            gated=gated,
        ).encode()
    if node_class.ami_family == "Custom":
        return ""  # the class's userData, rendered per VM by create_request
    if instance_type is None:
        raise InvalidRequest(
            f"spec.instanceType: {type_name!r} is not in the cloud's catalogue, so its "
            "kubelet's max pods and reservations are unknown",
            reason="InvalidInstanceType",
        )
    cluster = await _cluster(cloud, node_class)
    kubelet = class_kubelet(node_class, instance_type)
    shape = pool_shape(
        pool,
        instance_type,
        scope_labels=run_labels,
        instance_type_name=type_name,
        node_class=node_class,
        capacity_type=capacity_type,
    )
    taints = shape.api_taints()
    if gated or pool.spec.reserve_new_nodes:
        taints.append(reservation_taint(name))
    own = node_class.render_user_data(
        node_name=name, pool_name=pool.metadata.name or "", instance_type=type_name
    )
    try:
        if node_class.ami_family == "Bottlerocket":
            return bottlerocket_user_data(
                cluster, kubelet, labels=shape.labels, taints=taints, user_data=own
            )
        config = node_config(cluster, kubelet, labels=shape.labels, taints=taints)
        return al2023_user_data(config, own)
    except ValueError as err:
        raise NodeClassUnavailable(f"spec.nodeClassRef: userData: {err}") from err


async def _cluster(cloud: CloudProvider, node_class: AwsNodeClassSpec) -> ClusterInfo:
    given = node_class.cluster
    if given is None:
        raise NodeClassUnavailable(
            f"spec.nodeClassRef: amiFamily {node_class.ami_family} needs spec.cluster.name "
            "(the EKS cluster the nodes join)"
        )
    if given.complete:
        found = None
    else:
        found = await cloud.describe_cluster(given.name)
    return ClusterInfo(
        name=given.name,
        endpoint=given.endpoint or (found.endpoint if found else ""),
        certificate_authority=given.certificate_authority
        or (found.certificate_authority if found else ""),
        service_cidr=given.service_cidr or (found.service_cidr if found else ""),
    )
