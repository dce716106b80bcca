"""The cloud port, its typed errors, and a simulated cloud that outlives the operator.

The operator speaks only :class:`CloudProvider`; tests, demos and the local run use
:class:`SimulatedCloud`, whose VMs, call counts and injected faults live in a SQLite file.
"""

from ._catalogue import CATALOGUE, GiB
from ._metered import MeteredCloud
from ._port import (
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
    QuotaExceeded,
    TransientCloudError,
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
    "METHODS",
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
    "MeteredCloud",
    "Method",
    "QuotaExceeded",
    "SimulatedCloud",
    "TransientCloudError",
]
