"""The fields of a Node that the controllers' patches compare against, read once.

A Node patch is built from what the controller read (the taints it adds to or removes from,
the labels and annotations it owns, the finalizers) and guarded by it: a ``test`` op names an
element exactly as the server stores it, or the resourceVersion. So the record keeps those
fields as read, taint entries included, and says when a list or map was absent (an ``add`` of a
whole list is guarded differently from an append). The drain taint, the label and taint sync
and the reservation read this record, never the Node's dict; only the patch they return is raw,
because that is what the server takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop import Object

__all__ = ["JsonPatch", "NodeFields", "node_fields"]

JsonPatch = list[dict[str, Any]]
"""An RFC 6902 patch, as the Node patches built from :class:`NodeFields` are sent."""


@dataclass(frozen=True, slots=True)
class NodeFields:
    """A Node's patchable fields as read.

    Attributes:
        name: ``metadata.name``.
        resource_version: ``metadata.resourceVersion`` (``None`` when unset: a hand-made Node).
        labels: ``metadata.labels``, ``None`` when the Node has no labels map.
        annotations: ``metadata.annotations``, ``None`` when it has none.
        finalizers: ``metadata.finalizers``, ``None`` when it has none.
        taints: ``spec.taints`` entries as stored (a guarded patch tests them as they are),
            ``None`` when it has no taint list.
    """

    name: str
    resource_version: str | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    finalizers: tuple[str, ...] | None = None
    taints: tuple[Mapping[str, Any], ...] | None = None

    def taint(self, key: str) -> Mapping[str, Any] | None:
        """The first taint of ``key``, or None."""
        return next(
            (t for t in self.taints or () if isinstance(t, Mapping) and t.get("key") == key), None
        )


def node_fields(node: Object) -> NodeFields:
    """Read ``node`` into :class:`NodeFields`; entries of the wrong type read as absent."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    labels, annotations = meta.get("labels"), meta.get("annotations")
    finalizers, taints = meta.get("finalizers"), spec.get("taints")
    version = meta.get("resourceVersion")
    return NodeFields(
        name=str(meta.get("name") or ""),
        resource_version=version if isinstance(version, str) else None,
        labels=labels if isinstance(labels, Mapping) else None,
        annotations=annotations if isinstance(annotations, Mapping) else None,
        finalizers=tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else None,
        taints=tuple(taints) if isinstance(taints, list) else None,
    )
