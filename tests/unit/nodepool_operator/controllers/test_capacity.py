"""Autoscaler: the pool's node template, and the room its registered nodes have left."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.api import parse_nodepool
from nodepool_operator.controllers._capacity import pool_nodes, pool_template, scale_down_node
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.scheduling import Resources, Taint
from tests import factories

GI = 2**30


def pool(**spec: Any) -> Any:
    return parse_nodepool(
        {"metadata": {"name": "big"}, "spec": {"instanceType": "mem96.large", **spec}}
    )


def node(
    name: str,
    *,
    ready: bool = True,
    memory: str = "96Gi",
    cpu: str = "12",
    taints: list[dict[str, str]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {POOL_LABEL: "big", "tier": "mem"}},
        "spec": {"taints": taints or [], **spec},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, memory: str = "28Gi", phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "prod", **meta},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": memory}}}]},
        "status": {"phase": phase},
    }


def test_template_from_the_catalogue_when_the_pool_sets_no_size() -> None:
    template = pool_template(pool())
    assert template.name == "mem96.large"
    assert template.allocatable.memory == 96 * GI
    assert template.allocatable.cpu == 12_000
    assert template.allocatable.pods == 110
    assert template.labels[POOL_LABEL] == "big"


def test_template_from_the_pool_spec_overrides_the_catalogue() -> None:
    template = pool_template(
        pool(
            cpu="64",
            memory="96Gi",
            labels={"tier": "mem"},
            taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
        )
    )
    assert template.allocatable.cpu == 64_000
    assert template.labels["tier"] == "mem"
    assert template.taints == (Taint("dedicated", "NoSchedule", "db"),)


def test_template_of_an_unknown_type_needs_cpu_and_memory() -> None:
    with pytest.raises(ValueError, match="not in the catalogue"):
        pool_template(
            parse_nodepool({"metadata": {"name": "x"}, "spec": {"instanceType": "z9.huge"}})
        )
    sized = parse_nodepool(
        {
            "metadata": {"name": "x"},
            "spec": {"instanceType": "z9.huge", "cpu": "4", "memory": "8Gi"},
        }
    )
    assert pool_template(sized).allocatable.pods == 110


def test_free_room_subtracts_non_terminal_pods() -> None:
    pods = {"n1": [pod("a"), pod("b"), pod("done", phase="Succeeded")]}
    nodes = pool_nodes([node("n1")], lambda n: pods.get(n, []))
    assert nodes.registered == nodes.ready == 1
    (state,) = nodes.room
    assert state.free == Resources(cpu=12_000, memory=40 * GI, pods=108)
    assert nodes.empty == ()


def test_booting_nodes_are_registered_room_but_not_ready_and_never_empty() -> None:
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    nodes = pool_nodes([node("n1", ready=False, taints=[taint])], lambda _: [])
    assert (nodes.registered, nodes.ready, nodes.empty) == (1, 0, ())
    # the lifecycle taint goes away when the node is Ready; it says nothing about the pool
    assert nodes.room[0].taints == ()


def test_a_booting_node_is_simulated_with_the_templates_taints_not_its_start_up_ones() -> None:
    startup = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    pool_taint = Taint("dedicated", "NoSchedule", "db")
    booting = node("n1", ready=False, taints=[startup])
    ready = node("n2", taints=[startup])
    nodes = pool_nodes([booting, ready], lambda _: [], booting_taints=(pool_taint,))
    by_name = {s.name: s.taints for s in nodes.room}
    assert by_name["n1"] == (pool_taint,)
    # once Ready, its own taints are what the scheduler sees
    assert by_name["n2"] == (Taint("example.com/agent-not-ready", "NoSchedule"),)


def test_a_ready_node_not_open_yet_is_opening_and_judged_with_its_own_taints() -> None:
    """Ready, but the lifecycle's not-ready taint (or the Autoscaler's reservation) is still
    on: room for the plan (the taint goes), yet no place for a pod a scale-down moves now, as
    the NodePool controller judges it (:func:`scale_down_node`: the Node as it is)."""
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    nodes = pool_nodes([node("n1", taints=[not_ready]), node("n2")], lambda _: [])
    assert (nodes.registered, nodes.ready, nodes.opening) == (2, 2, 1)
    assert {s.name: s.taints for s in nodes.room}["n1"] == ()
    by_name = {c.name: c.taints for c in nodes.candidates}
    assert by_name == {"n1": (Taint("node.kubernetes.io/not-ready", "NoSchedule"),), "n2": ()}
    assert by_name["n1"] == scale_down_node(node("n1", taints=[not_ready]), []).taints


def test_cordoned_and_deleting_nodes() -> None:
    deleting = node("gone")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    nodes = pool_nodes([node("cordoned", unschedulable=True), deleting], lambda _: [])
    assert nodes.registered == nodes.ready == 1  # the cordoned one
    assert nodes.room == ()
    assert nodes.empty == ()


def test_a_node_being_drained_is_leaving_not_registered_nor_ready_nor_room() -> None:
    disrupting = {"key": "kubeloop.dev/disrupting", "effect": "NoSchedule"}
    pods = {"drained": [pod("a")]}
    nodes = pool_nodes(
        [node("drained", taints=[disrupting]), node("stays")], lambda n: pods.get(n, [])
    )
    assert (nodes.registered, nodes.ready, nodes.leaving) == (1, 1, 1)
    assert [s.name for s in nodes.room] == ["stays"]
    assert [c.name for c in nodes.candidates] == ["stays"]


def test_daemonset_and_mirror_pods_do_not_make_a_node_needed() -> None:
    ds = pod("ds", ownerReferences=[{"kind": "DaemonSet", "name": "agent"}])
    mirror = pod("static", annotations={"kubernetes.io/config.mirror": "abc"})
    pods = {"n1": [ds, mirror], "n2": [pod("app")], "n3": []}
    nodes = pool_nodes([node("n3"), node("n1"), node("n2")], lambda n: pods[n])
    assert nodes.empty == ("n1", "n3")


def test_a_node_with_malformed_allocatable_offers_no_room() -> None:
    bad = node("bad", memory="lots")
    nodes = pool_nodes([bad, node("good")], lambda _: [])
    assert [n.name for n in nodes.room] == ["good"]
    assert nodes.registered == 2


def test_template_matches_the_nodes_the_pool_registers() -> None:
    """The same sizes and labels as the NodePool controller's Node, so plan and scheduler agree."""
    from nodepool_operator.cloud import CATALOGUE
    from nodepool_operator.controllers._node_manifest import node_manifest

    small = parse_nodepool(
        {
            "metadata": {"name": "small"},
            "spec": {"instanceType": "m5.large", "labels": {"tier": "web"}},
        }
    )
    vm = factories.cloud_vm("i-1", name="small-0")
    m5 = next(t for t in CATALOGUE if t.name == "m5.large")
    registered = node_manifest(small, vm, m5, run_labels={"run": "x"})
    template = pool_template(small, scope_labels={"run": "x"})
    assert template.allocatable == Resources.from_resource_list(registered["status"]["allocatable"])
    node_labels = registered["metadata"]["labels"]
    assert all(node_labels.get(k) == v for k, v in template.labels.items())
