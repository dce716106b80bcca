"""How each kind is served: its resource names, scope, printer columns and subresources, and
the ``apiextensions.k8s.io/v1`` CustomResourceDefinition built from that and its types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kubeloop import Resource
from nodepool_operator.api._autoscaler import Autoscaler
from nodepool_operator.api._instance import Instance
from nodepool_operator.api._nodeclass import AwsNodeClass
from nodepool_operator.api._nodepool import NodePool
from nodepool_operator.api._schema import kind_schema

GROUP: Final = "kubeloop.dev"
VERSION: Final = "v1alpha1"

NODEPOOLS: Final = Resource(GROUP, VERSION, "nodepools", "NodePool", namespaced=False)
AUTOSCALERS: Final = Resource(GROUP, VERSION, "autoscalers", "Autoscaler", namespaced=False)
INSTANCES: Final = Resource(GROUP, VERSION, "instances", "Instance")
AWSNODECLASSES: Final = Resource(GROUP, VERSION, "awsnodeclasses", "AwsNodeClass", namespaced=False)

#: ``kubectl get kubeloop`` lists every kind of the operator.
CATEGORY: Final = "kubeloop"


@dataclass(frozen=True)
class _Column:
    name: str
    json_path: str
    type: str
    description: str
    priority: int = 0

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": self.description,
            "jsonPath": self.json_path,
            "name": self.name,
            "priority": self.priority,
            "type": self.type,
        }
        if not self.priority:
            del out["priority"]  # the apiserver's default; leaving it out keeps the YAML short
        return out


_AGE = _Column("Age", ".metadata.creationTimestamp", "date", "Time since creation.")


@dataclass(frozen=True)
class _Served:
    resource: Resource
    root: type
    columns: tuple[_Column, ...]
    short_names: tuple[str, ...] = ()
    scale: dict[str, str] | None = None
    status: bool = True
    """Whether the kind has a status (and so the status subresource)."""


_SERVED: Final = (
    _Served(
        NODEPOOLS,
        NodePool,
        (
            _Column("Target", ".spec.targetNodes", "integer", "Nodes wanted."),
            _Column("Ready", ".status.readyNodes", "integer", "Nodes registered and Ready."),
            _Column("Scaling", ".status.scaleOperation", "string", "Whether VMs are changing."),
            _Column("Type", ".spec.instanceType", "string", "The VMs' instance type.", 1),
            _AGE,
        ),
        short_names=("np",),
        # `kubectl scale nodepool/x --replicas=3` and anything speaking autoscaling/v1 Scale
        scale={
            "labelSelectorPath": ".status.selector",
            "specReplicasPath": ".spec.targetNodes",
            "statusReplicasPath": ".status.currentNodes",
        },
    ),
    _Served(
        AUTOSCALERS,
        Autoscaler,
        (
            _Column("Pool", ".spec.nodePoolRef.name", "string", "The NodePool it scales."),
            _Column(
                "Pending", ".status.unschedulablePods", "integer", "Pods unschedulable for size."
            ),
            _Column("Decision", ".status.lastDecision", "string", "The last scaling decision."),
            _AGE,
        ),
    ),
    _Served(
        INSTANCES,
        Instance,
        (
            _Column("ID", ".status.instanceId", "string", "The cloud's instance id."),
            _Column("State", ".status.state", "string", "The cloud's instance state."),
            _Column("IP", ".status.publicIP", "string", "The public address."),
            _AGE,
        ),
    ),
    _Served(
        AWSNODECLASSES,
        AwsNodeClass,
        (
            _Column("AMI", ".spec.amiId", "string", "The AMI id, if given directly."),
            _Column("SSM", ".spec.amiSsmParameter", "string", "The AMI's SSM parameter.", 1),
            _Column("Profile", ".spec.instanceProfile", "string", "The instance profile.", 1),
            _AGE,
        ),
        short_names=("anc",),
        status=False,  # settings only: no controller reconciles a node class
    ),
)


def _crd(served: _Served) -> dict[str, Any]:
    res = served.resource
    names: dict[str, Any] = {
        "categories": [CATEGORY],
        "kind": res.kind,
        "listKind": f"{res.kind}List",
        "plural": res.plural,
    }
    if served.short_names:
        names["shortNames"] = list(served.short_names)
    names["singular"] = res.kind.lower()
    subresources: dict[str, Any] = {}
    if served.scale is not None:
        subresources["scale"] = dict(served.scale)
    if served.status:
        subresources["status"] = {}
    version: dict[str, Any] = {
        "additionalPrinterColumns": [c.to_api() for c in served.columns],
        "name": res.version,
        "schema": {"openAPIV3Schema": kind_schema(served.root)},
        "served": True,
        "storage": True,
    }
    if subresources:
        version["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": res.key},
        "spec": {
            "group": res.group,
            "names": names,
            "scope": "Namespaced" if res.namespaced else "Cluster",
            "versions": [version],
        },
    }


def crds() -> list[dict[str, Any]]:
    """The operator's CRDs, NodePool first; the same objects on every call."""
    return [_crd(s) for s in _SERVED]
