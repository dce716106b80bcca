"""The NodePool controller's one reading of a Node: a frozen :class:`PoolNode`, decoded once
per pass by :mod:`.observe`, so :mod:`.decide` never digs into a Node's dict.

The record keeps the fields the patches compare against (:attr:`PoolNode.fields`, a
:class:`~nodepool_operator.controllers._node_fields.NodeFields`: the taints as stored, the
resourceVersion) and the Node as read (:attr:`PoolNode.raw`) for the Events :mod:`.act`
records, which name it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from kubeloop import Object
from nodepool_operator.cloud import instance_id_of
from nodepool_operator.controllers._node_fields import NodeFields, node_fields
from nodepool_operator.controllers._node_manifest import is_ready, ready_since
from nodepool_operator.controllers._reserve import reserved_for
from nodepool_operator.controllers._unneeded import is_marked, rest_left, timed_out_at
from nodepool_operator.controllers.nodepool._drain import disrupting_since, has_disrupting_taint
from nodepool_operator.controllers.nodepool._drift import drift_mark
from nodepool_operator.controllers.nodepool._repair import unhealthy_since
from nodepool_operator.scheduling import ScaleDownNode, node_view


@dataclass(frozen=True, slots=True)
class PoolNode:
    """What the controller reads of one of its pool's Nodes."""

    name: str
    instance_id: str = ""
    """The instance id of its providerID ("" when it has none yet)."""
    deleting: bool = False
    """Deleted by someone (a ``deletionTimestamp``); its finalizer holds it."""
    ready: bool = True
    """Its Ready condition is True."""
    ready_since: float | None = None
    """When Ready last changed (None: not said)."""
    tainted: bool = False
    """It carries the disrupting taint (chosen for removal)."""
    disrupting_since: float | None = None
    """When that taint was put on (the drain's start), if said."""
    timed_out_at: float | None = None
    """When its last scale-down drain timed out (annotation), if one did."""
    reserved: bool = False
    """It carries an Autoscaler reservation taint."""
    unhealthy: tuple[float, str] | None = None
    """Since when and why it is unhealthy, by the pool's repair conditions; None: healthy."""
    hold: str = ""
    """Its own do-not-disrupt annotation, as a blocker reads it."""
    unneeded: bool = False
    """The Autoscaler named it unneeded (:mod:`.._unneeded`): a scale-down removes it first."""
    drifted: str = ""
    """The drift reason it is marked with (:mod:`._drift`); "" when none."""
    fields: NodeFields = field(default_factory=lambda: NodeFields(""), compare=False, repr=False)
    """What :mod:`.act`'s guarded patches compare against (taints as stored, labels, ...)."""
    raw: Object = field(default_factory=dict, compare=False, repr=False)
    """The Node as read: for the Events :mod:`.act` records (they name it) and the
    scale-down view :mod:`.observe` reads of it."""

    @property
    def disrupting(self) -> bool:
        """Being disrupted as the cluster says: tainted for removal, or deleted."""
        return self.deleting or self.tainted

    @property
    def scaling_down(self) -> bool:
        """Whether its removal is a scale-down (voluntary: the blockers apply), not because
        someone deleted it (``kubectl delete node``: only the pods' own holds apply)."""
        return not self.deleting and self.ready

    def ready_for(self, now: float) -> float | None:
        """Seconds it has been Ready at ``now`` (never negative), or None when it is not
        Ready or says not since when."""
        if not self.ready or self.ready_since is None:
            return None
        return max(0.0, now - self.ready_since)

    def resting(self, now: float) -> float:
        """Seconds until a Node whose scale-down drain timed out may be chosen again."""
        return rest_left(self.timed_out_at, now)


@dataclass(frozen=True, slots=True)
class NodePods:
    """A Node's pods as a scale-down judges them (read only when a scale-down is looked at)."""

    view: ScaleDownNode
    empty: bool
    """No workload pod that has not finished runs on it (a scale-down of it is ``Empty``)."""


def decode_node(obj: Object, unhealthy_conditions: Collection[str] = ()) -> PoolNode:
    """The one place the controller reads a Node's dict."""
    meta = obj.get("metadata") or {}
    fields = node_fields(obj)
    provider = (obj.get("spec") or {}).get("providerID") or ""
    return PoolNode(
        name=str(meta.get("name") or ""),
        instance_id=instance_id_of(provider) if provider else "",
        deleting=bool(meta.get("deletionTimestamp")),
        ready=is_ready(obj),
        ready_since=ready_since(obj),
        tainted=has_disrupting_taint(fields),
        disrupting_since=disrupting_since(fields),
        timed_out_at=timed_out_at(obj),
        reserved=reserved_for(fields) is not None,
        unhealthy=unhealthy_since(obj, unhealthy_conditions),
        hold=node_view(obj).hold,
        unneeded=is_marked(obj),
        drifted=drift_mark(obj),
        fields=fields,
        raw=obj,
    )
