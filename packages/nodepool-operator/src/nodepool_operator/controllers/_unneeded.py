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

The other way round, the NodePool controller stamps a Node whose scale-down drain timed out
(:data:`DRAIN_TIMED_OUT_AT`, its annotation) and leaves it out of its choice for
:data:`RECHECK_SECONDS`; the Autoscaler reads the stamp and does not count the Node unneeded
meanwhile, so it never names (and lowers the target for) a Node the NodePool controller would
not take, which would send the scale-down to a Node nobody found unneeded.

Pure: the patches are values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from nodepool_operator.controllers._node_manifest import parse_time

__all__ = [
    "DRAIN_TIMED_OUT_AT",
    "RECHECK_SECONDS",
    "UNNEEDED_ANNOTATION",
    "format_time",
    "is_marked",
    "mark_patch",
    "parse_time",
    "rest_left",
    "timed_out_at",
    "unmark_patch",
]

#: On a pool's Node: unneeded since (RFC 3339), as the Autoscaler found it.
UNNEEDED_ANNOTATION: Final = "autoscaling.kubeloop.dev/unneeded-since"
#: On a pool's Node: when its scale-down drain was given up (RFC 3339), by the NodePool
#: controller.
DRAIN_TIMED_OUT_AT: Final = "kubeloop.dev/drain-timed-out-at"
#: How long a node whose drain timed out is left out of scale-down (cluster-autoscaler's
#: unremovable-node-recheck-timeout, 5m).
RECHECK_SECONDS: Final = 300.0


def format_time(seconds: float) -> str:
    """An RFC 3339 time in UTC, to the second, as the API server writes them."""
    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rest_left(timed_out_at: float | None, now: float) -> float:
    """Seconds until a node whose scale-down drain timed out at ``timed_out_at`` may be
    chosen again (0: it may, or it never timed out: None)."""
    if timed_out_at is None:
        return 0.0
    return max(0.0, timed_out_at + RECHECK_SECONDS - now)


def timed_out_at(node: Mapping[str, Any]) -> float | None:
    """When the NodePool controller gave up draining ``node`` (a Node object), if it did."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return parse_time(annotations.get(DRAIN_TIMED_OUT_AT))


def is_marked(node: Mapping[str, Any]) -> bool:
    """Whether the Autoscaler named ``node`` (a Node object) for a scale-down."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return UNNEEDED_ANNOTATION in annotations


def mark_patch(since: float) -> dict[str, Any]:
    """The merge patch that names a Node unneeded since ``since`` (seconds since the epoch).
    A merge patch touches that one annotation, whoever owns the others."""
    return {"metadata": {"annotations": {UNNEEDED_ANNOTATION: format_time(since)}}}


def unmark_patch() -> dict[str, Any]:
    """The merge patch that takes the name off again."""
    return {"metadata": {"annotations": {UNNEEDED_ANNOTATION: None}}}
