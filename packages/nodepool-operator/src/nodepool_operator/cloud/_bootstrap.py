"""What a simulated VM's kubelet registers its Node with, carried in the VM's user data.

The operator never creates Nodes: it launches a VM whose user data tells the kubelet how to
join, and the kubelet registers the Node. On EC2 that user data is nodeadm's NodeConfig
(:mod:`._nodeconfig`), which the moto kubelets read too. :class:`NodeBootstrap` is the
simulated cloud's own, for pools without a node class: the operator encodes it into
:attr:`CreateRequest.user_data`; the simulated VM side (:mod:`nodepool_operator.testbed`)
decodes it and registers the Node from it and the VM (:func:`registered_node`). It never goes
to EC2's kubelets (a real AMI would ignore it).

``capacity`` stands in for what a kubelet reads from its machine; a simulated VM has only its
instance type (and a pool's cpu/memory overrides), so the operator states it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: ``spec.providerID`` of a simulated VM's Node is this plus the instance id.
PROVIDER_ID_PREFIX: Final = "sim:///"
_FORMAT: Final = "kubeloop.dev/node-bootstrap/v1"


def provider_id(instance_id: str) -> str:
    return PROVIDER_ID_PREFIX + instance_id


def instance_id_of(provider: str) -> str:
    """The instance id at the end of a providerID (``sim:///i-1``, ``aws:///zone/i-1``)."""
    return provider.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeBootstrap:
    """The kubelet's registration settings: Node name, labels, taints and capacity."""

    node_name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    """API taints: ``{"key", "effect"}`` and an optional ``"value"``."""
    capacity: dict[str, str] = field(default_factory=dict)

    def encode(self) -> str:
        """Deterministic (sorted keys): the same settings are the same user data, so a
        repeated create with the same idempotency token matches the first one."""
        body = {
            "format": _FORMAT,
            "nodeName": self.node_name,
            "labels": self.labels,
            "taints": list(self.taints),
            "capacity": self.capacity,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, user_data: str) -> NodeBootstrap | None:
        """The settings in ``user_data``, or None if it holds none (a VM that is no node)."""
        try:
            body = json.loads(user_data) if user_data else None
        except ValueError:
            return None
        if not isinstance(body, dict) or body.get("format") != _FORMAT:
            return None
        return cls(
            node_name=str(body["nodeName"]),
            labels={str(k): str(v) for k, v in (body.get("labels") or {}).items()},
            taints=tuple({str(k): str(v) for k, v in t.items()} for t in body.get("taints") or ()),
            capacity={str(k): str(v) for k, v in (body.get("capacity") or {}).items()},
        )


def registered_node(
    bootstrap: NodeBootstrap,
    *,
    instance_id: str,
    private_ip: str,
    public_ip: str | None,
    annotations: Mapping[str, str] | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    """The Node a kubelet registers for its VM: no conditions yet (the kubelet, here kwok,
    reports them once it runs), capacity and allocatable as stated, the VM's addresses.
    ``provider`` is its ``spec.providerID``; default the simulated cloud's."""
    addresses = [{"type": "InternalIP", "address": private_ip}]
    if public_ip:
        addresses.append({"type": "ExternalIP", "address": public_ip})
    addresses.append(
        {
            "type": "Hostname",
            "address": bootstrap.labels.get("kubernetes.io/hostname", bootstrap.node_name),
        }
    )
    metadata: dict[str, Any] = {"name": bootstrap.node_name, "labels": dict(bootstrap.labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {
            "providerID": provider or provider_id(instance_id),
            "taints": [dict(t) for t in bootstrap.taints],
        },
        "status": {
            "capacity": dict(bootstrap.capacity),
            "allocatable": dict(bootstrap.capacity),
            "addresses": addresses,
        },
    }
