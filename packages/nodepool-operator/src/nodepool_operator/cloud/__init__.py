"""The cloud port, its typed errors, and its two providers.

The operator speaks only :class:`CloudProvider`. :class:`SimulatedCloud` keeps its VMs, call
counts and injected faults in a SQLite file (tests, demos, local runs). :class:`AwsCloud` talks
to EC2, or to moto's EC2 server on loopback. What plays the VMs' kubelets for either, and
moto's server itself, are test-bed parts: :mod:`nodepool_operator.testbed`, which the operator
never imports. Everything AWS-specific the operator uses lives in this package.
"""

from ._aws import (
    CLUSTER_TAG_PREFIX,
    EKS_CLUSTER_TAG,
    SSM_IMAGE_PREFIX,
    AwsCloud,
    aws_environment_problems,
    cluster_tags,
    max_pods,
)
from ._bootstrap import (
    PROVIDER_ID_PREFIX,
    NodeBootstrap,
    instance_id_of,
    provider_id,
    registered_node,
)
from ._bottlerocket import bottlerocket_user_data
from ._catalogue import CATALOGUE, PRICES, GiB
from ._metered import MeteredCloud
from ._nodeconfig import (
    DEFAULT_EVICTION_HARD,
    NODECONFIG_API_VERSION,
    NODECONFIG_MEDIA_TYPE,
    KubeletSettings,
    al2023_user_data,
    kube_reserved,
    kubelet_may_set_label,
    kubelet_settings,
    node_config,
    prefix_delegation_max_pods,
)
from ._port import (
    MAX_TOKEN_LENGTH,
    NVIDIA_GPU,
    CapacityUnavailable,
    CloudError,
    CloudProvider,
    ClusterInfo,
    CreateRequest,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceState,
    InstanceType,
    InvalidRequest,
    LaunchRefused,
    LaunchSettings,
    MarketType,
    PermissionDenied,
    QuotaExceeded,
    RootVolume,
    TransientCloudError,
    check_request,
)
from ._simulated import (
    METHODS,
    CloudSnapshot,
    FailNext,
    FailRandomly,
    FaultPlan,
    Method,
    SimulatedCloud,
)
from ._sqs import LONG_POLL_SECONDS, QueueMessage, SqsQueue

__all__ = [
    "CATALOGUE",
    "CLUSTER_TAG_PREFIX",
    "DEFAULT_EVICTION_HARD",
    "EKS_CLUSTER_TAG",
    "LONG_POLL_SECONDS",
    "MAX_TOKEN_LENGTH",
    "METHODS",
    "NODECONFIG_API_VERSION",
    "NODECONFIG_MEDIA_TYPE",
    "NVIDIA_GPU",
    "PRICES",
    "PROVIDER_ID_PREFIX",
    "SSM_IMAGE_PREFIX",
    "AwsCloud",
    "CapacityUnavailable",
    "CloudError",
    "CloudProvider",
    "CloudSnapshot",
    "ClusterInfo",
    "CreateRequest",
    "FailNext",
    "FailRandomly",
    "FaultPlan",
    "GiB",
    "IdempotencyMismatch",
    "Instance",
    "InstanceNotFound",
    "InstanceState",
    "InstanceType",
    "InvalidRequest",
    "KubeletSettings",
    "LaunchRefused",
    "LaunchSettings",
    "MarketType",
    "MeteredCloud",
    "Method",
    "NodeBootstrap",
    "PermissionDenied",
    "QueueMessage",
    "QuotaExceeded",
    "RootVolume",
    "SimulatedCloud",
    "SqsQueue",
    "TransientCloudError",
    "al2023_user_data",
    "aws_environment_problems",
    "bottlerocket_user_data",
    "check_request",
    "cluster_tags",
    "instance_id_of",
    "kube_reserved",
    "kubelet_may_set_label",
    "kubelet_settings",
    "max_pods",
    "node_config",
    "prefix_delegation_max_pods",
    "provider_id",
    "registered_node",
]
