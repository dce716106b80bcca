"""The objects tests create or read, built in one place: keyword arguments for what a test
cares about, defaults for the rest.

Each factory returns a plain manifest (the dict the apiserver takes), with only the fields
asked for beyond the few every object of the kind needs, so a test's object says what
the test is about. A test with its own recurring defaults binds them once
(``functools.partial(factories.pod, namespace="prod", cpu="100m")``) instead of writing
another ``pod()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kubeloop import Request
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.cloud import Instance

#: Every operator kind's apiVersion.
OPERATOR_API = NODEPOOLS.api_version
#: An image nothing pulls (kwok and a kubelet-less node never do).
IMAGE = "registry.invalid/app:1"

Manifest = dict[str, Any]


def metadata(
    name: str,
    namespace: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    uid: str | None = None,
    generation: int | None = None,
    deleting: bool = False,
    finalizers: Sequence[str] | None = None,
) -> Manifest:
    """``metadata`` with only what is given; ``owner`` is one ownerReference, taken as is;
    ``deleting`` sets a deletionTimestamp (an object being deleted)."""
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if generation is not None:
        meta["generation"] = generation
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if finalizers is not None:
        meta["finalizers"] = list(finalizers)
    return meta


def owner_reference(
    kind: str = "ReplicaSet",
    name: str = "o",
    *,
    api_version: str | None = None,
    uid: str = "u",
    controller: bool | None = None,
) -> Manifest:
    """An ownerReference (``controller`` only when given)."""
    ref: Manifest = {"kind": kind, "name": name, "uid": uid}
    if api_version is not None:
        ref = {"apiVersion": api_version, **ref}
    if controller is not None:
        ref["controller"] = controller
    return ref


def request(obj: Mapping[str, Any]) -> Request:
    """The namespaced name of ``obj`` as a reconcile's key (``str()`` of it is
    ``namespace/name``, the cache's and workqueue's key)."""
    meta = obj.get("metadata") or {}
    return Request(str(meta["name"]), meta.get("namespace"))


def configmap(
    name: str = "cm",
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    data: Mapping[str, str] | None = None,
) -> Manifest:
    """A ConfigMap (``data`` only when given)."""
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, namespace, labels=labels, owner=owner),
    }
    if data is not None:
        body["data"] = dict(data)
    return body


def container(
    name: str = "c",
    *,
    image: str | None = IMAGE,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, str] | None = None,
    **fields: Any,
) -> Manifest:
    """A container: ``cpu``/``memory`` (or any ``requests``) become resources.requests;
    other fields (``ports``, ``volumeMounts``...) go in as given."""
    out: Manifest = {"name": name}
    if image is not None:
        out["image"] = image
    wanted = dict(requests or {})
    if cpu is not None:
        wanted["cpu"] = cpu
    if memory is not None:
        wanted["memory"] = memory
    if wanted:
        out["resources"] = {"requests": wanted}
    out.update(fields)
    return out


def pod(
    name: str = "p",
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    uid: str | None = None,
    deleting: bool = False,
    finalizers: Sequence[str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, str] | None = None,
    image: str | None = IMAGE,
    container_name: str = "c",
    containers: Sequence[Mapping[str, Any]] | None = None,
    node: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    phase: str | None = None,
    unschedulable: bool = False,
    status: Mapping[str, Any] | None = None,
    grace: int | None = None,
    **spec: Any,
) -> Manifest:
    """A Pod with one container (``containers`` replaces it).

    ``node`` binds it (spec.nodeName); ``phase`` sets status.phase; ``unschedulable``
    adds the scheduler's PodScheduled=False/Unschedulable condition (a pending pod the
    autoscaler acts on); ``grace`` is terminationGracePeriodSeconds; other keyword
    arguments are spec fields as given (``volumes``, ``tolerations``, ``affinity``...).
    """
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(
            name,
            namespace,
            labels=labels,
            annotations=annotations,
            owner=owner,
            uid=uid,
            deleting=deleting,
            finalizers=finalizers,
        ),
    }
    pod_spec: Manifest = {}
    if node is not None:
        pod_spec["nodeName"] = node
    if node_selector is not None:
        pod_spec["nodeSelector"] = dict(node_selector)
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    pod_spec["containers"] = (
        [dict(c) for c in containers]
        if containers is not None
        else [container(container_name, image=image, cpu=cpu, memory=memory, requests=requests)]
    )
    pod_spec.update(spec)
    body["spec"] = pod_spec
    pod_status: Manifest = dict(status or {})
    if phase is not None:
        pod_status["phase"] = phase
    if unschedulable:
        pod_status.setdefault("phase", "Pending")
        pod_status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    if pod_status:
        body["status"] = pod_status
    return body


def condition(kind: str, status: bool | str = True, **fields: Any) -> Manifest:
    """A status condition: ``condition("Ready")``, ``condition("Ready", False)``."""
    text = status if isinstance(status, str) else ("True" if status else "False")
    return {"type": kind, "status": text, **fields}


def taint(key: str, effect: str = "NoSchedule", value: str | None = None) -> Manifest:
    out: Manifest = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    return out


def node(
    name: str = "n",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    ready: bool | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    provider_id: str | None = None,
    unschedulable: bool | None = None,
    deleting: bool = False,
) -> Manifest:
    """A Node. ``allocatable`` defaults to ``capacity``; ``ready`` adds the Ready
    condition (``conditions`` are taken as given); each of spec and status is there only
    when something in it was asked for."""
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata(name, labels=labels, annotations=annotations, deleting=deleting),
    }
    node_spec: Manifest = {}
    if provider_id is not None:
        node_spec["providerID"] = provider_id
    if unschedulable is not None:
        node_spec["unschedulable"] = unschedulable
    if taints is not None:
        node_spec["taints"] = [dict(t) for t in taints]
    if node_spec:
        body["spec"] = node_spec
    node_status: Manifest = {}
    if capacity is not None:
        node_status["capacity"] = dict(capacity)
    allocatable = allocatable if allocatable is not None else capacity
    if allocatable is not None:
        node_status["allocatable"] = dict(allocatable)
    found = [dict(c) for c in conditions or ()]
    if ready is not None:
        found.append(condition("Ready", ready))
    if found:
        node_status["conditions"] = found
    if node_status:
        body["status"] = node_status
    return body


def nodepool(
    name: str = "p",
    *,
    target: int | None = 0,
    instance_type: str = "m5.large",
    max_nodes: int | None = None,
    node_class: str | None = None,
    labels: Mapping[str, str] | None = None,
    generation: int | None = None,
    **spec: Any,
) -> Manifest:
    """A NodePool; ``labels`` are spec.labels (what its Nodes get), ``node_class`` its
    nodeClassRef; other keyword arguments are spec fields (camelCase) as given."""
    pool_spec: Manifest = {}
    if target is not None:
        pool_spec["targetNodes"] = target
    pool_spec["instanceType"] = instance_type
    if max_nodes is not None:
        pool_spec["maxNodes"] = max_nodes
    if node_class is not None:
        pool_spec["nodeClassRef"] = {"name": node_class}
    if labels is not None:
        pool_spec["labels"] = dict(labels)
    pool_spec.update(spec)
    return {
        "apiVersion": OPERATOR_API,
        "kind": "NodePool",
        "metadata": metadata(name, generation=generation),
        "spec": pool_spec,
    }


def nodeclass(name: str = "c", **spec: Any) -> Manifest:
    """An AwsNodeClass; keyword arguments are spec fields (camelCase) as given, amiId a fixed
    one unless an AMI is given."""
    class_spec: Manifest = {} if "amiSsmParameter" in spec else {"amiId": "ami-0123456789abcdef0"}
    class_spec.update(spec)
    return {
        "apiVersion": OPERATOR_API,
        "kind": "AwsNodeClass",
        "metadata": {"name": name},
        "spec": class_spec,
    }


def autoscaler(
    name: str = "a",
    *,
    pool: str = "p",
    namespaces: Sequence[str] = (),
    frequency: str | None = "30s",
    **spec: Any,
) -> Manifest:
    """An Autoscaler of NodePool ``pool`` watching ``namespaces``."""
    scaler_spec: Manifest = {"nodePoolRef": {"name": pool}, "namespaces": list(namespaces)}
    if frequency is not None:
        scaler_spec["frequency"] = frequency
    scaler_spec.update(spec)
    return {
        "apiVersion": OPERATOR_API,
        "kind": "Autoscaler",
        "metadata": metadata(name),
        "spec": scaler_spec,
    }


def instance(
    name: str = "i",
    *,
    namespace: str | None = None,
    instance_type: str = "m5.large",
    image: str = "sim-image",
    **spec: Any,
) -> Manifest:
    """An Instance (one VM) of ``instance_type`` booting ``image``."""
    return {
        "apiVersion": OPERATOR_API,
        "kind": "Instance",
        "metadata": metadata(name, namespace),
        "spec": {"instanceType": instance_type, "image": image, **spec},
    }


def deployment(
    name: str = "web",
    replicas: int = 1,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    cpu: str | None = "100m",
    image: str = "registry.invalid/web:1",
    grace: int | None = 1,
    node_selector: Mapping[str, str] | None = None,
    container_name: str | None = None,
) -> Manifest:
    """A Deployment whose pods carry ``labels`` (default ``app=<name>``, also its
    selector) and ``annotations``, one container (named after the Deployment unless
    ``container_name``)."""
    selected = dict(labels) if labels is not None else {"app": name}
    template_meta: Manifest = {"labels": selected}
    if annotations is not None:
        template_meta["annotations"] = dict(annotations)
    pod_spec: Manifest = {}
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    pod_spec["containers"] = [container(container_name or name, image=image, cpu=cpu)]
    if node_selector is not None:
        pod_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, namespace),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selected},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def stateful_set(
    name: str,
    replicas: int = 1,
    *,
    namespace: str | None = None,
    pod_spec: Mapping[str, Any],
    claims: Mapping[str, str] | None = None,
) -> Manifest:
    """A StatefulSet of ``pod_spec`` pods labelled ``app=<name>``, with one
    ``volumeClaimTemplates`` entry per ``claims`` item (template name -> storage; the
    controller makes claim ``<template>-<name>-<ordinal>`` and the pod's volume from it)."""
    templates = [
        {"metadata": {"name": template}, "spec": claim(template, storage=storage)["spec"]}
        for template, storage in (claims or {}).items()
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(name, namespace),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": dict(pod_spec)},
            "volumeClaimTemplates": templates,
        },
    }


def pdb(
    name: str = "web",
    *,
    namespace: str | None = None,
    selector: Mapping[str, str] | None = None,
    max_unavailable: int | str | None = None,
    min_available: int | str | None = None,
) -> Manifest:
    """A PodDisruptionBudget over the pods labelled ``selector`` (default ``app=<name>``)."""
    budget_spec: Manifest = {}
    if max_unavailable is not None:
        budget_spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        budget_spec["minAvailable"] = min_available
    budget_spec["selector"] = {"matchLabels": dict(selector or {"app": name})}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(name, namespace),
        "spec": budget_spec,
    }


ZONE_KEY = "topology.kubernetes.io/zone"


def zone_spread(max_skew: int = 1, *, key: str = ZONE_KEY, **labels: str) -> Manifest:
    """A ``topologySpreadConstraints`` entry, ``DoNotSchedule``, over pods with ``labels``
    (pass it in a list as the pod's ``topologySpreadConstraints``)."""
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": dict(labels)},
    }


def zone_affinity(*zones: str, key: str = ZONE_KEY) -> Manifest:
    """A pod's ``affinity``: required node affinity to ``zones``."""
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(zones)}]}
    required = {"nodeSelectorTerms": [term]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def persistent_volume(
    name: str,
    *,
    zone: str | None = None,
    key: str = ZONE_KEY,
    claim: str | None = None,
    namespace: str = "default",
    storage: str = "1Gi",
) -> Manifest:
    """A PersistentVolume (hostPath, so the apiserver takes it anywhere), pinned to ``zone``
    by its node affinity (under ``key``); ``claim`` pre-binds it to that claim."""
    spec: Manifest = {
        "capacity": {"storage": storage},
        "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": f"/tmp/{name}"},
        "storageClassName": "",
    }
    if zone is not None:
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if claim is not None:
        spec["claimRef"] = {"namespace": namespace, "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim(
    name: str,
    *,
    namespace: str | None = None,
    volume: str | None = None,
    storage: str = "1Gi",
    phase: str | None = None,
) -> Manifest:
    """A PersistentVolumeClaim; ``volume`` binds it to that PersistentVolume by name."""
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage}},
        "storageClassName": "",
    }
    if volume is not None:
        spec["volumeName"] = volume
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(name, namespace),
        "spec": spec,
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def cloud_vm(instance_id: str = "i-1", **changes: Any) -> Instance:
    """A running m5.large VM as the cloud port reports it; keyword arguments replace fields."""
    vm = Instance(
        id=instance_id,
        name=instance_id,
        instance_type="m5.large",
        image="img",
        state="running",
        private_ip="10.0.0.1",
        public_ip=None,
        tags={},
        created_at=0.0,
        launched_at=0.0,
    )
    return replace(vm, **changes)
