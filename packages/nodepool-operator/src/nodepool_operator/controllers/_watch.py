"""Which pod, node and pool events wake which Autoscalers.

Map functions run synchronously inside informer handlers, where the cache's async reads are not
available. They read the Autoscaler informer's store directly, through two indexes kept by the
store itself (namespace -> Autoscalers watching it, pool -> Autoscalers scaling it), so routing
an event costs a dictionary lookup however many Autoscalers and pods there are; an index also
cannot go stale the way a hand-kept map could when an Autoscaler's spec changes.

The predicates drop the bulk of the traffic before any routing: bound pods' status churn
(container states, probes) and Node heartbeats change nothing the Autoscaler looks at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from kubeloop import Deleted, Event, Object, Request, Store, Updated
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.scheduling import get_list, get_mapping, get_text

__all__ = [
    "BY_NAMESPACE",
    "BY_NODE",
    "BY_POOL",
    "Routes",
    "autoscaler_namespaces",
    "autoscaler_pool",
    "node_changed",
    "node_pool",
    "pod_moved",
    "pod_namespace",
    "pod_node",
]

#: Index names. On the Autoscaler store: the namespaces it watches, the pool it scales. On the
#: pod store: the pod's namespace and node. On the node store: the node's pool.
BY_NAMESPACE: Final = "autoscaler.kubeloop.dev/namespace"
BY_POOL: Final = "autoscaler.kubeloop.dev/pool"
BY_NODE: Final = "autoscaler.kubeloop.dev/node"
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")


# --- index functions (they see whatever the API holds, so they never assume a shape) ------


def autoscaler_namespaces(obj: Object) -> list[str]:
    return [ns for ns in get_list(get_mapping(obj, "spec"), "namespaces") if isinstance(ns, str)]


def autoscaler_pool(obj: Object) -> list[str]:
    name = get_text(get_mapping(get_mapping(obj, "spec"), "nodePoolRef"), "name")
    return [name] if name else []


def pod_namespace(obj: Object) -> list[str]:
    return [get_text(get_mapping(obj, "metadata"), "namespace")]


def pod_node(obj: Object) -> list[str]:
    name = get_text(get_mapping(obj, "spec"), "nodeName")
    return [name] if name else []


def node_pool(obj: Object) -> list[str]:
    pool = get_mapping(get_mapping(obj, "metadata"), "labels").get(POOL_LABEL)
    return [pool] if isinstance(pool, str) and pool else []


# --- predicates -------------------------------------------------------------------------


def pod_moved(event: Event) -> bool:
    """Pods that are or were waiting for a node, and pods leaving a node (room freed)."""
    if isinstance(event, Deleted):
        return True
    if isinstance(event, Updated):
        return (
            _waiting(event.old)
            or _waiting(event.new)
            or _finished(event.old) != _finished(event.new)
            or _deleting(event.old) != _deleting(event.new)
        )
    return _waiting(event.obj)


def node_changed(event: Event) -> bool:
    """A pool's Node came, went, or changed in what it offers (not a heartbeat)."""
    if isinstance(event, Updated):
        return bool(node_pool(event.old) or node_pool(event.new)) and _offer(event.old) != _offer(
            event.new
        )
    return bool(node_pool(event.obj))


def _waiting(pod: Object) -> bool:
    return not pod_node(pod) and not _finished(pod)


def _finished(pod: Object) -> bool:
    return get_text(get_mapping(pod, "status"), "phase") in _TERMINAL_PHASES


def _deleting(obj: Object) -> bool:
    return bool(get_mapping(obj, "metadata").get("deletionTimestamp"))


def _offer(node: Object) -> tuple[object, ...]:
    status = get_mapping(node, "status")
    ready = [
        get_text(c, "status")
        for c in get_list(status, "conditions")
        if get_text(c, "type") == "Ready"
    ]
    return (
        get_mapping(node, "metadata").get("labels"),
        _deleting(node),
        get_mapping(node, "spec").get("unschedulable"),
        get_mapping(node, "spec").get("taints"),
        status.get("allocatable"),
        ready,
    )


# --- map functions ----------------------------------------------------------------------


class Routes:
    """Map functions from pods, nodes and pools to the Autoscalers they concern."""

    def __init__(self, autoscalers: Store, nodes: Store) -> None:
        self._autoscalers = autoscalers
        self._nodes = nodes

    def for_pod(self, pod: Object) -> list[Request]:
        """Autoscalers watching the pod's namespace, and, for a bound pod, those scaling the
        pool of its node (a pod of any namespace takes room there)."""
        names = {_name(a) for ns in pod_namespace(pod) for a in self._by(BY_NAMESPACE, ns)}
        for node_name in pod_node(pod):
            node = self._nodes.get(node_name)
            if node is not None:
                names.update(_name(a) for pool in node_pool(node) for a in self._by(BY_POOL, pool))
        return _requests(names)

    def for_node(self, node: Object) -> list[Request]:
        return _requests(_name(a) for pool in node_pool(node) for a in self._by(BY_POOL, pool))

    def for_pool(self, pool: Object) -> list[Request]:
        name = get_text(get_mapping(pool, "metadata"), "name")
        return _requests(_name(a) for a in self._by(BY_POOL, name))

    def _by(self, index: str, value: str) -> list[Object]:
        return self._autoscalers.by_index(index, value)


def _name(obj: Mapping[str, object]) -> str:
    return get_text(get_mapping(obj, "metadata"), "name")


def _requests(names: Iterable[str]) -> list[Request]:
    # Autoscalers are cluster-scoped: a name is the whole key.
    return [Request(name) for name in sorted(set(names))]
