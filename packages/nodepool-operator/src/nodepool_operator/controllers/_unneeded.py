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

A named Node also carries :data:`CANDIDATE_TAINT` (``PreferNoSchedule``, as
cluster-autoscaler's ``DeletionCandidateOfClusterAutoscaler``): kube-scheduler then scores it
below the Nodes that stay, so a pod moved off one named Node (or created meanwhile) does not
land on the next one to go when another Node has room; the name and the taint come and go in
one JSON patch, which touches that one annotation and that one taint (guarded: the
taints are one list to the API server).

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

from nodepool_operator.controllers._node_fields import JsonPatch, NodeFields
from nodepool_operator.controllers._node_manifest import parse_time
from nodepool_operator.scheduling import Taint

__all__ = [
    "CANDIDATE_TAINT",
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
#: On a Node named unneeded, beside the annotation: the scheduler's last choice, not a refusal.
CANDIDATE_TAINT: Final = Taint("autoscaling.kubeloop.dev/deletion-candidate", "PreferNoSchedule")
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


def _pointer(token: str) -> str:
    """A JSON-pointer path segment (RFC 6901): ``~`` and ``/`` escaped."""
    return token.replace("~", "~0").replace("/", "~1")


_ANNOTATION_PATH: Final = f"/metadata/annotations/{_pointer(UNNEEDED_ANNOTATION)}"


def mark_patch(node: NodeFields, since: float) -> JsonPatch:
    """The JSON patch that names ``node`` (as read) unneeded since ``since`` (seconds since
    the epoch): the annotation, and :data:`CANDIDATE_TAINT` unless it has it. A Node's taints
    are one atomic list to the API server (a strategic merge patch replaces it whole), so the
    taint is appended, or the list created only if there still is none (a ``test`` of null):
    nothing another writer put there meanwhile is lost."""
    ops: JsonPatch = []
    stamp = format_time(since)
    if node.annotations is None:
        ops += [
            {"op": "test", "path": "/metadata/annotations", "value": None},
            {"op": "add", "path": "/metadata/annotations", "value": {UNNEEDED_ANNOTATION: stamp}},
        ]
    else:
        ops.append({"op": "add", "path": _ANNOTATION_PATH, "value": stamp})
    if node.taint(CANDIDATE_TAINT.key) is None:
        taint = {"key": CANDIDATE_TAINT.key, "effect": CANDIDATE_TAINT.effect}
        if node.taints is None:
            ops += [
                {"op": "test", "path": "/spec/taints", "value": None},
                {"op": "add", "path": "/spec/taints", "value": [taint]},
            ]
        else:
            ops.append({"op": "add", "path": "/spec/taints/-", "value": taint})
    return ops


def unmark_patch(node: NodeFields) -> JsonPatch:
    """The JSON patch that takes the name and :data:`CANDIDATE_TAINT` off ``node`` (as
    read); ``[]`` when it has neither. Each taint removed is tested first, so a list that
    shifted meanwhile is refused (422) rather than losing another taint."""
    ops: JsonPatch = []
    if UNNEEDED_ANNOTATION in (node.annotations or {}):
        ops.append({"op": "remove", "path": _ANNOTATION_PATH})
    taints = node.taints or ()
    for index in reversed(range(len(taints))):
        if taints[index].get("key") == CANDIDATE_TAINT.key:
            path = f"/spec/taints/{index}"
            ops += [
                {"op": "test", "path": path, "value": taints[index]},
                {"op": "remove", "path": path},
            ]
    return ops
