"""The instance types the simulated cloud offers, loosely after EC2's m5/c5/r5 families and
its g4dn/g5 NVIDIA types.

Pod capacities follow EC2's ENI-based max-pods for the real types. ``mem96.large`` is
not an EC2 type: it exists for the seeds' example of a 96 GiB node holding 28 GiB pods.
"""

from __future__ import annotations

from ._port import InstanceType

GiB = 1024**3

_ROOT_DISK = 100 * GiB  # one root volume size for all types: disk is not what we scale on


#: EC2's NVIDIA types as (name, vCPUs, GiB, GPUs, ENI max-pods): one T4, one A10G, four T4s.
_GPU_TYPES = (
    ("g4dn.xlarge", 4, 16, 1, 29),
    ("g5.xlarge", 4, 16, 1, 58),
    ("g4dn.12xlarge", 48, 192, 4, 234),
)


def _type(name: str, cpu: int, memory_gib: int, pods: int) -> InstanceType:
    return InstanceType(
        name=name,
        cpu_cores=cpu,
        memory_bytes=memory_gib * GiB,
        disk_bytes=_ROOT_DISK,
        pods=pods,
    )


CATALOGUE: tuple[InstanceType, ...] = (
    _type("c5.large", 2, 4, 29),
    _type("c5.xlarge", 4, 8, 58),
    _type("m5.large", 2, 8, 29),
    _type("m5.xlarge", 4, 16, 58),
    _type("m5.2xlarge", 8, 32, 58),
    _type("m5.4xlarge", 16, 64, 234),
    _type("r5.large", 2, 16, 29),
    _type("r5.xlarge", 4, 32, 58),
    _type("r5.2xlarge", 8, 64, 58),
    _type("r5.4xlarge", 16, 128, 234),
    _type("mem96.large", 12, 96, 110),
    *(
        InstanceType(
            name=name,
            cpu_cores=cpu,
            memory_bytes=memory * GiB,
            disk_bytes=_ROOT_DISK,
            pods=pods,
            gpus=gpus,
        )
        for name, cpu, memory, gpus, pods in _GPU_TYPES
    ),
)
"""The default catalogue of :class:`SimulatedCloud`, smallest family first."""
