"""Reading a Pod or a Node: the one place their API dicts are read (the boundary).

Each field is read here, once, into the frozen records of :mod:`._views` (:func:`pod_view`,
:func:`node_view`): the rest of the simulation reads record attributes and never calls back
here for a field, so a pod's data goes in once and comes out as its view.

Pods are plain ``Mapping``s as the API returns them (camelCase keys). Missing or mistyped fields
read as empty: a pod the API server accepted is well formed, and a classifier must not crash on
fields older servers omit.

The candidate test follows cluster-autoscaler's ``ArrangePodsBySchedulability`` and Karpenter's
``IsProvisionable``: only the structured ``PodScheduled=False/Unschedulable`` condition counts. The
scheduler's message is kept for display but never parsed: its format changes between Kubernetes
versions and it reports only the first failing filter per node.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from ._quantity import Resources
from ._template import Taint
from ._views import (
    DO_NOT_DISRUPT,
    KARPENTER_DO_NOT_DISRUPT,
    LEGACY_ZONE_KEY,
    SAFE_TO_EVICT,
    SCALE_DOWN_DISABLED,
    ZONE_KEY,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    NodeView,
    PodAffinityTerm,
    PodView,
    References,
    Requirement,
    SpreadConstraint,
    Toleration,
)

__all__ = [
    "Pod",
    "PodReason",
    "PodRef",
    "PodVerdict",
    "classify",
    "constraint_key",
    "get_list",
    "get_mapping",
    "get_text",
    "hold_annotation",
    "is_workload",
    "label_selector",
    "node_view",
    "pod_ref",
    "pod_requests",
    "pod_view",
    "read_pending",
    "toleration",
    "volume_zone_terms",
    "with_volume_zones",
]

_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"

Pod = Mapping[str, object]
"""A Pod as the API returns it, e.g. ``json.loads`` of a GET."""

_EMPTY: Mapping[str, object] = {}


def get_mapping(obj: object, key: str) -> Mapping[str, object]:
    """``obj[key]`` when ``obj`` is a mapping and the value is one; otherwise an empty mapping."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else _EMPTY


def get_list(obj: object, key: str) -> list[object]:
    """``obj[key]`` when it is a list; otherwise an empty list."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def get_text(obj: object, key: str) -> str:
    """``obj[key]`` when it is a string; otherwise ``""``."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True, order=True)
class PodRef:
    """Names a pod. Orders by namespace, then name: the tie-break that keeps plans deterministic."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_ref(pod: Pod) -> PodRef:
    """The namespace and name of ``pod``."""
    metadata = get_mapping(pod, "metadata")
    return PodRef(get_text(metadata, "namespace"), get_text(metadata, "name"))


# --- requests -------------------------------------------------------------------------------

# Kubernetes 1.32+ lets a pod set cpu/memory once for all its containers (spec.resources).
_POD_LEVEL_RESOURCES = ("cpu", "memory")


def pod_requests(pod: Pod) -> Resources:
    """The pod's effective request, as kube-scheduler's NodeResourcesFit computes it.

    ``max(app containers + sidecars, peak init phase) + spec.overhead``, with ``pods=1``:

    * app containers and restartable init containers ("sidecars", ``restartPolicy: Always``) run
      together, so they add up;
    * a regular init container runs alone, next to the sidecars started before it, so the init
      phase peaks at ``max(init_i + sidecars started before i)``;
    * pod-level ``spec.resources.requests`` (cpu, memory) replace the container sum when set.

    A container limit without a request counts as the request, as API defaulting does, so pods
    built by hand (tests, fakes) agree with pods read from a server.

    Raises:
        ValueError: if a quantity is malformed, naming the pod.
    """
    try:
        return _effective_requests(pod)
    except ValueError as exc:
        raise ValueError(f"pod {pod_ref(pod)}: {exc}") from exc


def _effective_requests(pod: Pod) -> Resources:
    spec = get_mapping(pod, "spec")
    running = Resources()
    for container in get_list(spec, "containers"):
        running += _container_requests(container)
    sidecars = Resources()
    init_peak = Resources()
    for container in get_list(spec, "initContainers"):
        requests = _container_requests(container)
        if get_text(container, "restartPolicy") == "Always":
            running += requests
            sidecars += requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(requests + sidecars)
    total = running.max(init_peak)
    pod_level = get_mapping(get_mapping(spec, "resources"), "requests")
    if any(name in pod_level for name in _POD_LEVEL_RESOURCES):
        override = Resources.from_resource_list(
            {k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES}
        )
        total = Resources(
            cpu=override.cpu if "cpu" in pod_level else total.cpu,
            memory=override.memory if "memory" in pod_level else total.memory,
            ephemeral_storage=total.ephemeral_storage,
            extended=total.extended,
        )
    total += Resources.from_resource_list(get_mapping(spec, "overhead"))
    return total + Resources(pods=1)


def _container_requests(container: object) -> Resources:
    resources = get_mapping(container, "resources")
    requests = dict(get_mapping(resources, "requests"))
    for name, limit in get_mapping(resources, "limits").items():
        requests.setdefault(name, limit)
    return Resources.from_resource_list(requests)


# --- scheduling constraints -----------------------------------------------------------------


def constraint_key(pod: Pod) -> str:
    """A canonical string of everything that decides *which* nodes suit the pod.

    Two pods with equal keys pass or fail the same label and taint checks on every node, so
    the bin-packer checks each distinct key against each node once.
    """
    spec = get_mapping(pod, "spec")
    required = get_mapping(get_mapping(get_mapping(spec, "affinity"), "nodeAffinity"), _REQUIRED)
    return json.dumps(
        [spec.get("nodeSelector"), required, spec.get("tolerations")],
        sort_keys=True,
        default=str,
    )


# --- classification -------------------------------------------------------------------------


class PodReason(StrEnum):
    """Why a pod does or does not count as a scale-up candidate."""

    UNSCHEDULABLE = "Unschedulable"
    """Candidate: the scheduler tried every node and none fit (``PodScheduled=False``)."""
    NOT_UNSCHEDULABLE = "NotUnschedulable"
    """Not yet tried, being scheduled, or a condition reason other than ``Unschedulable``."""
    BOUND = "Bound"
    """``spec.nodeName`` is set. Missing secrets, volumes or images are the kubelet's business."""
    NOMINATED = "Nominated"
    """Preemption freed a node for it (``status.nominatedNodeName``); it will land there."""
    GATED = "Gated"
    """``spec.schedulingGates`` is not empty: the scheduler will not even try yet."""
    TERMINATING = "Terminating"
    """``metadata.deletionTimestamp`` is set."""
    FINISHED = "Finished"
    """Phase ``Succeeded`` or ``Failed``: the pod will never run again."""


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """The outcome of :func:`classify`.

    Attributes:
        reason: the rule that decided.
        message: the scheduler's ``PodScheduled`` message, for display only.
    """

    reason: PodReason
    message: str = ""
    view: PodView | None = None
    """The pod's view when it still waits for a node (:func:`read_pending`)."""
    unnominated: PodReason | None = None
    """For a :attr:`PodReason.NOMINATED` pod, the reason it would have with no nomination:
    whether the scheduler's verdict under the nomination is still Unschedulable (a pod the
    Autoscaler nominated to a new node still waits for the capacity planned for it)."""

    @property
    def candidate(self) -> bool:
        """Whether the pod should be considered for scale-up."""
        return self.reason is PodReason.UNSCHEDULABLE

    def candidate_on(self, nodes: Container[str] | None = None) -> bool:
        """Whether the pod is a scale-up candidate, a pod nominated to one of ``nodes`` (a
        pool's Nodes; ``None``: any) included when the scheduler's verdict under the
        nomination is still Unschedulable. With ``nodes``, the verdict must carry the pod's
        view (:func:`read_pending`'s).

        Why: :func:`classify` leaves a nominated pod out (it will land where preemption made
        room). A pod the Autoscaler nominated to a new node still waits for the capacity the
        plan made for it: left out, the plan would not count it, and scale-down would take its
        node, where nothing is bound yet, for empty."""
        if self.reason is not PodReason.NOMINATED:
            return self.candidate
        if nodes is not None and (self.view is None or self.view.nominated not in nodes):
            return False
        return self.unnominated is PodReason.UNSCHEDULABLE


_TERMINAL_PHASES = ("Succeeded", "Failed")


def classify(pod: Pod) -> PodVerdict:
    """Decide whether ``pod`` counts as a scale-up candidate, and if not, why.

    A candidate has ``PodScheduled=False`` with reason ``Unschedulable``, no ``spec.nodeName``, no
    ``status.nominatedNodeName``, no scheduling gates, no deletion timestamp and a non-terminal
    phase. ``status.phase == "Pending"`` alone means nothing: bound pods stay Pending until their
    containers start.
    """
    metadata = get_mapping(pod, "metadata")
    spec = get_mapping(pod, "spec")
    status = get_mapping(pod, "status")
    condition = _pod_scheduled(status)
    message = get_text(condition, "message")
    if get_list(spec, "schedulingGates"):
        unnominated = PodReason.GATED
    elif (
        get_text(condition, "status") == "False"
        and get_text(condition, "reason") == "Unschedulable"
    ):
        unnominated = PodReason.UNSCHEDULABLE
    else:
        unnominated = PodReason.NOT_UNSCHEDULABLE
    if metadata.get("deletionTimestamp"):
        reason = PodReason.TERMINATING
    elif get_text(status, "phase") in _TERMINAL_PHASES:
        reason = PodReason.FINISHED
    elif get_text(spec, "nodeName"):
        reason = PodReason.BOUND
    elif get_text(status, "nominatedNodeName"):
        return PodVerdict(PodReason.NOMINATED, message, unnominated=unnominated)
    else:
        reason = unnominated
    return PodVerdict(reason, message)


#: Pods that wait for no node: bound, or never to run again.
_NOT_WAITING: Final = (PodReason.BOUND, PodReason.TERMINATING, PodReason.FINISHED)


def read_pending(pod: Pod) -> PodVerdict:
    """The one read of a pod an Autoscaler's observe makes: :func:`classify`'s verdict and,
    for a pod that still waits for a node (not bound, not going), its :func:`pod_view`.

    Raises:
        ValueError: a quantity of a waiting pod is malformed, naming the pod.
    """
    verdict = classify(pod)
    if verdict.reason in _NOT_WAITING:
        return verdict
    return replace(verdict, view=pod_view(pod))


def _pod_scheduled(status: Mapping[str, object]) -> Mapping[str, object]:
    for condition in get_list(status, "conditions"):
        if get_text(condition, "type") == "PodScheduled" and isinstance(condition, Mapping):
            return condition
    return _EMPTY


# --- the views: each field of a Pod or Node read here, once --------------------------------


def _labels(obj: object) -> dict[str, str]:
    return {k: v for k, v in get_mapping(obj, "labels").items() if isinstance(v, str)}


def _strings(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str))


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


def _requirement(expression: object) -> Requirement:
    return Requirement(
        get_text(expression, "key"),
        get_text(expression, "operator"),
        _strings(get_list(expression, "values")),
    )


def _selector_term(term: object) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        tuple(_requirement(e) for e in get_list(term, "matchExpressions")),
        tuple(_requirement(e) for e in get_list(term, "matchFields")),
    )


def label_selector(selector: object) -> LabelSelector | None:
    if not isinstance(selector, Mapping):
        return None
    labels = get_mapping(selector, "matchLabels")
    return LabelSelector(
        tuple(sorted((k, v) for k, v in labels.items() if isinstance(v, str))),
        tuple(_requirement(e) for e in get_list(selector, "matchExpressions")),
    )


def toleration(toleration: object) -> Toleration:
    return Toleration(
        get_text(toleration, "key"),
        get_text(toleration, "operator") or "Equal",
        get_text(toleration, "value"),
        get_text(toleration, "effect"),
    )


def _affinity_term(
    term: object, own_namespace: str, own_labels: Mapping[str, str]
) -> PodAffinityTerm:
    selector = label_selector(get_mapping(term, "labelSelector") or None)
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
    return PodAffinityTerm(selector, namespaces, get_text(term, "topologyKey"))


def _spread_constraint(entry: object, own_labels: Mapping[str, str]) -> SpreadConstraint:
    selector = label_selector(get_mapping(entry, "labelSelector") or None)
    keys = _strings(get_list(entry, "matchLabelKeys"))
    if selector is not None:
        selector = selector.with_labels((k, own_labels[k]) for k in keys if k in own_labels)
    max_skew = entry.get("maxSkew") if isinstance(entry, Mapping) else None
    min_domains = entry.get("minDomains") if isinstance(entry, Mapping) else None
    return SpreadConstraint(
        max_skew=max_skew if isinstance(max_skew, int) and max_skew > 0 else 1,
        topology_key=get_text(entry, "topologyKey"),
        selector=selector,
        min_domains=min_domains if isinstance(min_domains, int) and min_domains > 0 else 1,
        honor_node_affinity=get_text(entry, "nodeAffinityPolicy") != "Ignore",
        honor_taints=get_text(entry, "nodeTaintsPolicy") == "Honor",
    )


def volume_zone_terms(volume: object) -> tuple[NodeSelectorTerm, ...]:
    """The zones a PersistentVolume lets its pods' nodes be in: the zone requirements of its
    ``spec.nodeAffinity.required`` terms (the legacy zone key read as the current one), or
    ``()`` when it does not pin a zone (no affinity, or a term that names no zone: terms are
    ORed, so that term allows every zone). Other keys (a local volume's hostname) are left
    out: only the zone is simulated for a volume."""
    required = get_mapping(get_mapping(get_mapping(volume, "spec"), "nodeAffinity"), "required")
    terms: list[NodeSelectorTerm] = []
    for term in get_list(required, "nodeSelectorTerms"):
        zonal = tuple(
            Requirement(ZONE_KEY, r.operator, r.values)
            for r in map(_requirement, get_list(term, "matchExpressions"))
            if r.key in (ZONE_KEY, LEGACY_ZONE_KEY)
        )
        if not zonal:
            return ()
        terms.append(NodeSelectorTerm(zonal))
    return tuple(terms)


def with_volume_zones(view: PodView, volumes: Iterable[tuple[NodeSelectorTerm, ...]]) -> PodView:
    """``view`` with the zonal terms of its bound volumes (:func:`volume_zone_terms`); its
    :attr:`~._views.PodView.constraints` key names them, so pods whose volumes sit in
    different zones are not taken for interchangeable."""
    terms = tuple(t for t in volumes if t)
    if not terms:
        return view
    key = json.dumps([[[str(r) for r in term.expressions] for term in t] for t in terms])
    return replace(view, volume_terms=terms, constraints=f"{view.constraints}|{key}")


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
        tuple(_selector_term(t) for t in get_list(node_affinity, "nodeSelectorTerms"))
        if "nodeSelectorTerms" in node_affinity
        else None
    )
    pod_affinity = [
        _affinity_term(t, ref.namespace, labels)
        for t in get_list(get_mapping(affinity, "podAffinity"), _REQUIRED)
    ]
    anti_affinity = [
        _affinity_term(t, ref.namespace, labels)
        for t in get_list(get_mapping(affinity, "podAntiAffinity"), _REQUIRED)
    ]
    spread = [
        _spread_constraint(c, labels)
        for c in get_list(spec, "topologySpreadConstraints")
        if get_text(c, "whenUnsatisfiable") in ("DoNotSchedule", "")
    ]
    grace = spec.get("terminationGracePeriodSeconds")
    priority = spec.get("priority")
    node_selector = tuple(
        sorted((k, v) for k, v in get_mapping(spec, "nodeSelector").items() if isinstance(v, str))
    )
    tolerations = tuple(toleration(t) for t in get_list(spec, "tolerations"))
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
        nominated=get_text(get_mapping(pod, "status"), "nominatedNodeName") or None,
        version=get_text(meta, "resourceVersion"),
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
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        references=_references(ref.name, spec),
    )


def _references(pod_name: str, spec: Mapping[str, object]) -> References:
    """The non-optional Secrets, ConfigMaps and claims the pod needs, each once, in spec
    order.

    Covers ``secret``, ``configMap``, ``projected``, ``persistentVolumeClaim`` and generic
    ``ephemeral`` volumes (whose claim is named ``<pod>-<volume>``), and ``env``/``envFrom`` of
    containers and init containers. ``imagePullSecrets`` are left out: a missing one only makes
    the pull anonymous. Keys missing from an existing Secret are not checked (that would mean
    caching Secret data).
    """
    secrets: dict[str, None] = {}
    config_maps: dict[str, None] = {}
    claims: dict[str, None] = {}
    for volume in get_list(spec, "volumes"):
        _add_ref(secrets, get_mapping(volume, "secret"), "secretName")
        _add_ref(config_maps, get_mapping(volume, "configMap"), "name")
        for source in get_list(get_mapping(volume, "projected"), "sources"):
            _add_ref(secrets, get_mapping(source, "secret"), "name")
            _add_ref(config_maps, get_mapping(source, "configMap"), "name")
        name = get_text(get_mapping(volume, "persistentVolumeClaim"), "claimName")
        if name:
            claims[name] = None
        if isinstance(volume, Mapping) and "ephemeral" in volume:
            claims[f"{pod_name}-{get_text(volume, 'name')}"] = None
    for container in (*get_list(spec, "initContainers"), *get_list(spec, "containers")):
        for env in get_list(container, "env"):
            value_from = get_mapping(env, "valueFrom")
            _add_ref(secrets, get_mapping(value_from, "secretKeyRef"), "name")
            _add_ref(config_maps, get_mapping(value_from, "configMapKeyRef"), "name")
        for env_from in get_list(container, "envFrom"):
            _add_ref(secrets, get_mapping(env_from, "secretRef"), "name")
            _add_ref(config_maps, get_mapping(env_from, "configMapRef"), "name")
    return References(tuple(secrets), tuple(config_maps), tuple(claims))


def _add_ref(names: dict[str, None], ref: Mapping[str, object], key: str) -> None:
    name = get_text(ref, key)
    if name and ref.get("optional") is not True:
        names[name] = None


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
