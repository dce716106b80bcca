"""The operator's API, group ``kubeloop.dev``, version ``v1alpha1``: NodePool, Autoscaler,
Instance and AwsNodeClass as Python types, the CRDs generated from them, and typed parsing
for controllers.

>>> pool = parse_nodepool({"spec": {"instanceType": "m5.large"}})
>>> (pool.spec.min_nodes, pool.spec.max_nodes, pool.status.scale_operation)
(0, 10, 'inactive')
>>> to_api(pool.spec)["maxNodes"]
10

The types are written with :mod:`kubeloop.crd` (markers, CEL rules, parsing);
``CUSTOM_RESOURCES`` serves them. ``config/crd/`` holds the generated CRDs; ``make manifests``
regenerates them (``kubeloop manifests nodepool_operator.api`` writes the same YAML) and a
unit test fails when they are stale.
"""

from kubeloop.crd import (
    Condition,
    InvalidField,
    ObjectMeta,
    format_duration,
    parse_duration,
    to_api,
)
from nodepool_operator.api._autoscaler import (
    MAX_UNREMOVABLE_NODES,
    MIN_FREQUENCY,
    Autoscaler,
    AutoscalerSpec,
    AutoscalerStatus,
    NodePoolRef,
    UnremovableNode,
    parse_autoscaler,
    parse_autoscaler_status,
)
from nodepool_operator.api._crds import (
    AUTOSCALER,
    AUTOSCALERS,
    AWSNODECLASS,
    AWSNODECLASSES,
    CATEGORY,
    CUSTOM_RESOURCES,
    GROUP,
    INSTANCE,
    INSTANCES,
    NODEPOOL,
    NODEPOOLS,
    VERSION,
    crds,
)
from nodepool_operator.api._instance import (
    Instance,
    InstanceSpec,
    InstanceState,
    InstanceStatus,
    parse_instance,
)
from nodepool_operator.api._nodeclass import (
    USER_DATA_VARIABLES,
    AwsNodeClass,
    AwsNodeClassSpec,
    EksCluster,
    KubeletOptions,
    NodeClassRef,
    parse_nodeclass,
)
from nodepool_operator.api._nodepool import (
    DEGRADED,
    DELETING_CONDITION,
    MAX_POOL_NODES,
    MIN_DRAIN_TIMEOUT,
    READY,
    RESERVED_LABEL_PREFIX,
    SCALING,
    Budget,
    Disruption,
    DisruptionBlockers,
    DisruptionReason,
    DisruptionRepair,
    DisruptionStatus,
    InstanceRecord,
    NodePool,
    NodePoolSpec,
    NodePoolStatus,
    ScaleOperation,
    Taint,
    TaintEffect,
    parse_nodepool,
)

__all__ = [
    "AUTOSCALER",
    "AUTOSCALERS",
    "AWSNODECLASS",
    "AWSNODECLASSES",
    "CATEGORY",
    "CUSTOM_RESOURCES",
    "DEGRADED",
    "DELETING_CONDITION",
    "GROUP",
    "INSTANCE",
    "INSTANCES",
    "MAX_POOL_NODES",
    "MAX_UNREMOVABLE_NODES",
    "MIN_DRAIN_TIMEOUT",
    "MIN_FREQUENCY",
    "NODEPOOL",
    "NODEPOOLS",
    "READY",
    "RESERVED_LABEL_PREFIX",
    "SCALING",
    "USER_DATA_VARIABLES",
    "VERSION",
    "Autoscaler",
    "AutoscalerSpec",
    "AutoscalerStatus",
    "AwsNodeClass",
    "AwsNodeClassSpec",
    "Budget",
    "Condition",
    "Disruption",
    "DisruptionBlockers",
    "DisruptionReason",
    "DisruptionRepair",
    "DisruptionStatus",
    "EksCluster",
    "Instance",
    "InstanceRecord",
    "InstanceSpec",
    "InstanceState",
    "InstanceStatus",
    "InvalidField",
    "KubeletOptions",
    "NodeClassRef",
    "NodePool",
    "NodePoolRef",
    "NodePoolSpec",
    "NodePoolStatus",
    "ObjectMeta",
    "ScaleOperation",
    "Taint",
    "TaintEffect",
    "UnremovableNode",
    "crds",
    "format_duration",
    "parse_autoscaler",
    "parse_autoscaler_status",
    "parse_duration",
    "parse_instance",
    "parse_nodeclass",
    "parse_nodepool",
    "to_api",
]
