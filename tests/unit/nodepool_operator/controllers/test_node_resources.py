"""A node's capacity and allocatable from its type, its kubelet's settings and its root
volume: EKS's arithmetic, pinned to figures worked out by hand."""

from __future__ import annotations

from dataclasses import replace

from nodepool_operator.api import parse_nodeclass
from nodepool_operator.cloud import (
    GiB,
    InstanceType,
    RootVolume,
    kubelet_settings,
    prefix_delegation_max_pods,
)
from nodepool_operator.controllers._node_resources import (
    class_kubelet,
    node_resources,
    root_volume,
)
from tests import factories
from tests.unit._eks import M5


def test_m5_large_on_a_20gib_root_volume() -> None:
    """cpu 2000m - 70m (6% of the first core, 1% of the second); memory 8Gi - 574Mi
    (11Mi x 29 pods + 255Mi) - 100Mi (eviction); ephemeral 20Gi - 1Gi - 2Gi (10%)."""
    found = node_resources(M5, kubelet_settings(M5), root_disk_bytes=20 * GiB)
    assert found.capacity == {
        "cpu": "2",
        "memory": "8Gi",
        "ephemeral-storage": "20Gi",
        "pods": "29",
    }
    assert found.allocatable == {
        "cpu": "1930m",
        "memory": "7518Mi",
        "ephemeral-storage": "17Gi",
        "pods": "29",
    }


def test_system_reserved_and_max_pods_of_the_class() -> None:
    spec = parse_nodeclass(
        factories.nodeclass(
            kubelet={"maxPods": 20, "systemReserved": {"cpu": "100m", "memory": "100Mi"}}
        )
    ).spec
    kubelet = class_kubelet(spec, M5)
    assert kubelet.max_pods == 20
    # AL2023: kube-reserved memory follows the ENI limit (29) whatever maxPods says
    assert kubelet.kube_reserved["memory"] == "574Mi"
    found = node_resources(M5, kubelet, root_disk_bytes=20 * GiB)
    assert found.allocatable["cpu"] == "1830m"
    assert found.allocatable["memory"] == "7418Mi"
    assert found.allocatable["pods"] == "20"
    bottlerocket = class_kubelet(replace(spec, ami_family="Bottlerocket"), M5)
    assert bottlerocket.kube_reserved["memory"] == f"{11 * 20 + 255}Mi"


def described(volume: RootVolume) -> tuple[str, int, str, bool]:
    return (volume.device_name, volume.size_bytes, volume.volume_type, volume.encrypted)


def test_the_root_volume_defaults_by_family() -> None:
    spec = parse_nodeclass(factories.nodeclass()).spec
    assert described(root_volume(spec)) == ("/dev/xvda", 20 * GiB, "gp3", True)
    assert root_volume(replace(spec, ami_family="Bottlerocket")).device_name == "/dev/xvdb"
    given = parse_nodeclass(
        factories.nodeclass(
            rootVolume={
                "sizeGib": 100,
                "volumeType": "io2",
                "encrypted": False,
                "deviceName": "/dev/sda1",
            }
        )
    ).spec
    assert described(root_volume(given)) == ("/dev/sda1", 100 * GiB, "io2", False)


def test_prefix_delegation_max_pods_capped_as_eks_caps_it() -> None:
    """m5.large: 3 x (9 x 16) + 2 = 434, capped at 110 (2 vCPUs); m5.24xlarge: 15 ENIs of 50
    addresses, 11522, capped at 250 (96 vCPUs); a type of unknown ENIs keeps its count."""
    assert prefix_delegation_max_pods(M5) == 110
    big = InstanceType(
        name="m5.24xlarge",
        cpu_cores=96,
        memory_bytes=384 * GiB,
        disk_bytes=0,
        pods=737,
        enis=15,
        ips_per_eni=50,
    )
    assert prefix_delegation_max_pods(big) == 250
    unknown = replace(M5, enis=0, ips_per_eni=0)
    assert prefix_delegation_max_pods(unknown) == 29
    few = replace(M5, enis=1, ips_per_eni=2)  # 1 x 16 + 2: under the cap
    assert prefix_delegation_max_pods(few) == 18
    spec = parse_nodeclass(factories.nodeclass(kubelet={"prefixDelegation": True})).spec
    kubelet = class_kubelet(spec, M5)
    assert kubelet.max_pods == 110
    assert kubelet.kube_reserved["memory"] == "574Mi", "AL2023: from the ENI limit still"
