"""Scheduling simulation, part 3: what depends on other pods (anti-affinity, affinity, topology
spread, host ports), DaemonSet overhead, and the typed views the simulation reads pods into."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.scheduling import (
    FitReason,
    New,
    NodeState,
    NodeTemplate,
    Resources,
    is_workload,
    node_shape,
    pod_fits_template,
    pod_view,
)
from tests import factories
from tests.unit.nodepool_operator.scheduling.plans import plan_pods

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def pod(name: str, *, cpu: str = "100m", labels: dict[str, str] | None = None, **spec: Any) -> Any:
    ports = spec.pop("ports", None)
    containers = [factories.container(cpu=cpu, **({"ports": ports} if ports else {}))]
    return factories.pod(name, namespace="prod", labels=labels or {}, containers=containers, **spec)


def anti(key: str, **labels: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


@pytest.fixture
def small() -> NodeTemplate:
    return NodeTemplate.from_pool("small", cpu=4, memory="16Gi", labels={ZONE: "z1"})


def test_five_hostname_anti_affine_pods_get_five_new_nodes_in_one_plan(
    small: NodeTemplate,
) -> None:
    web = [pod(f"web-{i}", labels={"app": "web"}, affinity=anti(HOST, app="web")) for i in range(5)]
    plan = plan_pods(web, template=small, current_target=0, max_nodes=10)
    assert plan.new_nodes == 5
    assert len({p.node for p in plan.placements}) == 5


def test_anti_affinity_counts_pods_already_on_a_node(small: NodeTemplate) -> None:
    running = pod_view(pod("web-old", labels={"app": "web"}))
    node = NodeState(
        "n1", Resources(cpu=4000, memory=16 * 2**30, pods=110), {HOST: "n1"}, pods=(running,)
    )
    newcomer = pod("web-new", labels={"app": "web"}, affinity=anti(HOST, app="web"))
    plan = plan_pods(
        [newcomer], template=small, existing_nodes=[node], current_target=1, max_nodes=5
    )
    assert plan.node_for(pod_view(newcomer).ref) == New(0)


def test_an_existing_pods_anti_affinity_refuses_the_newcomer(small: NodeTemplate) -> None:
    guard = pod_view(pod("guard", labels={"app": "db"}, affinity=anti(HOST, app="web")))
    node = NodeState(
        "n1", Resources(cpu=4000, memory=16 * 2**30, pods=110), {HOST: "n1"}, pods=(guard,)
    )
    plan = plan_pods(
        [pod("web", labels={"app": "web"})],
        template=small,
        existing_nodes=[node],
        current_target=1,
        max_nodes=5,
    )
    assert plan.new_nodes == 1


def test_zone_anti_affinity_cannot_be_met_by_more_nodes_of_one_zone(small: NodeTemplate) -> None:
    web = [pod(f"web-{i}", labels={"app": "web"}, affinity=anti(ZONE, app="web")) for i in range(3)]
    plan = plan_pods(web, template=small, current_target=0, max_nodes=10)
    assert plan.new_nodes == 1
    [group] = plan.unschedulable
    assert group.reason is FitReason.POD_ANTI_AFFINITY_CONFLICT
    assert len(group.pods) == 2


def test_host_ports_need_a_node_each(small: NodeTemplate) -> None:
    port = [{"containerPort": 80, "hostPort": 8080}]
    plan = plan_pods(
        [pod(f"p{i}", ports=port) for i in range(3)], template=small, current_target=0, max_nodes=9
    )
    assert plan.new_nodes == 3
    other_ip = [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    plan = plan_pods(
        [pod("tcp", ports=port), pod("udp", ports=other_ip)],
        template=small,
        current_target=0,
        max_nodes=9,
    )
    assert plan.new_nodes == 1


def test_hostname_spread_with_min_domains_opens_a_node_per_pod(small: NodeTemplate) -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": HOST,
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 4,
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    pods = [pod(f"w{i}", labels={"app": "w"}, topologySpreadConstraints=spread) for i in range(4)]
    assert plan_pods(pods, template=small, current_target=0, max_nodes=9).new_nodes == 4
    # ScheduleAnyway is a preference: not simulated, one node holds them all.
    loose = [{**spread[0], "whenUnsatisfiable": "ScheduleAnyway"}]
    pods = [pod(f"w{i}", labels={"app": "w"}, topologySpreadConstraints=loose) for i in range(4)]
    assert plan_pods(pods, template=small, current_target=0, max_nodes=9).new_nodes == 1


def test_spread_on_a_key_the_pool_lacks_is_reported_not_scaled_for(small: NodeTemplate) -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "example.com/rack",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    plan = plan_pods(
        [pod("w", labels={"app": "w"}, topologySpreadConstraints=spread)],
        template=small,
        current_target=0,
        max_nodes=9,
    )
    assert plan.new_nodes == 0
    assert plan.unschedulable[0].reason is FitReason.TOPOLOGY_SPREAD_VIOLATION


def test_pod_affinity_follows_its_peer_and_the_first_of_a_group_goes_anywhere(
    small: NodeTemplate,
) -> None:
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOST}
    affine = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    group = [pod(f"c{i}", labels={"app": "cache"}, affinity=affine) for i in range(3)]
    plan = plan_pods(group, template=small, current_target=0, max_nodes=9)
    assert plan.new_nodes == 1
    assert len(plan.placements) == 3
    lonely = pod("app", labels={"app": "web"}, affinity=affine)
    plan = plan_pods([lonely], template=small, current_target=0, max_nodes=9)
    assert plan.new_nodes == 0
    assert plan.unschedulable[0].reason is FitReason.POD_AFFINITY_MISMATCH


def test_daemonset_overhead_makes_a_vm_sized_pod_too_big_and_says_why() -> None:
    shape = node_shape(resources={"cpu": "4", "memory": "16Gi", "pods": "110"})
    plain = NodeTemplate.from_shape("small", shape)
    with_ds = NodeTemplate.from_shape(
        "small", shape, daemonset_overhead=Resources(cpu=1000, pods=1)
    )
    big = pod("big", cpu="3500m")
    assert pod_fits_template(big, plain)
    result = pod_fits_template(big, with_ds)
    assert result.reason is FitReason.TOO_BIG
    assert result.detail == "cpu 3500m > 3 after DaemonSets"
    assert plan_pods([big], template=with_ds, current_target=0, max_nodes=3).new_nodes == 0


def test_shape_labels_one_source_the_pool_may_set_arch_but_not_fixed_labels() -> None:
    shape = node_shape(
        resources={"cpu": "2", "memory": "4Gi", "pods": "110"},
        labels={"kubernetes.io/arch": "arm64", "pool": "spoofed"},
        fixed_labels={"pool": "real"},
    )
    assert shape.labels["kubernetes.io/arch"] == "arm64"
    assert shape.labels["pool"] == "real"
    assert shape.node_labels("n-1")[HOST] == "n-1"


def test_workload_pod_definition() -> None:
    assert is_workload(pod("plain"))
    ds = pod("ds")
    ds["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "x", "uid": "1"}]
    assert not is_workload(ds)
    mirror = pod("static")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert not is_workload(mirror)
    rs = pod("rs")
    rs["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "x", "uid": "1"}]
    assert is_workload(rs)


def test_pod_view_reads_fields_once_and_tolerates_junk() -> None:
    view = pod_view(
        {
            "metadata": {
                "name": "p",
                "namespace": "n",
                "annotations": {"kubeloop.dev/do-not-disrupt": "true"},
                "labels": {"a": "b", "bad": 3},
            },
            "spec": {"terminationGracePeriodSeconds": 5, "nodeSelector": "junk", "tolerations": 7},
        }
    )
    assert view.do_not_disrupt
    assert view.grace_seconds == 5
    assert dict(view.labels) == {"a": "b"}
    assert view.node_selector == ()
    assert view.tolerations == ()
