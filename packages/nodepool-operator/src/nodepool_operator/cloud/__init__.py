"""The cloud port, its typed errors, and its two providers.

The operator speaks only :class:`CloudProvider`. :class:`SimulatedCloud` keeps its VMs, call
counts and injected faults in a SQLite file (tests, demos, local runs), and
:class:`SimulatedKubelets` is its VMs' side: their kubelets register the Nodes.
:class:`AwsCloud` talks to EC2, or to moto's EC2 server on loopback (:class:`MotoServer`,
tests and ``demo --cloud aws``), where :class:`MotoKubelets` plays the VMs' kubelets.
Everything AWS-specific lives in this package.
"""

from ._aws import SSM_IMAGE_PREFIX, AwsCloud, aws_environment_problems, max_pods
from ._bootstrap import (
    PROVIDER_ID_PREFIX,
    NodeBootstrap,
    instance_id_of,
    provider_id,
    registered_node,
)
from ._catalogue import CATALOGUE, GiB
from ._kubelet import KWOK_ANNOTATIONS, SimulatedKubelets
from ._metered import MeteredCloud
from ._moto import LaunchEnvironment, MotoServer, MotoUnavailable, seed_launch_environment
from ._moto_kubelet import AWS_PROVIDER_PREFIX, MotoKubelets, aws_provider_id
from ._port import (
    MAX_TOKEN_LENGTH,
    CapacityUnavailable,
    CloudError,
    CloudProvider,
    CreateRequest,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceState,
    InstanceType,
    InvalidRequest,
    LaunchSettings,
    PermissionDenied,
    QuotaExceeded,
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

__all__ = [
    "AWS_PROVIDER_PREFIX",
    "CATALOGUE",
    "KWOK_ANNOTATIONS",
    "MAX_TOKEN_LENGTH",
    "METHODS",
    "PROVIDER_ID_PREFIX",
    "SSM_IMAGE_PREFIX",
    "AwsCloud",
    "CapacityUnavailable",
    "CloudError",
    "CloudProvider",
    "CloudSnapshot",
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
    "LaunchEnvironment",
    "LaunchSettings",
    "MeteredCloud",
    "Method",
    "MotoKubelets",
    "MotoServer",
    "MotoUnavailable",
    "NodeBootstrap",
    "PermissionDenied",
    "QuotaExceeded",
    "SimulatedCloud",
    "SimulatedKubelets",
    "TransientCloudError",
    "aws_environment_problems",
    "aws_provider_id",
    "check_request",
    "instance_id_of",
    "max_pods",
    "provider_id",
    "registered_node",
    "seed_launch_environment",
]
