"""Typed views of Pods and Nodes: the API's dicts are read once, here, at the boundary.

Every other module of the simulation works on these small frozen records, so the rules for
reading a field (missing or mistyped reads as empty: a pod the API server accepted is well
formed) live in one place, and a pod's requests and constraints are computed once per look
rather than once per node it is checked against.

This module also holds the one definition of *a workload pod* (:func:`is_workload`): the pods
that make a node needed. DaemonSet pods and static (mirror) pods do not: they come with every
node and go with it. The NodePool controller's scale-down and drain and the Autoscaler's
"empty node" use this same function.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ._pods import Pod, PodRef, get_list, get_mapping, get_text, pod_requests
from ._quantity import Resources
from ._template import Taint

__all__ = [
    "DO_NOT_DISRUPT",
    "HOSTNAME_KEY",
    "KARPENTER_DO_NOT_DISRUPT",
    "SAFE_TO_EVICT",
    "SCALE_DOWN_DISABLED",
    "ZONE_KEY",
    "HostPort",
    "LabelSelector",
    "NodeSelectorTerm",
    "NodeView",
    "PodAffinityTerm",
    "PodView",
    "Requirement",
    "SpreadConstraint",
    "Toleration",
    "hold_annotation",
    "is_workload",
    "node_view",
    "pod_view",
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
_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


def is_workload(pod: Pod) -> bool:
    """Whether ``pod`` makes its node needed: not a DaemonSet pod, not a static (mirror) pod.

    The one definition, used by scale-down, drain and the Autoscaler alike.
    """
    meta = get_mapping(pod, "metadata")
    if _MIRROR_ANNOTATION in get_mapping(meta, "annotations"):
        return False
    return not any(
        get_text(ref, "kind") == "DaemonSet" for ref in get_list(meta, "ownerReferences")
    )


def _labels(obj: object) -> dict[str, str]:
    return {k: v for k, v in get_mapping(obj, "labels").items() if isinstance(v, str)}


def _strings(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str))


# --- selectors --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry: ``key operator values``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, expression: object) -> Requirement:
        return cls(
            get_text(expression, "key"),
            get_text(expression, "operator"),
            _strings(get_list(expression, "values")),
        )

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

    @classmethod
    def from_api(cls, term: object) -> NodeSelectorTerm:
        return cls(
            tuple(Requirement.from_api(e) for e in get_list(term, "matchExpressions")),
            tuple(Requirement.from_api(e) for e in get_list(term, "matchFields")),
        )

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

    @classmethod
    def from_api(cls, selector: object) -> LabelSelector | None:
        if not isinstance(selector, Mapping):
            return None
        labels = get_mapping(selector, "matchLabels")
        return cls(
            tuple(sorted((k, v) for k, v in labels.items() if isinstance(v, str))),
            tuple(Requirement.from_api(e) for e in get_list(selector, "matchExpressions")),
        )

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

    @classmethod
    def from_api(cls, toleration: object) -> Toleration:
        return cls(
            get_text(toleration, "key"),
            get_text(toleration, "operator") or "Equal",
            get_text(toleration, "value"),
            get_text(toleration, "effect"),
        )

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

    @classmethod
    def from_api(
        cls, term: object, own_namespace: str, own_labels: Mapping[str, str]
    ) -> PodAffinityTerm:
        selector = LabelSelector.from_api(get_mapping(term, "labelSelector") or None)
        if selector is not None:
            keys = _strings(get_list(term, "matchLabelKeys"))
            selector = selector.with_labels((k, own_labels[k]) for k in keys if k in own_labels)
        names = frozenset(_strings(get_list(term, "namespaces")))
        namespaces: frozenset[str] | None
        if isinstance(term, Mapping) and isinstance(term.get("namespaceSelector"), Mapping):
            # Namespace labels are not read; a namespaceSelector is taken to select every
            # namespace, the conservative reading for anti-affinity.
            namespaces = None
        else:
            namespaces = names or frozenset({own_namespace})
        return cls(selector, namespaces, get_text(term, "topologyKey"))

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

    @classmethod
    def from_api(cls, entry: object, own_labels: Mapping[str, str]) -> SpreadConstraint:
        selector = LabelSelector.from_api(get_mapping(entry, "labelSelector") or None)
        keys = _strings(get_list(entry, "matchLabelKeys"))
        if selector is not None:
            selector = selector.with_labels((k, own_labels[k]) for k in keys if k in own_labels)
        max_skew = entry.get("maxSkew") if isinstance(entry, Mapping) else None
        min_domains = entry.get("minDomains") if isinstance(entry, Mapping) else None
        return cls(
            max_skew=max_skew if isinstance(max_skew, int) and max_skew > 0 else 1,
            topology_key=get_text(entry, "topologyKey"),
            selector=selector,
            min_domains=min_domains if isinstance(min_domains, int) and min_domains > 0 else 1,
            honor_node_affinity=get_text(entry, "nodeAffinityPolicy") != "Ignore",
            honor_taints=get_text(entry, "nodeTaintsPolicy") == "Honor",
        )

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
class PodView:
    """What the simulation needs of a Pod, read once.

    Attributes:
        ref: namespace and name.
        uid: ``metadata.uid``.
        labels: the pod's labels.
        node_name: ``spec.nodeName`` (``""`` when not bound).
        phase: ``status.phase``.
        terminating: ``metadata.deletionTimestamp`` is set.
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
        constraints: a key equal for pods that pass or fail the same node label and taint
            checks on every node.
    """

    ref: PodRef
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    phase: str = ""
    terminating: bool = False
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

    @property
    def interpod(self) -> bool:
        """Whether placing it depends on other pods (affinity, anti-affinity, spread, ports)."""
        return bool(self.affinity or self.anti_affinity or self.spread or self.host_ports)

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)


#: Views by (uid, resourceVersion): that pair names one content of one pod, so a view read
#: once serves every later look until the pod changes. Bounded; cleared when full.
_VIEWS: dict[tuple[str, str], PodView] = {}
_VIEWS_MAX: Final = 65536


def pod_view(pod: Pod | PodView) -> PodView:
    """Read ``pod`` (an API object) into a :class:`PodView`; a view is returned as it is.

    Pods read from the API (with a uid and resourceVersion) are read once per version.

    Raises:
        ValueError: a quantity is malformed, naming the pod.
    """
    if isinstance(pod, PodView):
        return pod
    meta = get_mapping(pod, "metadata")
    key = (get_text(meta, "uid"), get_text(meta, "resourceVersion"))
    if key[0] and key[1]:
        view = _VIEWS.get(key)
        if view is None:
            if len(_VIEWS) >= _VIEWS_MAX:
                _VIEWS.clear()
            view = _VIEWS[key] = _read_pod(pod)
        return view
    return _read_pod(pod)


def _read_pod(pod: Pod) -> PodView:
    meta = get_mapping(pod, "metadata")
    spec = get_mapping(pod, "spec")
    ref = PodRef(get_text(meta, "namespace"), get_text(meta, "name"))
    labels = _labels(meta)
    affinity = get_mapping(spec, "affinity")
    node_affinity = get_mapping(get_mapping(affinity, "nodeAffinity"), _REQUIRED)
    required_terms = (
        tuple(NodeSelectorTerm.from_api(t) for t in get_list(node_affinity, "nodeSelectorTerms"))
        if "nodeSelectorTerms" in node_affinity
        else None
    )
    pod_affinity = [
        PodAffinityTerm.from_api(t, ref.namespace, labels)
        for t in get_list(get_mapping(affinity, "podAffinity"), _REQUIRED)
    ]
    anti_affinity = [
        PodAffinityTerm.from_api(t, ref.namespace, labels)
        for t in get_list(get_mapping(affinity, "podAntiAffinity"), _REQUIRED)
    ]
    spread = [
        SpreadConstraint.from_api(c, labels)
        for c in get_list(spec, "topologySpreadConstraints")
        if get_text(c, "whenUnsatisfiable") in ("DoNotSchedule", "")
    ]
    grace = spec.get("terminationGracePeriodSeconds")
    node_selector = tuple(
        sorted((k, v) for k, v in get_mapping(spec, "nodeSelector").items() if isinstance(v, str))
    )
    tolerations = tuple(Toleration.from_api(t) for t in get_list(spec, "tolerations"))
    annotations = get_mapping(meta, "annotations")
    hold = hold_annotation(annotations)
    constraints = json.dumps(
        [spec.get("nodeSelector"), node_affinity, spec.get("tolerations")],
        sort_keys=True,
        default=str,
    )
    return PodView(
        ref=ref,
        uid=get_text(meta, "uid"),
        labels=labels,
        node_name=get_text(spec, "nodeName"),
        phase=get_text(get_mapping(pod, "status"), "phase"),
        terminating=bool(meta.get("deletionTimestamp")),
        requests=pod_requests(pod),
        node_selector=node_selector,
        required_terms=required_terms,
        tolerations=tolerations,
        affinity=tuple(t for t in pod_affinity if t.topology_key),
        anti_affinity=tuple(t for t in anti_affinity if t.topology_key),
        spread=tuple(c for c in spread if c.topology_key),
        host_ports=_host_ports(spec),
        workload=is_workload(pod),
        do_not_disrupt=bool(hold),
        hold=hold,
        safe_to_evict=get_text(annotations, SAFE_TO_EVICT) == "true",
        controlled=any(
            isinstance(o, Mapping) and o.get("controller") is True
            for o in get_list(meta, "ownerReferences")
        ),
        local_storage=_local_storage(spec),
        grace_seconds=grace if isinstance(grace, int) and grace >= 0 else 30,
        constraints=constraints,
        owner_uid=_owner_uid(meta),
    )


def hold_annotation(annotations: Mapping[str, object], *, node: bool = False) -> str:
    """The annotation among ``annotations`` that forbids disrupting its object, ``""`` if none:
    do-not-disrupt ``"true"`` (kubeloop's, Karpenter's); on a pod also safe-to-evict
    ``"false"``, on a node scale-down-disabled ``"true"`` (cluster-autoscaler's)."""
    for key in (DO_NOT_DISRUPT, KARPENTER_DO_NOT_DISRUPT):
        if get_text(annotations, key) == "true":
            return key
    if node:
        return SCALE_DOWN_DISABLED if get_text(annotations, SCALE_DOWN_DISABLED) == "true" else ""
    return SAFE_TO_EVICT if get_text(annotations, SAFE_TO_EVICT) == "false" else ""


def _local_storage(spec: Mapping[str, object]) -> tuple[str, ...]:
    """Volumes whose data is on the node (cluster-autoscaler's local-storage blocker)."""
    names = []
    for volume in get_list(spec, "volumes"):
        empty_dir = volume.get("emptyDir") if isinstance(volume, Mapping) else None
        on_disk = isinstance(empty_dir, Mapping) and get_text(empty_dir, "medium") != "Memory"
        if on_disk or isinstance(get_mapping(volume, "hostPath").get("path"), str):
            names.append(get_text(volume, "name"))
    return tuple(names)


def _owner_uid(meta: Mapping[str, object]) -> str:
    owners = [o for o in get_list(meta, "ownerReferences") if isinstance(o, Mapping)]
    controller = [o for o in owners if o.get("controller") is True]
    return get_text((controller or owners or [{}])[0], "uid")


def _host_ports(spec: Mapping[str, object]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for container in (*get_list(spec, "initContainers"), *get_list(spec, "containers")):
        for port in get_list(container, "ports"):
            number = port.get("hostPort") if isinstance(port, Mapping) else None
            if isinstance(number, int) and number > 0:
                ip = get_text(port, "hostIP") or "0.0.0.0"
                ports.append(HostPort(ip, get_text(port, "protocol") or "TCP", number))
    return tuple(ports)


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


def node_view(node: Mapping[str, object]) -> NodeView:
    """Read ``node`` (an API object) into a :class:`NodeView`."""
    meta = get_mapping(node, "metadata")
    spec = get_mapping(node, "spec")
    status = get_mapping(node, "status")
    try:
        allocatable = Resources.from_resource_list(get_mapping(status, "allocatable"))
    except ValueError:
        allocatable = Resources()
    taints: list[Taint] = []
    for taint in get_list(spec, "taints"):
        if not isinstance(taint, Mapping):
            continue
        try:
            taints.append(Taint.from_api(taint))
        except ValueError:
            continue  # an effect the API would not accept: ignore rather than fail the plan
    ready = any(
        get_text(c, "type") == "Ready" and get_text(c, "status") == "True"
        for c in get_list(status, "conditions")
    )
    return NodeView(
        name=get_text(meta, "name"),
        labels=_labels(meta),
        taints=tuple(taints),
        allocatable=allocatable,
        ready=ready,
        unschedulable=spec.get("unschedulable") is True,
        deleting=bool(meta.get("deletionTimestamp")),
        provider_id=get_text(spec, "providerID"),
        hold=hold_annotation(get_mapping(meta, "annotations"), node=True),
    )
