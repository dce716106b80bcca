"""The test bed's stand-ins for what runs on VMs, and a local EC2 API: never part of a real run.

On a real cloud the kubelet on each new VM registers its Node; with the simulated cloud or
moto's EC2 server nothing would, so :class:`SimulatedKubelets` and :class:`MotoKubelets` play
those kubelets (kwok then heartbeats for them), and :class:`MotoServer` runs moto's EC2 API on
loopback. Used by tests, bench, ``nodepool-operator demo`` and ``run --cloud simulated``.

Why a package of its own: it needs ``kubeloop.envtest`` (the ``testing`` extra, through the
``demo`` extra) and, for moto, the ``aws-demo`` extra. The operator (``--cloud aws`` in an
image with no extras) must never import it; the import contract in ``.importlinter`` says so
and ``make lint`` checks it.
"""

from ._boot import KubeletBoot, read_boot
from ._kubelet import FIELD_MANAGER as KUBELET_FIELD_MANAGER
from ._kubelet import KWOK_ANNOTATIONS, SimulatedKubelets
from ._moto import LaunchEnvironment, MotoServer, MotoUnavailable, seed_launch_environment
from ._moto_kubelet import AWS_PROVIDER_PREFIX, MotoKubelets, aws_provider_id
from ._vms import moto_vms, simulated_vms

__all__ = [
    "AWS_PROVIDER_PREFIX",
    "KUBELET_FIELD_MANAGER",
    "KWOK_ANNOTATIONS",
    "KubeletBoot",
    "LaunchEnvironment",
    "MotoKubelets",
    "MotoServer",
    "MotoUnavailable",
    "SimulatedKubelets",
    "aws_provider_id",
    "moto_vms",
    "read_boot",
    "seed_launch_environment",
    "simulated_vms",
]
