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

from collections.abc import Iterable
from typing import Final

from kubeloop import Deleted, Event, Object, Request, Store, Updated
from nodepool_operator.controllers._indexes import node_pool, pod_node
from nodepool_operator.controllers.autoscaler._decode import (
    autoscaler_namespaces,
    autoscaler_pool,
    deleting,
    node_offer,
    object_name,
    pod_finished,
    pod_namespace,
)

__all__ = [
    "BY_NAMESPACE",
    "BY_POOL",
    "Routes",
    "autoscaler_namespaces",
    "autoscaler_pool",
    "node_changed",
    "pod_moved",
    "pod_namespace",
]

#: Index names. On the Autoscaler store: the namespaces it watches, the pool it scales. On the
#: pod store: the pod's namespace. (A pod's node and a node's pool: the shared
#: :mod:`nodepool_operator.controllers._indexes`.)
BY_NAMESPACE: Final = "autoscaler.kubeloop.dev/namespace"
BY_POOL: Final = "autoscaler.kubeloop.dev/pool"


# --- predicates -------------------------------------------------------------------------


def pod_moved(event: Event) -> bool:
    """Pods that are or were waiting for a node, and pods leaving a node (room freed)."""
    if isinstance(event, Deleted):
        return True
    if isinstance(event, Updated):
        return (
            _waiting(event.old)
            or _waiting(event.new)
            or pod_finished(event.old) != pod_finished(event.new)
            or deleting(event.old) != deleting(event.new)
        )
    return _waiting(event.obj)


def node_changed(event: Event) -> bool:
    """A pool's Node came, went, or changed in what it offers (not a heartbeat)."""
    if isinstance(event, Updated):
        return bool(node_pool(event.old) or node_pool(event.new)) and node_offer(
            event.old
        ) != node_offer(event.new)
    return bool(node_pool(event.obj))


def _waiting(pod: Object) -> bool:
    return not pod_node(pod) and not pod_finished(pod)


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
        return _requests(_name(a) for a in self._by(BY_POOL, object_name(pool)))

    def _by(self, index: str, value: str) -> list[Object]:
        return self._autoscalers.by_index(index, value)


_name = object_name


def _requests(names: Iterable[str]) -> list[Request]:
    # Autoscalers are cluster-scoped: a name is the whole key.
    return [Request(name) for name in sorted(set(names))]
