"""A real local control plane for tests and development (kubeloop's envtest).

>>> from kubeloop.envtest import ControlPlane
>>> with ControlPlane() as cp:           # doctest: +SKIP
...     print(cp.kubeconfig)
"""

import importlib.util

if importlib.util.find_spec("cryptography") is None:  # the certificates are made in Python
    raise ImportError(
        "kubeloop.envtest needs the 'testing' extra: pip install 'kubeloop[testing]'",
        name="cryptography",
    )

from kubeloop.envtest._assets import Assets, find_assets
from kubeloop.envtest._controlplane import (
    DEFAULT_CONTROLLERS,
    SCHEDULER_SCORINGS,
    ControlPlane,
    ControlPlaneOptions,
)
from kubeloop.envtest._errors import AssetsError, EnvtestError, StartError
from kubeloop.envtest._nodes import (
    KWOK_NODE_ANNOTATIONS,
    NODE_LEASE_NAMESPACE,
    node_manifest,
    silenced_lease_patch,
)
from kubeloop.envtest._process import free_port
from kubeloop.envtest._rest import RestClient, RestError

__all__ = [
    "DEFAULT_CONTROLLERS",
    "KWOK_NODE_ANNOTATIONS",
    "NODE_LEASE_NAMESPACE",
    "SCHEDULER_SCORINGS",
    "Assets",
    "AssetsError",
    "ControlPlane",
    "ControlPlaneOptions",
    "EnvtestError",
    "RestClient",
    "RestError",
    "StartError",
    "find_assets",
    "free_port",
    "node_manifest",
    "silenced_lease_patch",
]
