"""Kubelet-less Nodes that kube-scheduler will bind pods to."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

#: The annotation by which a Node opts in to kwok on a test bed that runs it
#: (``ControlPlaneOptions(kwok=True)``): kwok then plays that Node's kubelet.
KWOK_NODE_ANNOTATIONS: Final[Mapping[str, str]] = {"kwok.x-k8s.io/node": "fake"}
#: Where a Node's Lease lives (named like the Node).
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
_SILENT_HOLDER: Final = "kubeloop-silenced"
_SILENT_SECONDS: Final = 10**6


def silenced_lease_patch(now: dt.datetime | None = None) -> dict[str, Any]:
    """A merge patch for a Node's Lease that stops kwok's heartbeats for that Node only.

    kwok (v0.8.0) keeps renewing the Lease of a Node it once managed even after the Node
    loses its annotation; it stops only while another holder's Lease is unexpired. So the
    Lease is handed to a holder that never renews, for a very long duration: kwok leaves it
    (and the Node's status and pods) alone, while kube-controller-manager, which watches only
    ``renewTime``, sees no renewal and marks the Node ``Unknown`` after its grace period, as
    for a dead kubelet. Deleting the Lease lets kwok take the Node over again.
    """
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "spec": {
            "holderIdentity": _SILENT_HOLDER,
            "leaseDurationSeconds": _SILENT_SECONDS,
            "renewTime": stamp,
        }
    }


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
    kwok: bool = False,
) -> dict[str, Any]:
    """A Node object with capacity, allocatable (``pods`` included) and a Ready condition.

    The scheduler ignores conditions and leases, but rejects every pod on a node
    whose allocatable lacks ``pods``; status may be set on create, which is the
    only way to set it without a kubelet in one request.

    ``kwok=True``: annotated for kwok and created without conditions, so that kwok
    initialises it (Ready, node info, daemon endpoint) and heartbeats it from then on;
    ``ready`` is then ignored. Capacity and allocatable are kept as given.
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
    metadata: dict[str, Any] = {"name": name, "labels": all_labels}
    status: dict[str, Any] = {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }
    if kwok:
        metadata["annotations"] = dict(KWOK_NODE_ANNOTATIONS)
    else:
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet-less node created through the API",
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
