"""AL2023 user data: the operator's NodeConfig, merged with a node class's own user data, as
nodeadm (the real one, tests/_nodeadm.py) reads it; and EKS's kube-reserved formula."""

from __future__ import annotations

import email
import email.message
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodepool_operator.api import parse_nodeclass, parse_nodepool
from nodepool_operator.cloud import (
    NODECONFIG_MEDIA_TYPE,
    SimulatedCloud,
    al2023_user_data,
    kube_reserved,
    kubelet_may_set_label,
    kubelet_settings,
    node_config,
)
from nodepool_operator.controllers._launch import NodeClassUnavailable
from nodepool_operator.controllers.nodepool._userdata import pool_user_data
from tests._nodeadm import NodeadmRefused, nodeadm_check
from tests.unit._eks import CLUSTER, M5


def parts(user_data: str) -> list[tuple[str, str]]:
    """(content type, body) of each MIME part, for assertions on what was written."""
    message = email.message_from_string(user_data)
    assert message.is_multipart()
    return [
        (p.get_content_type(), str(p.get_payload()).rstrip("\n"))
        for p in message.get_payload()
        if isinstance(p, email.message.Message)
    ]


def ours(user_data: str) -> dict[str, Any]:
    configs = [body for kind, body in parts(user_data) if kind == NODECONFIG_MEDIA_TYPE]
    loaded: dict[str, Any] = yaml.safe_load(configs[-1])
    return loaded


def config(**kw: Any) -> dict[str, Any]:
    return node_config(
        CLUSTER,
        kubelet_settings(M5),
        labels=kw.get("labels", {"kubeloop.dev/nodepool": "web"}),
        taints=kw.get("taints", []),
    )


@pytest.mark.parametrize(
    ("cores", "pods", "cpu", "memory"),
    [(2, 29, "70m", "574Mi"), (4, 58, "80m", "893Mi"), (8, 58, "90m", "893Mi"),
     (16, 234, "110m", "2829Mi"), (96, 737, "310m", "8362Mi")],
)  # fmt: skip
def test_kube_reserved_follows_eks_formula(cores: int, pods: int, cpu: str, memory: str) -> None:
    assert kube_reserved(cores, pods) == {"cpu": cpu, "memory": memory, "ephemeral-storage": "1Gi"}


def test_max_pods_override_keeps_the_eni_limited_memory_reservation() -> None:
    settings = kubelet_settings(M5, max_pods=110, system_reserved={"cpu": "100m"})
    assert settings.config() == {
        "maxPods": 110,
        "kubeReserved": {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
        "systemReserved": {"cpu": "100m"},
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "10%",
            "nodefs.inodesFree": "5%",
        },
    }


def test_bottlerocket_reserves_memory_for_the_effective_max_pods() -> None:
    settings = kubelet_settings(M5, max_pods=110, eni_limited_memory=False)
    assert settings.kube_reserved["memory"] == f"{11 * 110 + 255}Mi"


def test_alone_it_is_one_nodeconfig_part_nodeadm_accepts() -> None:
    user_data = al2023_user_data(
        config(
            labels={"kubeloop.dev/nodepool": "web", "team": "a"},
            taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                    {"key": "startup", "effect": "NoExecute"}],
        )
    )  # fmt: skip
    nodeadm_check(user_data)
    assert [kind for kind, _ in parts(user_data)] == [NODECONFIG_MEDIA_TYPE]
    spec = ours(user_data)["spec"]
    assert spec["cluster"] == {
        "name": "demo",
        "apiServerEndpoint": CLUSTER.endpoint,
        "certificateAuthority": CLUSTER.certificate_authority,
        "cidr": "10.100.0.0/16",
    }
    assert spec["kubelet"]["config"]["maxPods"] == 29
    assert spec["kubelet"]["flags"] == [
        "--node-labels=kubeloop.dev/nodepool=web,team=a",
        "--register-with-taints=dedicated=gpu:NoSchedule,startup:NoExecute",
    ]


def test_labels_a_kubelet_may_not_set_are_left_out() -> None:
    assert kubelet_may_set_label("kubernetes.io/arch")
    assert kubelet_may_set_label("example.com/team")
    assert kubelet_may_set_label("kubelet.kubernetes.io/x")
    assert not kubelet_may_set_label("node-role.kubernetes.io/worker")
    assert not kubelet_may_set_label("node-restriction.kubernetes.io/x")
    assert not kubelet_may_set_label("foo.k8s.io/x")
    user_data = al2023_user_data(
        config(labels={"kubeloop.dev/nodepool": "web", "node-role.kubernetes.io/worker": ""})
    )
    nodeadm_check(user_data)
    assert ours(user_data)["spec"]["kubelet"]["flags"] == [
        "--node-labels=kubeloop.dev/nodepool=web"
    ]


def test_a_script_is_kept_as_a_part_before_the_nodeconfig() -> None:
    user_data = al2023_user_data(config(), "#!/bin/bash\necho hello\n")
    nodeadm_check(user_data)
    assert parts(user_data) == [
        ("text/x-shellscript", "#!/bin/bash\necho hello"),
        (NODECONFIG_MEDIA_TYPE, parts(user_data)[1][1]),
    ]


USER_NODECONFIG = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
    flags:
      - --node-labels=team=payments
"""


def test_a_users_nodeconfig_comes_first_and_ours_last() -> None:
    user_data = al2023_user_data(config(), USER_NODECONFIG)
    nodeadm_check(user_data)
    found = parts(user_data)
    assert [kind for kind, _ in found] == [NODECONFIG_MEDIA_TYPE, NODECONFIG_MEDIA_TYPE]
    assert found[0][1] == USER_NODECONFIG.rstrip("\n")


def test_a_users_mime_document_keeps_its_parts() -> None:
    mime = (
        "MIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
        "--BOUNDARY\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"{USER_NODECONFIG}\n"
        "--BOUNDARY\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n\n'
        "#!/bin/sh\necho second\n\n"
        "--BOUNDARY--\n"
    )
    user_data = al2023_user_data(config(), mime)
    nodeadm_check(user_data)
    assert [kind for kind, _ in parts(user_data)] == [
        NODECONFIG_MEDIA_TYPE,
        "text/x-shellscript",
        NODECONFIG_MEDIA_TYPE,
    ]


def test_nodeadm_refuses_a_broken_nodeconfig() -> None:
    """The check can fail: a CA that is not base64 is refused by nodeadm's decoding."""
    broken = USER_NODECONFIG.replace(
        "spec:\n", "spec:\n  cluster:\n    certificateAuthority: '#'\n"
    )
    with pytest.raises(NodeadmRefused, match="illegal base64"):
        nodeadm_check(al2023_user_data(config(), broken))


def test_mime_headers_without_parts_are_refused() -> None:
    with pytest.raises(ValueError, match="not a MIME multi-part"):
        al2023_user_data(config(), "Content-Type: text/plain\n\nhello\n")


def pool(**spec: Any) -> Any:
    return parse_nodepool(
        {"metadata": {"name": "web", "uid": "u-1"}, "spec": {"instanceType": "m5.large", **spec}}
    )


def node_class(**spec: Any) -> Any:
    return parse_nodeclass(
        {"metadata": {"name": "nc"}, "spec": {"amiId": "ami-12345678", **spec}}
    ).spec


async def test_a_pools_user_data_carries_its_labels_taints_and_reservation(
    tmp_path: Path,
) -> None:
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    user_data = await pool_user_data(
        cloud,
        pool(
            labels={"team": "a"},
            taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            reserveNewNodes=True,
        ),
        "web-1a2b3",
        M5,
        node_class(cluster={"name": "demo"}, userData="#!/bin/sh\necho ${nodeName}\n"),
        run_labels={"env": "test"},
    )
    nodeadm_check(user_data)
    assert parts(user_data)[0] == ("text/x-shellscript", "#!/bin/sh\necho web-1a2b3")
    spec = ours(user_data)["spec"]
    assert spec["cluster"]["name"] == "demo"  # the rest from the cloud's DescribeCluster
    assert spec["cluster"]["cidr"] == "10.100.0.0/16"
    labels, taints = spec["kubelet"]["flags"]
    assert labels == (
        "--node-labels=env=test,kubeloop.dev/nodepool=web,kubernetes.io/arch=amd64,"
        "kubernetes.io/os=linux,node.kubeloop.dev/capacity-type=on-demand,"
        "node.kubernetes.io/instance-type=m5.large,team=a"
    )
    assert taints == (
        "--register-with-taints=dedicated=web:NoSchedule,"
        "autoscaling.kubeloop.dev/reserved=web-1a2b3:NoSchedule"
    )


async def test_node_classes_that_cannot_bootstrap_a_node_are_refused(tmp_path: Path) -> None:
    cloud = SimulatedCloud(tmp_path / "cloud.db")
    with pytest.raises(NodeClassUnavailable, match=r"spec\.cluster\.name"):
        await pool_user_data(cloud, pool(), "web-1", M5, node_class())
    with pytest.raises(NodeClassUnavailable, match="Bottlerocket userData is not TOML"):
        await pool_user_data(
            cloud,
            pool(),
            "web-1",
            M5,
            node_class(amiFamily="Bottlerocket", cluster={"name": "demo"}, userData="[oops"),
        )
    custom = node_class(amiFamily="Custom", userData="#!/bin/sh\n")
    assert await pool_user_data(cloud, pool(), "web-1", M5, custom) == ""
