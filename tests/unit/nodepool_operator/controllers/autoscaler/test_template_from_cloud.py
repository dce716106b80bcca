"""The Autoscaler plans on the node its pool's VMs become: instance types from the cloud port,
allocatable from the node class's kubelet settings and root volume (EKS's kube-reserved,
the eviction threshold, the ENI max pods), in process (see test_reconcile.py)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from kubeloop import Request
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from nodepool_operator.api import AUTOSCALERS, AWSNODECLASSES, NODEPOOLS
from nodepool_operator.cloud import CATALOGUE, GiB, InstanceType, SimulatedCloud
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.settings import OperatorSettings
from tests import factories

SETTINGS = OperatorSettings(batch_window_seconds=0.0)
CLASS = factories.nodeclass("general", cluster={"name": "demo"})
#: Each pod of this module has a uid of its own: the operator keeps pod views by uid and
#: resourceVersion, so two pods of one uid across tests would read as one.
pending = functools.partial(factories.pod, namespace="prod", unschedulable=True)


def pool(instance_type: str = "m5.large", node_class: str | None = "general") -> dict[str, Any]:
    return factories.nodepool(
        "web", instance_type=instance_type, max_nodes=10, node_class=node_class, generation=1
    )


async def reconcile(cloud: SimulatedCloud | None, *objects: dict[str, Any]) -> list[Write]:
    snapshot = Snapshot(
        [factories.autoscaler("as", pool="web", namespaces=["prod"]), *objects],
        resources=[NODEPOOLS, AUTOSCALERS, AWSNODECLASSES],
        scale_paths={NODEPOOLS: "spec.targetNodes"},
    )
    mgr = new_manager(snapshot.client)
    AutoscalerController(mgr, SETTINGS, cloud=cloud).register()
    _, writes = await reconcile_once(mgr, Request("as"), controller="autoscaler")
    return writes


def targets(writes: list[Write]) -> list[int]:
    return [
        w.body["spec"]["replicas"]
        for w in writes
        if (w.kind, w.subresource) == ("NodePool", "scale")
    ]


def ready(writes: list[Write]) -> tuple[str, str, str]:
    [body] = [w.body for w in writes if (w.kind, w.subresource) == ("Autoscaler", "status")]
    [cond] = [c for c in body["status"]["conditions"] if c["type"] == "Ready"]
    return cond["status"], cond["reason"], cond["message"]


def tiny(count: int) -> list[dict[str, Any]]:
    return [pending(f"t-{i}", cpu="1m", memory="1Mi", uid=f"uid-t-{i}") for i in range(count)]


async def test_max_pods_of_the_type_30_tiny_pods_on_m5_large_need_two_nodes(
    tmp_path: Path,
) -> None:
    """m5.large's ENI limit is 29 pods (3 ENIs x 9 secondary IPs + 2): the kubelet the
    bootstrap configures refuses the 30th, so the plan takes a second node."""
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    assert targets(await reconcile(cloud, CLASS, pool(), *tiny(30))) == [2]
    assert targets(await reconcile(cloud, CLASS, pool(), *tiny(29))) == [1]


async def test_with_prefix_delegation_30_tiny_pods_fit_one_m5_large(tmp_path: Path) -> None:
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    prefixes = factories.nodeclass(
        "general", cluster={"name": "demo"}, kubelet={"prefixDelegation": True}
    )
    assert targets(await reconcile(cloud, prefixes, pool(), *tiny(30))) == [1]
    assert targets(await reconcile(cloud, prefixes, pool(), *tiny(111))) == [2]


async def test_a_pod_that_fits_the_vm_but_not_the_kubelets_allocatable_scales_nothing(
    tmp_path: Path,
) -> None:
    """m5.large has 8Gi; less 574Mi kube-reserved (11Mi x 29 pods + 255Mi) and the 100Mi
    eviction threshold, 7518Mi is allocatable: a 7600Mi pod does not fit, a 7500Mi one does."""
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    too_big = pending("big", memory="7600Mi", uid="uid-big")
    assert targets(await reconcile(cloud, CLASS, pool(), too_big)) == []
    fits = pending("fits", memory="7500Mi", uid="uid-fits")
    assert targets(await reconcile(cloud, CLASS, pool(), fits)) == [1]


async def test_the_types_come_from_the_cloud(tmp_path: Path) -> None:
    """A type the cloud offers that the built-in catalogue does not have gets a template
    (no InvalidNodePool asking for the pool's cpu and memory), arm64 and all."""
    graviton = InstanceType(
        name="c7g.xlarge",
        cpu_cores=4,
        memory_bytes=8 * GiB,
        disk_bytes=0,
        pods=58,
        architecture="arm64",
    )
    cloud = SimulatedCloud(tmp_path / "cloud.db", catalogue=[*CATALOGUE, graviton])
    arm = pending("arm", cpu="3", memory="1Gi", uid="uid-arm")
    arm["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    assert targets(await reconcile(cloud, CLASS, pool("c7g.xlarge"), arm)) == [1]
    assert cloud.snapshot().calls.get("instance_types", 0) >= 1
    # without the cloud the Autoscaler knows the simulated catalogue alone
    status, reason, message = ready(await reconcile(None, CLASS, pool("c7g.xlarge"), arm))
    assert (status, reason) == ("False", "InvalidNodePool")
    assert "c7g.xlarge" in message


async def test_a_missing_node_class_is_reported_not_planned_around(tmp_path: Path) -> None:
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    writes = await reconcile(cloud, pool(), *tiny(1))
    assert targets(writes) == []
    status, reason, message = ready(writes)
    assert (status, reason) == ("False", "InvalidNodePool")
    assert "spec.nodeClassRef" in message
    assert "general" in message


async def test_a_cloud_that_does_not_answer_for_its_types_is_reported_and_retried(
    tmp_path: Path,
) -> None:
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    cloud.inject("instance_types")
    writes = await reconcile(cloud, CLASS, pool(), *tiny(1))
    assert targets(writes) == []
    status, reason, message = ready(writes)
    assert (status, reason) == ("False", "InstanceTypesUnavailable")
    assert "NodePool web: instance types" in message
    assert targets(await reconcile(cloud, CLASS, pool(), *tiny(1))) == [1]


async def test_a_registered_node_teaches_the_template_its_machines_memory(
    tmp_path: Path,
) -> None:
    """A real m5.large reports some 7.5% less memory than EC2's 8 GiB (the hypervisor's share;
    7577Mi, say). Once one has registered, the template computes from that: 7577Mi - 574Mi
    kube-reserved - 100Mi eviction = 6903Mi, so a 7000Mi pod (which the nominal 8 GiB would
    have planned a node for) scales nothing, and a 6900Mi pod still does."""
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    registered = factories.node(
        "ip-10-0-0-1.ec2.internal",
        labels={POOL_LABEL: "web", "node.kubernetes.io/instance-type": "m5.large"},
        capacity={"cpu": "2", "memory": "7577Mi", "pods": "29"},
        allocatable={"cpu": "1930m", "memory": "6903Mi", "pods": "29"},
        ready=True,
        unschedulable=True,  # cordoned: it offers no room, only its figures
    )
    one = factories.nodepool(
        "web", target=1, instance_type="m5.large", max_nodes=10, node_class="general"
    )
    too_big = pending("big", memory="7000Mi", uid="uid-learn-big")
    assert targets(await reconcile(cloud, CLASS, one, registered, too_big)) == []
    fits = pending("fits", memory="6900Mi", uid="uid-learn-fits")
    assert targets(await reconcile(cloud, CLASS, one, registered, fits)) == [2]
    # a Node of another type teaches nothing about this one
    other = {
        **registered,
        "metadata": {
            **registered["metadata"],
            "labels": {POOL_LABEL: "web", "node.kubernetes.io/instance-type": "m5.xlarge"},
        },
    }
    assert targets(await reconcile(cloud, CLASS, one, other, too_big)) == [2]


async def test_a_zoned_pools_template_carries_the_clouds_region(tmp_path: Path) -> None:
    """A pool that launches into zones gets Nodes labelled with the cloud's region (issue 21
    item 4): a pod selecting that region scales it, one selecting another region does not,
    and a pool without zones (no region on its Nodes) does not claim one."""
    cloud = SimulatedCloud(tmp_path / "cloud.db", zones=("sim-1a", "sim-1b"))
    zoned = {**pool(), "status": {"zones": ["sim-1a", "sim-1b"]}}

    def selecting(region: str) -> dict[str, Any]:
        return pending(
            f"r-{region}",
            cpu="100m",
            node_selector={"topology.kubernetes.io/region": region},
            uid=f"uid-r-{region}-{tmp_path.name}",
        )

    assert cloud.region == "sim-1"
    assert targets(await reconcile(cloud, CLASS, zoned, selecting("sim-1"))) == [1]
    assert targets(await reconcile(cloud, CLASS, zoned, selecting("elsewhere"))) == []
    assert targets(await reconcile(cloud, CLASS, pool(), selecting("sim-1"))) == []
