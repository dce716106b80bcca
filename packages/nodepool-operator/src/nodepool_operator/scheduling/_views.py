"""Typed views of Pods and Nodes: the frozen records the simulation works on.

:mod:`._pods` reads the API's dicts into these records, once, at the boundary (missing or
mistyped reads as empty: a pod the API server accepted is well formed); every other module
reads their attributes, so a pod's requests and constraints are computed once per look rather
than once per node it is checked against, and no field is read through a getter again.

*A workload pod* (:attr:`PodView.workload`, read by :func:`~._pods.is_workload`) is one that
makes a node needed: DaemonSet pods and static (mirror) pods do not, they come with every node
and go with it. The NodePool controller's scale-down and drain and the Autoscaler's "empty
node" use that same definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ._quantity import Resources

if TYPE_CHECKING:  # the records name them; _pods reads the dicts into the records
    from ._pods import PodRef
    from ._template import Taint

__all__ = [
    "DO_NOT_DISRUPT",
    "HOSTNAME_KEY",
    "KARPENTER_DO_NOT_DISRUPT",
    "LEGACY_ZONE_KEY",
    "REGION_KEY",
    "SAFE_TO_EVICT",
    "SCALE_DOWN_DISABLED",
    "ZONE_KEY",
    "HostPort",
    "LabelSelector",
    "NodeSelectorTerm",
    "NodeView",
    "PodAffinityTerm",
    "PodView",
    "References",
    "Requirement",
    "SpreadConstraint",
    "Toleration",
]

#: A pod annotated ``kubeloop.dev/do-not-disrupt: "true"`` is never evicted by scale-down: its
#: node stays until the pod ends or the annotation goes (Karpenter's
#: ``karpenter.sh/do-not-disrupt``).
DO_NOT_DISRUPT: Final = "kubeloop.dev/do-not-disrupt"
#: Karpenter's spelling of the same hold, honoured alike on pods and nodes, so workloads
#: annotated for Karpenter keep their meaning here.
KARPENTER_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
#: cluster-autoscaler's per-pod switch: ``"false"`` holds the pod's node like do-not-disrupt;
#: ``"true"`` lifts the default blockers (no controller, local storage, kube-system).
SAFE_TO_EVICT: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"
#: cluster-autoscaler's per-node switch: ``"true"`` keeps the node from scale-down.
SCALE_DOWN_DISABLED: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
HOSTNAME_KEY: Final = "kubernetes.io/hostname"
ZONE_KEY: Final = "topology.kubernetes.io/zone"
#: The zone's label before Kubernetes 1.17; PersistentVolumes made by old provisioners still
#: name it in their node affinity. Read as :data:`ZONE_KEY` (the same zone).
LEGACY_ZONE_KEY: Final = "failure-domain.beta.kubernetes.io/zone"
REGION_KEY: Final = "topology.kubernetes.io/region"
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


# --- selectors --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry: ``key operator values``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Node-selector semantics (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``,
        ``Lt``); unknown operators never match, as in the scheduler."""
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case "In":
                return present and value in self.values
            case "NotIn":
                return not present or value not in self.values
            case "Exists":
                return present
            case "DoesNotExist":
                return not present
            case "Gt" | "Lt":
                if not present or len(self.values) != 1:
                    return False
                if not (_INTEGER.fullmatch(value) and _INTEGER.fullmatch(self.values[0])):
                    return False
                if self.operator == "Gt":
                    return int(value) > int(self.values[0])
                return int(value) < int(self.values[0])
        return False

    def matches_field(self, node_name: str | None) -> bool:
        """A ``matchFields`` entry: only ``metadata.name``, unknown for a node not yet made."""
        if node_name is None or self.key != "metadata.name":
            return False
        if self.operator == "In":
            return node_name in self.values
        if self.operator == "NotIn":
            return node_name not in self.values
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{', '.join(self.values)}]"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One of a required node affinity's ``nodeSelectorTerms`` (terms are ORed)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def failure(self, labels: Mapping[str, str], node_name: str | None) -> str:
        """The first requirement that fails, rendered; ``""`` when the term matches."""
        if not self.expressions and not self.fields:
            return "empty nodeSelectorTerm"  # the API defines an empty term as matching nothing
        for requirement in self.expressions:
            if not requirement.matches(labels):
                return str(requirement)
        for requirement in self.fields:
            if not requirement.matches_field(node_name):
                return str(requirement)
        return ""


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``. ``everything`` for ``{}``; a missing selector is ``None``
    at the call sites, which match nothing (as in pod affinity terms)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Label-selector semantics: every ``matchLabels`` entry and every expression hold."""
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        return all(_selector_matches(e, labels) for e in self.expressions)

    def with_labels(self, extra: Iterable[tuple[str, str]]) -> LabelSelector:
        return LabelSelector(tuple(sorted({*self.match_labels, *extra})), self.expressions)


def _selector_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    # Label selectors know In, NotIn, Exists, DoesNotExist; the same meaning as for nodes.
    if requirement.operator in ("In", "NotIn", "Exists", "DoesNotExist"):
        return requirement.matches(labels)
    return False


# --- tolerations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint``: effect and key empty or equal, and ``Exists`` or an
        equal value. An empty key with ``Exists`` tolerates every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


# --- inter-pod constraints ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term: pods matching ``selector`` in ``namespaces``
    (``None``: every namespace) within the same ``topology_key`` domain."""

    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    topology_key: str

    def selects(self, pod: PodView) -> bool:
        """Whether ``pod`` is one of the pods this term is about."""
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.ref.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``topologySpreadConstraints`` entry with ``whenUnsatisfiable: DoNotSchedule``.

    ``honor_node_affinity``/``honor_taints``: which nodes count as domains (the
    ``nodeAffinityPolicy``/``nodeTaintsPolicy`` defaults are Honor and Ignore).
    """

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_taints: bool = False

    def counts(self, pod: PodView, namespace: str) -> bool:
        """Whether ``pod`` counts toward this constraint (same namespace, selector matches)."""
        return (
            self.selector is not None
            and pod.ref.namespace == namespace
            and self.selector.matches(pod.labels)
        )


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the node: ``hostIP`` (``0.0.0.0`` for all), protocol, port."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


# --- the views --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class References:
    """The objects in a pod's namespace that must exist before it can start: its
    non-optional Secrets, ConfigMaps and claims, each once, in spec order."""

    secrets: tuple[str, ...] = ()
    config_maps: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodView:
    """What the simulation needs of a Pod, read once.

    Attributes:
        ref: namespace and name.
        uid: ``metadata.uid``.
        labels: the pod's labels.
        node_name: ``spec.nodeName`` (``""`` when not bound).
        phase: ``status.phase``.
        terminating: ``metadata.deletionTimestamp`` is set.
        nominated: ``status.nominatedNodeName``, ``None`` when not nominated (the scheduler's
            nomination, preemption's or ours: see ``controllers.autoscaler._nominations``).
        version: ``metadata.resourceVersion``: a write made from this read names it as its
            precondition.
        requests: the effective request (see :func:`~._pods.pod_requests`), ``pods=1``.
        node_selector: ``spec.nodeSelector``.
        required_terms: required node affinity's terms, ``None`` when it has none.
        tolerations: the pod's tolerations.
        affinity: required pod affinity terms.
        anti_affinity: required pod anti-affinity terms.
        spread: ``DoNotSchedule`` topology spread constraints.
        host_ports: ports bound on the node.
        workload: :func:`is_workload`.
        do_not_disrupt: an annotation forbids evicting it (:attr:`hold` names it).
        hold: the annotation that forbids evicting it: :data:`DO_NOT_DISRUPT` or
            :data:`KARPENTER_DO_NOT_DISRUPT` ``"true"``, or :data:`SAFE_TO_EVICT` ``"false"``;
            ``""`` if none.
        safe_to_evict: annotated :data:`SAFE_TO_EVICT` ``"true"``.
        controlled: an ownerReference with ``controller: true`` (something recreates it).
        local_storage: the names of its volumes whose data lives on the node and dies with
            it: ``emptyDir`` not backed by memory, ``hostPath``.
        grace_seconds: ``terminationGracePeriodSeconds`` (30 when unset).
        owner_uid: the uid of its controlling owner (e.g. its DaemonSet), ``""`` if none.
        priority: ``spec.priority``, ``None`` when unset.
        references: the Secrets, ConfigMaps and claims it cannot start without.
        constraints: a key equal for pods that pass or fail the same node label and taint
            checks on every node.
        volume_terms: the zonal node affinity of each PersistentVolume bound to its claims
            (one tuple of ORed terms per volume, every volume must match): kube-scheduler's
            VolumeBinding filter, read from the volumes, not the pod (see
            :func:`~._pods.with_volume_zones`).
    """

    ref: PodRef
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    phase: str = ""
    terminating: bool = False
    nominated: str | None = None
    version: str = ""
    requests: Resources = field(default_factory=lambda: Resources(pods=1))
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    workload: bool = True
    do_not_disrupt: bool = False
    grace_seconds: int = 30
    constraints: str = ""
    owner_uid: str = ""
    hold: str = ""
    safe_to_evict: bool = False
    controlled: bool = True
    local_storage: tuple[str, ...] = ()
    volume_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    priority: int | None = None
    references: References = field(default_factory=References)

    @property
    def key(self) -> str:
        """Its uid, which tells a re-created pod from the one it replaces; hand-made pods may
        lack one, then namespace/name."""
        return self.uid or str(self.ref)

    @property
    def interpod(self) -> bool:
        """Whether placing it depends on other pods (affinity, anti-affinity, spread, ports)."""
        return bool(self.affinity or self.anti_affinity or self.spread or self.host_ports)

    @property
    def zonal(self) -> bool:
        """Whether the zone of its node matters: a zone in its node selector or required
        node affinity, a volume's zone, or a pod (anti-)affinity or spread over zones."""
        if self.volume_terms or any(key == ZONE_KEY for key, _ in self.node_selector):
            return True
        terms = self.required_terms or ()
        if any(r.key == ZONE_KEY for term in terms for r in term.expressions):
            return True
        keys = [t.topology_key for t in (*self.affinity, *self.anti_affinity)]
        keys += [c.topology_key for c in self.spread]
        return ZONE_KEY in keys

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the simulation and the controllers need of a Node, read once.

    Attributes:
        name: the Node's name.
        labels: its labels.
        taints: its taints.
        allocatable: ``status.allocatable``; empty when malformed (such a node offers no room
            rather than failing a whole plan).
        ready: the ``Ready`` condition is ``True``.
        unschedulable: ``spec.unschedulable`` (cordoned).
        deleting: ``metadata.deletionTimestamp`` is set.
        provider_id: ``spec.providerID``.
        hold: the do-not-disrupt annotation on the Node (:func:`hold_annotation`), ``""``
            if none.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=Resources)
    ready: bool = False
    unschedulable: bool = False
    deleting: bool = False
    provider_id: str = ""
    hold: str = ""
