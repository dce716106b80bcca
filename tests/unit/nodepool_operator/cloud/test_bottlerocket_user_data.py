"""Bottlerocket user data: the operator's settings.kubernetes merged into a node class's TOML,
read back with Python's own TOML parser (tomllib) and by the moto kubelets."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from nodepool_operator.cloud import bottlerocket_user_data, kubelet_settings
from nodepool_operator.testbed import read_boot
from tests.unit._eks import CLUSTER, M5

USER = """
[settings.host-containers.admin]
enabled = true

[settings.kubernetes]
cluster-name = "theirs"
max-pods = 7
image-gc-high-threshold-percent = "85"

[settings.kubernetes.node-labels]
team = "a"
pool = "theirs"

[settings.kubernetes.node-taints]
theirs = ["x:NoSchedule"]
"""


def render(user_data: str | None = None, **kw: Any) -> str:
    return bottlerocket_user_data(
        CLUSTER,
        kubelet_settings(M5, system_reserved=kw.get("system_reserved")),
        labels={"pool": "web", "node-role.kubernetes.io/worker": "", "example.com/x": 'q"uote'},
        taints=[
            {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
            {"key": "startup", "effect": "NoExecute"},
        ],
        user_data=user_data,
    )


def test_the_operators_kubernetes_settings_win_and_the_users_others_stay() -> None:
    text = render(USER, system_reserved={"cpu": "100m"})
    assert text == render(USER, system_reserved={"cpu": "100m"}), "deterministic"
    settings = tomllib.loads(text)["settings"]
    assert settings["host-containers"]["admin"] == {"enabled": True}
    kubernetes = settings["kubernetes"]
    assert kubernetes["image-gc-high-threshold-percent"] == "85"
    assert kubernetes["cluster-name"] == "demo"
    assert kubernetes["api-server"] == CLUSTER.endpoint
    assert kubernetes["cluster-certificate"] == CLUSTER.certificate_authority
    assert kubernetes["max-pods"] == 29
    assert kubernetes["kube-reserved"] == {
        "cpu": "70m",
        "memory": "574Mi",
        "ephemeral-storage": "1Gi",
    }
    assert kubernetes["system-reserved"] == {"cpu": "100m"}
    assert kubernetes["eviction-hard"]["memory.available"] == "100Mi"
    # labels merged (ours win; one a kubelet may not set is left out); taints are ours alone
    assert kubernetes["node-labels"] == {"team": "a", "pool": "web", "example.com/x": 'q"uote'}
    assert kubernetes["node-taints"] == {
        "dedicated": ["web:NoSchedule"],
        "startup": [":NoExecute"],
    }


def test_the_moto_kubelets_read_what_bottlerocket_would() -> None:
    boot = read_boot(render(USER))
    assert boot is not None
    assert boot.cluster_name == "demo"
    assert boot.max_pods == 29
    assert boot.labels == {"team": "a", "pool": "web", "example.com/x": 'q"uote'}
    assert boot.taints == (
        {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
        {"key": "startup", "effect": "NoExecute"},
    )


def test_user_data_that_is_no_toml_is_refused() -> None:
    with pytest.raises(ValueError, match="not TOML"):
        render("#!/bin/sh\necho hi\n")
    with pytest.raises(ValueError, match=r"settings\.kubernetes must be a table"):
        render('[settings]\nkubernetes = "flat"\n')
