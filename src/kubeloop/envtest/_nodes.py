"""Kubelet-less Nodes that kube-scheduler will bind pods to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    ephemeral_storage: str = "100Gi",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    provider_id: str | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node object with capacity, allocatable (``pods`` included) and a Ready condition.

    The scheduler ignores conditions and leases, but rejects every pod on a node
    whose allocatable lacks ``pods``; status may be set on create, which is the
    only way to set it without a kubelet in one request.
    """
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": ephemeral_storage}
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **(labels or {}),
    }
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if provider_id:
        spec["providerID"] = provider_id
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet-less node created through the API",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        },
    }
