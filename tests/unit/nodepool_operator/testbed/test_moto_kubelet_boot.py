"""What the moto kubelets read from an instance's user data: the NodeConfig parts, merged as
nodeadm merges them, and nothing else (no operator-private format)."""

from __future__ import annotations

import base64

from nodepool_operator.cloud import (
    NodeBootstrap,
    al2023_user_data,
    kubelet_settings,
    node_config,
)
from nodepool_operator.testbed import read_boot
from tests._nodeadm import nodeadm_check
from tests.unit._eks import CLUSTER, M5

USER = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 11
      evictionHard: {memory.available: 500Mi}
    flags: ["--node-labels=team=a,pool=theirs"]
"""


def test_the_nodeconfigs_are_merged_in_order_and_flags_appended() -> None:
    ours = node_config(
        CLUSTER,
        kubelet_settings(M5),
        labels={"pool": "web"},
        taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
    )
    user_data = al2023_user_data(ours, USER)
    nodeadm_check(user_data)
    # as EC2 hands it back: base64
    boot = read_boot(base64.b64encode(user_data.encode()).decode())
    assert boot is not None
    assert boot.cluster_name == "demo"
    assert boot.labels == {"team": "a", "pool": "web"}, "later --node-labels win per key"
    assert boot.taints == ({"key": "dedicated", "value": "web", "effect": "NoSchedule"},)
    assert boot.max_pods == 29, "the operator's NodeConfig comes last and wins"
    assert boot.kube_reserved == {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"}
    assert boot.eviction_hard["memory.available"] == "100Mi"


def test_user_data_without_a_nodeconfig_registers_nothing() -> None:
    assert read_boot("#!/bin/sh\necho hi\n") is None
    assert read_boot(NodeBootstrap(node_name="web-1", labels={"a": "b"}).encode()) is None
    no_cluster = USER  # a NodeConfig with no cluster: nodeadm would not join
    assert read_boot(no_cluster) is None
