"""The instance types the simulated cloud offers, loosely after EC2's m5/c5/r5 families and
its g4dn/g5 NVIDIA types.

Pod capacities follow EC2's ENI-based max-pods for the real types. ``mem96.large`` is
not an EC2 type: it exists for the seeds' example of a 96 GiB node holding 28 GiB pods.
"""

from __future__ import annotations

from ._port import InstanceType

GiB = 1024**3

_ROOT_DISK = 100 * GiB  # one root volume size for all types: disk is not what we scale on


#: EC2's NVIDIA types as (name, vCPUs, GiB, ENIs, addresses per ENI, GPUs): one T4, one
#: A10G, four T4s.
_GPU_TYPES = (
    ("g4dn.xlarge", 4, 16, 3, 10, 1),
    ("g5.xlarge", 4, 16, 4, 15, 1),
    ("g4dn.12xlarge", 48, 192, 8, 30, 4),
)


def _type(
    name: str, cpu: int, memory_gib: int, enis: int = 0, ips: int = 0, gpus: int = 0
) -> InstanceType:
    return InstanceType(
        name=name,
        cpu_cores=cpu,
        memory_bytes=memory_gib * GiB,
        disk_bytes=_ROOT_DISK,
        # EKS's ENI-based max pods (cloud.max_pods); 110, the kubelet's default, without ENIs
        pods=enis * (ips - 1) + 2 if enis else 110,
        enis=enis,
        ips_per_eni=ips,
        gpus=gpus,
    )


CATALOGUE: tuple[InstanceType, ...] = (
    _type("c5.large", 2, 4, 3, 10),
    _type("c5.xlarge", 4, 8, 4, 15),
    _type("m5.large", 2, 8, 3, 10),
    _type("m5.xlarge", 4, 16, 4, 15),
    _type("m5.2xlarge", 8, 32, 4, 15),
    _type("m5.4xlarge", 16, 64, 8, 30),
    _type("r5.large", 2, 16, 3, 10),
    _type("r5.xlarge", 4, 32, 4, 15),
    _type("r5.2xlarge", 8, 64, 4, 15),
    _type("r5.4xlarge", 16, 128, 8, 30),
    _type("mem96.large", 12, 96),
    *(_type(*gpu_type) for gpu_type in _GPU_TYPES),
)
"""The default catalogue of :class:`SimulatedCloud`, smallest family first."""


#: On-demand list prices in USD per hour (EC2 Linux, us-east-1) of the catalogue's EC2 types,
#: for choosing the cheapest of a pool's types (no live pricing API is called). Same names
#: as EC2's, so the table serves pools on EC2 too; a type not in it has no known price.
PRICES: dict[str, float] = {
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "m5.4xlarge": 0.768,
    "r5.large": 0.126,
    "r5.xlarge": 0.252,
    "r5.2xlarge": 0.504,
    "r5.4xlarge": 1.008,
    "g4dn.xlarge": 0.526,
    "g5.xlarge": 1.006,
    "g4dn.12xlarge": 3.912,
}
