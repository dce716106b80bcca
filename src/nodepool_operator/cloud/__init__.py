"""The cloud port, its typed errors, and a simulated cloud that outlives the operator.

The operator speaks only :class:`CloudProvider`; tests, demos and the local run use
:class:`SimulatedCloud`, whose VMs, call counts and injected faults live in a SQLite file,
and :class:`SimulatedKubelets`, the VMs' side: their kubelets register the Nodes.
"""

from ._bootstrap import (
    PROVIDER_ID_PREFIX,
    NodeBootstrap,
    instance_id_of,
    provider_id,
    registered_node,
)
from ._catalogue import CATALOGUE, GiB
from ._kubelet import KWOK_ANNOTATIONS, SimulatedKubelets
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
    "KWOK_ANNOTATIONS",
    "METHODS",
    "PROVIDER_ID_PREFIX",
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
    "Method",
    "NodeBootstrap",
    "QuotaExceeded",
    "SimulatedCloud",
    "SimulatedKubelets",
    "TransientCloudError",
    "instance_id_of",
    "provider_id",
    "registered_node",
]
