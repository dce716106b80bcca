"""The Node a NodePool's VM registers as."""

from __future__ import annotations

from typing import Any

from nodepool_operator.api import parse_nodepool
from nodepool_operator.cloud import CATALOGUE, Instance, NodeBootstrap
from nodepool_operator.controllers._node_manifest import (
    capacity,
    is_ready,
    node_bootstrap,
    node_manifest,
    pool_shape,
    ready_for,
    ready_since,
)

M5 = next(t for t in CATALOGUE if t.name == "m5.large")


def pool(**spec: Any) -> Any:
    return parse_nodepool(
        {
            "metadata": {"name": "web", "uid": "u-1"},
            "spec": {"instanceType": "m5.large", **spec},
        }
    )


def vm(name: str = "web-1a2b3", state: str = "running") -> Instance:
    return Instance(
        id="i-abc",
        name=name,
        instance_type="m5.large",
        image="img",
        state=state,  # type: ignore[arg-type]
        private_ip="10.0.0.7",
        public_ip="203.0.113.9",
        tags={},
        created_at=0.0,
        launched_at=1.0,
    )


def test_capacity_falls_back_to_the_instance_type_and_always_has_pods() -> None:
    assert capacity(pool().spec, M5) == {
        "cpu": "2",
        "memory": "8Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
    }


def test_capacity_from_the_spec_wins() -> None:
    sizes = capacity(pool(cpu="3500m", memory="96Gi", diskSize="50Gi").spec, M5)
    assert sizes == {"cpu": "3500m", "memory": "96Gi", "ephemeral-storage": "50Gi", "pods": "110"}


def test_capacity_without_a_known_type_keeps_what_the_spec_gives() -> None:
    assert capacity(pool(cpu="4").spec, None) == {"cpu": "4", "pods": "110"}


def test_node_manifest_labels_taints_provider_id_and_status() -> None:
    p = pool(
        labels={"team": "a", "kubernetes.io/os": "windows", "run": "mine"},
        taints=[
            {"key": "gpu", "effect": "NoSchedule"},
            {"key": "d", "value": "x", "effect": "NoExecute"},
        ],
    )
    node = node_manifest(p, vm(), M5, run_labels={"run": "r1"})
    assert node["metadata"]["name"] == "web-1a2b3"
    assert node["metadata"]["labels"] == {
        "team": "a",
        "run": "r1",  # the operator's scope label beats the pool's
        "kubernetes.io/hostname": "web-1a2b3",
        "kubernetes.io/os": "windows",  # the pool may say what its nodes run (one source)
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "m5.large",
        "node.kubeloop.dev/capacity-type": "on-demand",
        "kubeloop.dev/nodepool": "web",
    }
    assert node["spec"] == {
        "providerID": "sim:///i-abc",
        "taints": [
            {"key": "gpu", "effect": "NoSchedule"},
            {"key": "d", "effect": "NoExecute", "value": "x"},
        ],
    }
    status = node["status"]
    assert status["allocatable"] == status["capacity"]
    assert status["allocatable"]["pods"] == "110"
    assert "conditions" not in status, "the kubelet (kwok) reports conditions, not the operator"
    assert not is_ready(node)
    assert {"type": "InternalIP", "address": "10.0.0.7"} in status["addresses"]


def test_the_bootstrap_round_trips_through_user_data() -> None:
    p = pool(labels={"team": "a"}, taints=[{"key": "gpu", "effect": "NoSchedule"}])
    boot = node_bootstrap(p, "web-1a2b3", "m5.large", M5, run_labels={"run": "r1"})
    text = boot.encode()
    assert text == node_bootstrap(p, "web-1a2b3", "m5.large", M5, run_labels={"run": "r1"}).encode()
    assert NodeBootstrap.decode(text) == boot
    assert NodeBootstrap.decode("") is None
    assert NodeBootstrap.decode("#!/bin/sh\necho hi") is None
    assert NodeBootstrap.decode('{"format": "other"}') is None


def test_ready_and_since_when() -> None:
    node: dict[str, Any] = {
        "metadata": {"name": "n"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-12-01T10:00:00Z"}
            ]
        },
    }
    assert not is_ready(node)
    assert ready_since(node) == 1796119200.0
    assert ready_since({"metadata": {"name": "n"}}) is None
    assert ready_for(node, 1796119230.0) is None  # not Ready: not held for any time
    node["status"]["conditions"][0]["status"] = "True"
    assert is_ready(node)
    assert ready_for(node, 1796119230.0) == 30.0
    assert ready_for(node, 1796119100.0) == 0.0  # our clock behind the kubelet's
    del node["status"]["conditions"][0]["lastTransitionTime"]
    assert ready_for(node, 1796119230.0) is None


def test_hostname_label_is_a_valid_label_value() -> None:
    name = "x" * 60 + "-abcde"
    node = node_manifest(pool(), vm(name=name), M5)
    hostname = node["metadata"]["labels"]["kubernetes.io/hostname"]
    assert len(hostname) <= 63
    assert hostname[-1].isalnum()


def test_template_and_node_come_from_one_shape() -> None:
    """The arch-label mismatch: a pool that sets kubernetes.io/arch gets it on its Nodes and in
    the Autoscaler's template alike, with the same allocatable and taints."""
    from nodepool_operator.controllers._capacity import pool_template
    from nodepool_operator.scheduling import Resources

    p = pool(
        labels={"kubernetes.io/arch": "arm64"},
        taints=[{"key": "gpu", "effect": "NoSchedule"}],
    )
    node = node_manifest(p, vm(), M5, run_labels={"run": "r1"})
    template = pool_template(p, [M5], scope_labels={"run": "r1"})
    labels = dict(node["metadata"]["labels"])
    assert labels.pop("kubernetes.io/hostname") == "web-1a2b3"
    assert labels == dict(template.labels)
    assert labels["kubernetes.io/arch"] == "arm64"
    assert Resources.from_resource_list(node["status"]["allocatable"]) == template.allocatable
    assert [t["key"] for t in node["spec"]["taints"]] == [t.key for t in template.taints]


def test_the_template_of_a_zone_says_that_zone_and_the_bootstrap_does_not() -> None:
    """The kubelet labels its Node's zone and region from the cloud, so the user data is the
    same in every zone and only the template (one per zone) carries them."""
    zonal = pool_shape(pool(), M5, zone="sim-1b", region="sim-1").labels
    assert zonal["topology.kubernetes.io/zone"] == "sim-1b"
    assert zonal["topology.kubernetes.io/region"] == "sim-1"
    plain = pool_shape(pool(), M5).labels
    assert "topology.kubernetes.io/zone" not in plain
    assert "topology.kubernetes.io/region" not in plain
    labels = node_bootstrap(pool(), "web-1a2b3", "m5.large", M5).labels
    assert not any(k.startswith("topology.kubernetes.io/") for k in labels)
