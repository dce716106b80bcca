"""Keeping a registered Node's labels, taints and finalizer in line with its pool. Pure.

The kubelet registers a Node with the labels and taints of its VM's launch; from then on the
NodePool controller owns the pool's ``spec.labels`` and ``spec.taints`` on it, and only
those: every other label and taint (the kubelet's well-known labels, the node lifecycle
controller's ``not-ready``/``unreachable`` taints, a cordon, a scale-down taint) is left as it
is. To remove a key that left the spec it must know which keys it put there, so it records
them on the Node in the :data:`OWNED_ANNOTATION` (as ``kubectl apply`` keeps its last
applied configuration), and it changes everything in one JSON patch. Each op that replaces a
whole list or map (the taints, a missing labels/annotations map, a missing finalizer list) is
preceded by a ``test`` of its value as read (``null`` for absent, which kube-apiserver's JSON
patch treats as "missing"): a taint added meanwhile makes the server refuse the patch (422)
instead of losing it. The guard is on those fields, not the resourceVersion, because a
kubelet's (or kwok's) status heartbeats move the resourceVersion every few seconds and would
refuse a patch that touches nothing they changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nodepool_operator.controllers._node_fields import JsonPatch, NodeFields

#: Which labels and taints of this Node the NodePool controller set (JSON).
OWNED_ANNOTATION: Final = "kubeloop.dev/nodepool-owned"

TaintId = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Owned:
    labels: frozenset[str] = frozenset()
    taints: frozenset[TaintId] = frozenset()

    def encode(self) -> str:
        body = {
            "labels": sorted(self.labels),
            "taints": [f"{k}:{e}" for k, e in sorted(self.taints)],
        }
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> Owned:
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        taints = set()
        for entry in body.get("taints") or ():
            key, _, effect = str(entry).rpartition(":")
            if key:
                taints.add((key, effect))
        return cls(frozenset(str(k) for k in body.get("labels") or ()), frozenset(taints))


def _pointer(token: str) -> str:
    """A JSON-pointer path segment (RFC 6901): ``~`` and ``/`` escaped."""
    return token.replace("~", "~0").replace("/", "~1")


def _tid(taint: Mapping[str, Any]) -> TaintId:
    return (str(taint.get("key", "")), str(taint.get("effect", "")))


def _tval(taint: Mapping[str, Any]) -> tuple[str, str, str]:
    return (*_tid(taint), str(taint.get("value") or ""))


def sync_patch(
    node: NodeFields,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    finalizers: Iterable[str] = (),
) -> JsonPatch:
    """The JSON patch that makes ``node`` carry ``labels``, ``taints`` and ``finalizers``
    as the pool's, removing the ones it owned before that are no longer wanted; ``[]`` when
    nothing needs to change."""
    current_labels: Mapping[str, str] = node.labels or {}
    annotations: Mapping[str, str] = node.annotations or {}
    owned = Owned.decode(annotations.get(OWNED_ANNOTATION))
    ops: JsonPatch = []

    def replace(path: str, read: Any, value: Any) -> None:
        # replacing a whole value: only if it is still what we read
        ops.append({"op": "test", "path": path, "value": read})
        ops.append({"op": "add", "path": path, "value": value})

    label_ops: JsonPatch = []
    for key in sorted(owned.labels - set(labels)):
        if key in current_labels:
            label_ops.append({"op": "remove", "path": f"/metadata/labels/{_pointer(key)}"})
    for key, value in sorted(labels.items()):
        if current_labels.get(key) != value:
            label_ops.append(
                {"op": "add", "path": f"/metadata/labels/{_pointer(key)}", "value": value}
            )
    if label_ops and node.labels is None:
        replace("/metadata/labels", None, {})
    ops += label_ops

    current_taints: list[Mapping[str, Any]] = list(node.taints or ())
    managed = owned.taints | {_tid(t) for t in taints}
    mine = {_tval(t) for t in current_taints if _tid(t) in managed}
    if mine != {_tval(t) for t in taints}:
        kept = [dict(t) for t in current_taints if _tid(t) not in managed]
        read = None if node.taints is None else list(node.taints)
        replace("/spec/taints", read, kept + [dict(t) for t in taints])

    now_owned = Owned(frozenset(labels), frozenset(_tid(t) for t in taints)).encode()
    if annotations.get(OWNED_ANNOTATION) != now_owned:
        if node.annotations is None:
            replace("/metadata/annotations", None, {})
        ops.append(
            {
                "op": "add",
                "path": f"/metadata/annotations/{_pointer(OWNED_ANNOTATION)}",
                "value": now_owned,
            }
        )

    present = list(node.finalizers or ())
    missing = [f for f in finalizers if f not in present]
    if missing:
        if node.finalizers is None:
            replace("/metadata/finalizers", None, missing)
        else:
            ops += [{"op": "add", "path": "/metadata/finalizers/-", "value": f} for f in missing]
    return ops
