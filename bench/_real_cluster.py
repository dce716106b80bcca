"""The Karpenter benchmark's test bed as a real cluster is set up, for both sides alike.

The control plane's own defaults suit tests (a silent Node goes ``Unknown`` within 30 s), and a
fresh one has no Node at all. A real cluster differs in two ways that touch a pending pod's
wait, so the benchmark's cluster is set as one:

- **Node lifecycle timing at the upstream defaults**: kube-controller-manager's
  ``--node-monitor-period=5s`` and ``--node-monitor-grace-period=50s``, and a Node Lease of
  40 s (the kubelet's ``nodeLeaseDurationSeconds``; kwok renews it every quarter of that).
  None of these is on a new Node's way to Ready: the not-ready taint is lifted on the Node's
  own update, not on the monitor period. They are set so that nothing in the bench runs on a
  shortened clock.
- **A system node**: a cluster always runs its operators, DNS and the autoscaler itself on
  some node. With none, kube-scheduler rejects a pod with "no nodes available", which names
  no plugin, so it counts the failure as an error: every later cluster event (any Node's or
  pod's update, an autoscaler's write to the pod) retries the pod, each failure doubles its
  back-off (1 s up to 10 s), and the pod sits out the whole back-off in the error queue,
  which is not tried early when the scheduler is idle: a Node registering late then waits
  seconds that a pod rejected by a plugin, as on a real cluster, would not. The system node
  carries ``CriticalAddonsOnly=true:NoSchedule``, the taint EKS Auto Mode's built-in
  ``system`` node pool (Karpenter underneath) sets its add-on nodes apart with, so no
  scenario's pod lands on it and neither autoscaler counts it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from kubeloop import NODES, AlreadyExists, Client
from kubeloop.envtest import KWOK_NODE_ANNOTATIONS, ControlPlaneOptions

__all__ = [
    "NODE_LEASE_S",
    "NODE_MONITOR_GRACE_S",
    "NODE_MONITOR_PERIOD_S",
    "SYSTEM_NODE",
    "SYSTEM_TAINT",
    "add_system_node",
    "real_cluster_timing",
]

#: kube-controller-manager's ``--node-monitor-period`` default.
NODE_MONITOR_PERIOD_S: Final = 5
#: kube-controller-manager's ``--node-monitor-grace-period`` default.
NODE_MONITOR_GRACE_S: Final = 50
#: The kubelet's ``nodeLeaseDurationSeconds`` default.
NODE_LEASE_S: Final = 40
#: The system node's name.
SYSTEM_NODE: Final = "bench-system-0"
#: The taint that keeps workloads off the system node.
SYSTEM_TAINT: Final = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}


def real_cluster_timing(options: ControlPlaneOptions) -> ControlPlaneOptions:
    """``options`` with the node lifecycle timing a real cluster runs with (module doc)."""
    options.node_monitor_period_seconds = NODE_MONITOR_PERIOD_S
    options.node_monitor_grace_seconds = NODE_MONITOR_GRACE_S
    options.node_lease_seconds = NODE_LEASE_S
    return options


def system_node() -> dict[str, Any]:
    """The system node: an m5.large's allocatable, kwok as its kubelet, tainted for add-ons."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": SYSTEM_NODE,
            "labels": {
                "kubernetes.io/hostname": SYSTEM_NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.large",
            },
            "annotations": dict(KWOK_NODE_ANNOTATIONS),
        },
        "spec": {"taints": [dict(SYSTEM_TAINT)]},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        },
    }


async def add_system_node(admin: Client) -> None:
    """Register :func:`system_node` (kept if there already)."""
    with contextlib.suppress(AlreadyExists):
        await admin.create(NODES, system_node())
