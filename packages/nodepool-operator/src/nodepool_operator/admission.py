"""The operator's validating admission webhook: rules CEL cannot state, because they look
at other objects.

* An Autoscaler may not target a NodePool that another Autoscaler already targets (two
  would fight over the pool's ``spec.targetNodes``).
* A NodePool may not name an AwsNodeClass that does not exist.

The decisions (:func:`decide_autoscaler`, :func:`decide_nodepool`) are pure; the
:class:`PoolAdmission` handlers feed them what they read.

Read-your-writes: the handlers read live from the apiserver, not from the operator's
informers. An Autoscaler created a moment ago may not have reached the cache yet (or a
standby replica may have no warm cache at all), and a stale read here would admit the very
duplicate the webhook exists to refuse. A live LIST of Autoscalers and a GET of one node
class are cheap next to a human's ``kubectl apply``, and exact for every write the apiserver
completed before this call. What no webhook can order is two creates admitted at the same
time: each may pass before the other is stored. The controllers' conditions stay for that
case and for clusters without the webhook installed (``ConflictingAutoscaler`` on the
younger Autoscaler; ``NodeClassUnavailable`` on the pool).

The Autoscaler rule counts every Autoscaler in the cluster, whatever the operator's
``--label-selector``: a pool scaled from two shards is as contested as one scaled twice in one.

UPDATEs are checked only when the reference itself changes, so a pool whose class was
deleted later, or an Autoscaler that predates the webhook, can still be edited, scaled and
finalized (the operator's own writes included).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kubeloop import Admission, AdmissionRequest, Cause, Client, NotFound, WebhookServer
from nodepool_operator.api import AUTOSCALERS, AWSNODECLASSES

__all__ = [
    "AUTOSCALER_PATH",
    "NODEPOOL_PATH",
    "NODE_CLASS_REF_FIELD",
    "POOL_REF_FIELD",
    "PoolAdmission",
    "decide_autoscaler",
    "decide_nodepool",
]

log = logging.getLogger("nodepool_operator.admission")

#: Paths served, named as Kubebuilder names them (config/webhook's manifest calls these).
AUTOSCALER_PATH: Final = "/validate-kubeloop-dev-v1alpha1-autoscaler"
NODEPOOL_PATH: Final = "/validate-kubeloop-dev-v1alpha1-nodepool"
#: The fields the denials point at (``details.causes[].field``).
POOL_REF_FIELD: Final = "spec.nodePoolRef.name"
NODE_CLASS_REF_FIELD: Final = "spec.nodeClassRef.name"


def _ref(obj: Mapping[str, Any] | None, ref: str) -> str:
    """``spec.<ref>.name``, or "" when absent (the CRD schema has already checked types)."""
    spec = (obj or {}).get("spec")
    target = spec.get(ref) if isinstance(spec, Mapping) else None
    name = target.get("name") if isinstance(target, Mapping) else None
    return name if isinstance(name, str) else ""


def _changed(req: AdmissionRequest, ref: str) -> bool:
    """Whether this request sets the reference: always on CREATE, on UPDATE only if it moved."""
    return req.operation == "CREATE" or _ref(req.object, ref) != _ref(req.old_object, ref)


def decide_autoscaler(name: str, pool: str, others: Iterable[Mapping[str, Any]]) -> Admission:
    """Admit Autoscaler ``name`` targeting NodePool ``pool`` unless one of ``others`` (every
    Autoscaler the cluster has) already targets it. Itself and Autoscalers being deleted do
    not count."""
    rivals = sorted(
        str(o["metadata"]["name"])
        for o in others
        if o["metadata"].get("name") != name
        and not o["metadata"].get("deletionTimestamp")
        and _ref(o, "nodePoolRef") == pool
    )
    if not rivals:
        return Admission.allow()
    message = (
        f"NodePool {pool} is already scaled by Autoscaler {rivals[0]}: "
        "one Autoscaler per NodePool (edit that one, or point this one at another pool)"
    )
    return Admission.deny(message, Cause("FieldValueDuplicate", message, POOL_REF_FIELD))


def decide_nodepool(node_class: str, exists: bool) -> Admission:
    """Admit a NodePool naming AwsNodeClass ``node_class`` only if it ``exists``."""
    if exists:
        return Admission.allow()
    message = (
        f"{NODE_CLASS_REF_FIELD}: AwsNodeClass {node_class} not found: create it first "
        "(the pool cannot launch nodes without it)"
    )
    return Admission.deny(message, Cause("FieldValueNotFound", message, NODE_CLASS_REF_FIELD))


class PoolAdmission:
    """The webhook's handlers, reading live through ``client`` (see the module's
    docstring for why not the cache)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def register(self, server: WebhookServer) -> None:
        server.add_validating(AUTOSCALER_PATH, self.validate_autoscaler)
        server.add_validating(NODEPOOL_PATH, self.validate_nodepool)

    async def validate_autoscaler(self, req: AdmissionRequest) -> Admission | None:
        pool = _ref(req.object, "nodePoolRef")
        if not pool or not _changed(req, "nodePoolRef"):
            return None
        listed = await self.client.list(AUTOSCALERS)
        return decide_autoscaler(req.name, pool, listed["items"])

    async def validate_nodepool(self, req: AdmissionRequest) -> Admission | None:
        node_class = _ref(req.object, "nodeClassRef")
        if not node_class or not _changed(req, "nodeClassRef"):
            return None
        try:
            await self.client.get(AWSNODECLASSES, node_class)
        except NotFound:
            return decide_nodepool(node_class, exists=False)
        return decide_nodepool(node_class, exists=True)
