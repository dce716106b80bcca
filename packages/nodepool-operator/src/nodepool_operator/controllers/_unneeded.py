"""Which nodes a scale-down takes: the Autoscaler names them, the NodePool controller removes
them.

Why: the Autoscaler decides *how many* nodes go (it lowers the pool's ``targetNodes`` once
nodes have been unneeded for ``scaleDownUnneededTime``) and the NodePool controller decides
*which* (it owns the records, the taint and the drain). Ranking the nodes again at the moment
of the removal may pick a node that was not unneeded for that long, or that only just emptied.

How: the Autoscaler annotates each Node it found unneeded for ``scaleDownUnneededTime``
(:data:`UNNEEDED_ANNOTATION`, the time it was first seen unneeded) under its own field manager
before it writes the lower target, and takes the annotation off a Node that is open for pods
again and no longer unneeded. The NodePool controller reads the annotation on its pool's Nodes
and removes annotated Nodes first (those whose pods can be evicted now before those a
PodDisruptionBudget holds), falling back to its own order for the rest: a pool scaled by hand
(``kubectl scale``) or with no Autoscaler behaves as before. A Node being drained keeps its
annotation (it goes with the Node); one whose drain timed out is open again and loses it
(its unneeded time starts afresh), so the next annotated Node is tried.

The unneeded times themselves stay in the Autoscaler's memory: after its restart they start
afresh, so the names come off and are put back once a node has been unneeded that long again
(a name never stands for longer than the Autoscaler has seen the node unneeded).

Only the Autoscaler writes the annotation; the NodePool controller only reads it.
Pure: the patches are values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["UNNEEDED_ANNOTATION", "is_marked", "mark_patch", "unmark_patch"]

#: On a pool's Node: unneeded since (RFC 3339), as the Autoscaler found it.
UNNEEDED_ANNOTATION: Final = "autoscaling.kubeloop.dev/unneeded-since"


def is_marked(node: Mapping[str, Any]) -> bool:
    """Whether the Autoscaler named ``node`` (a Node object) for a scale-down."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return UNNEEDED_ANNOTATION in annotations


def mark_patch(since: float) -> dict[str, Any]:
    """The merge patch that names a Node unneeded since ``since`` (seconds since the epoch).
    A merge patch touches that one annotation, whoever owns the others."""
    stamp = dt.datetime.fromtimestamp(int(since), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"annotations": {UNNEEDED_ANNOTATION: stamp}}}


def unmark_patch() -> dict[str, Any]:
    """The merge patch that takes the name off again."""
    return {"metadata": {"annotations": {UNNEEDED_ANNOTATION: None}}}
