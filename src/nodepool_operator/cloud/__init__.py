"""The cloud port, its typed errors, and its two providers.

The operator speaks only :class:`CloudProvider`. :class:`SimulatedCloud` keeps its VMs, call
counts and injected faults in a SQLite file (tests, demos, local runs); :class:`AwsCloud`
talks to EC2, or to moto's EC2 server on loopback (:class:`MotoServer`, tests and
``demo --cloud aws``). Everything AWS-specific lives in this package.
"""

from ._aws import SSM_IMAGE_PREFIX, AwsCloud, aws_environment_problems, max_pods
from ._catalogue import CATALOGUE, GiB
from ._moto import LaunchEnvironment, MotoServer, MotoUnavailable, seed_launch_environment
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
    "CATALOGUE",
    "MAX_TOKEN_LENGTH",
    "METHODS",
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
    "Method",
    "MotoServer",
    "MotoUnavailable",
    "PermissionDenied",
    "QuotaExceeded",
    "SimulatedCloud",
    "TransientCloudError",
    "aws_environment_problems",
    "check_request",
    "max_pods",
    "seed_launch_environment",
]
