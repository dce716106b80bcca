"""How each kind is served: its resource names, scope, printer columns and subresources, as
:class:`kubeloop.crd.CustomResource` definitions, and the CRDs built from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kubeloop.crd import AGE, CustomResource, PrinterColumn, Scale, Version
from nodepool_operator.api._autoscaler import Autoscaler
from nodepool_operator.api._autoscaler_v1beta1 import AutoscalerV1beta1
from nodepool_operator.api._conversion import BETA
from nodepool_operator.api._instance import Instance
from nodepool_operator.api._instance_v1beta1 import InstanceV1beta1
from nodepool_operator.api._nodeclass import AwsNodeClass
from nodepool_operator.api._nodepool import NodePool
from nodepool_operator.api._nodepool_v1beta1 import NodePoolV1beta1

GROUP: Final = "kubeloop.dev"
VERSION: Final = "v1alpha1"
#: ``kubectl get kubeloop`` lists every kind of the operator.
CATEGORY: Final = "kubeloop"

# `kubectl get nodepools -o wide`: where the pool can launch now
_ZONES: Final = PrinterColumn(
    "Zones", ".status.zones", "string", "The zones the pool can launch into now.", 1
)
_NODEPOOL_V1ALPHA1: Final = Version(
    VERSION,
    NodePool,
    (
        PrinterColumn("Target", ".spec.targetNodes", "integer", "Nodes wanted."),
        PrinterColumn("Ready", ".status.readyNodes", "integer", "Nodes registered and Ready."),
        PrinterColumn("Scaling", ".status.scaleOperation", "string", "Whether VMs are changing."),
        PrinterColumn("Type", ".spec.instanceType", "string", "The VMs' instance type.", 1),
        _ZONES,
        AGE,
    ),
    # `kubectl scale nodepool/x --replicas=3` and anything speaking autoscaling/v1 Scale
    scale=Scale(
        spec_replicas_path=".spec.targetNodes",
        status_replicas_path=".status.currentNodes",
        label_selector_path=".status.selector",
    ),
)
# the same columns and scale at v1beta1's paths (see _nodepool_v1beta1 for why they moved)
_NODEPOOL_V1BETA1: Final = Version(
    BETA,
    NodePoolV1beta1,
    (
        PrinterColumn("Target", ".spec.size.target", "integer", "Nodes wanted."),
        PrinterColumn("Ready", ".status.readyNodes", "integer", "Nodes registered and Ready."),
        PrinterColumn("Scaling", ".status.scaleOperation", "string", "Whether VMs are changing."),
        PrinterColumn(
            "Type", ".spec.template.spec.instanceType", "string", "The VMs' instance type.", 1
        ),
        _ZONES,
        AGE,
    ),
    scale=Scale(
        spec_replicas_path=".spec.size.target",
        status_replicas_path=".status.currentNodes",
        label_selector_path=".status.selector",
    ),
)
NODEPOOL: Final = CustomResource(
    GROUP,
    "NodePool",
    "nodepools",
    (_NODEPOOL_V1ALPHA1,),
    namespaced=False,
    short_names=("np",),
    categories=(CATEGORY,),
)


def nodepool_served_as_v1beta1(client_config: Mapping[str, Any]) -> CustomResource:
    """NodePool served as v1alpha1 and v1beta1, v1beta1 stored, converted by the operator's
    webhook at ``client_config`` (the CRD's ``conversion.webhook.clientConfig``: a
    ``service`` in a cluster, a ``url`` in tests; ``caBundle`` or cert-manager's CA
    injector makes the apiserver trust it). docs/versions.md says why ``NODEPOOL`` (what
    config/crd holds, for an install without the webhook) serves and stores v1alpha1 only."""
    return _with_conversion(NODEPOOL, _NODEPOOL_V1BETA1, client_config)


def _with_conversion(
    kind: CustomResource, beta: Version, client_config: Mapping[str, Any]
) -> CustomResource:
    """``kind`` serving ``beta`` too and storing it, converted by the webhook.

    Stored as v1beta1 because where this CRD is installed the webhook is too, and v1beta1 is
    what kubectl and other clients prefer; the controllers still read v1alpha1, the one
    version every install serves, and the apiserver converts for them (docs/versions.md)."""
    webhook = {"clientConfig": dict(client_config), "conversionReviewVersions": ["v1"]}
    return replace(
        kind,
        versions=(*kind.versions, beta),
        storage=BETA,
        conversion={"strategy": "Webhook", "webhook": webhook},
    )


_AUTOSCALER_COLUMNS: Final = (
    PrinterColumn("Pool", ".spec.nodePoolRef.name", "string", "The NodePool it scales."),
    PrinterColumn(
        "Pending", ".status.unschedulablePods", "integer", "Pods unschedulable for size."
    ),
    PrinterColumn("Decision", ".status.lastDecision", "string", "The last scaling decision."),
    AGE,
)
AUTOSCALER: Final = CustomResource(
    GROUP,
    "Autoscaler",
    "autoscalers",
    (Version(VERSION, Autoscaler, _AUTOSCALER_COLUMNS),),
    namespaced=False,
    categories=(CATEGORY,),
)


def autoscaler_served_as_v1beta1(client_config: Mapping[str, Any]) -> CustomResource:
    """Autoscaler served as v1alpha1 and v1beta1, as :func:`nodepool_served_as_v1beta1`."""
    beta = Version(BETA, AutoscalerV1beta1, _AUTOSCALER_COLUMNS)
    return _with_conversion(AUTOSCALER, beta, client_config)


_INSTANCE_COLUMNS: Final = (
    PrinterColumn("ID", ".status.instanceId", "string", "The cloud's instance id."),
    PrinterColumn("State", ".status.state", "string", "The cloud's instance state."),
    PrinterColumn("IP", ".status.publicIP", "string", "The public address."),
    AGE,
)
INSTANCE: Final = CustomResource(
    GROUP,
    "Instance",
    "instances",
    (Version(VERSION, Instance, _INSTANCE_COLUMNS),),
    categories=(CATEGORY,),
)


def instance_served_as_v1beta1(client_config: Mapping[str, Any]) -> CustomResource:
    """Instance served as v1alpha1 and v1beta1, as :func:`nodepool_served_as_v1beta1`."""
    beta = Version(BETA, InstanceV1beta1, _INSTANCE_COLUMNS)
    return _with_conversion(INSTANCE, beta, client_config)


# settings only, no status: no controller reconciles a node class
AWSNODECLASS: Final = CustomResource(
    GROUP,
    "AwsNodeClass",
    "awsnodeclasses",
    (
        Version(
            VERSION,
            AwsNodeClass,
            (
                PrinterColumn("AMI", ".spec.amiId", "string", "The AMI id, if given directly."),
                PrinterColumn(
                    "SSM", ".spec.amiSsmParameter", "string", "The AMI's SSM parameter.", 1
                ),
                PrinterColumn(
                    "Profile", ".spec.instanceProfile", "string", "The instance profile.", 1
                ),
                AGE,
            ),
        ),
    ),
    namespaced=False,
    short_names=("anc",),
    categories=(CATEGORY,),
)

#: Every kind of the operator, NodePool first (``kubeloop manifests nodepool_operator.api``).
CUSTOM_RESOURCES: Final = (NODEPOOL, AUTOSCALER, INSTANCE, AWSNODECLASS)

NODEPOOLS: Final = NODEPOOL.resource()
AUTOSCALERS: Final = AUTOSCALER.resource()
INSTANCES: Final = INSTANCE.resource()
AWSNODECLASSES: Final = AWSNODECLASS.resource()


def crds() -> list[dict[str, Any]]:
    """The operator's CRDs, NodePool first; the same objects on every call."""
    return [c.definition() for c in CUSTOM_RESOURCES]
