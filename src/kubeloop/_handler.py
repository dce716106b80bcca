"""Handlers map an event to the requests it should cause."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubeloop._event import Event, Updated
from kubeloop._reconcile import Request
from kubeloop._resource import Object

#: An event in, zero or more requests out. Pure: the source does the enqueueing.
EventHandler = Callable[[Event], Iterable[Request]]
#: For ``watches(kind, map_fn)``: an object in, the requests it concerns out.
MapFunc = Callable[[Object], Iterable[Request]]


def request_for(obj: Object) -> Request:
    meta = obj["metadata"]
    return Request(meta["name"], meta.get("namespace") or None)


def enqueue_object(event: Event) -> Iterable[Request]:
    """Reconcile the object the event is about (``for_``)."""
    return (request_for(event.obj),)


def enqueue_owner(
    owner_kind: str,
    owner_api_group: str,
    *,
    controller_only: bool = True,
    owner_namespaced: bool = True,
) -> EventHandler:
    """Reconcile the owner of the object (``owns``), found through ownerReferences.

    An ownerReference names no namespace: a namespaced owner lives in its child's
    namespace, a cluster-scoped one (``owner_namespaced=False``) in none, so its
    request has no namespace whichever namespace the child is in. It must be the same
    request ``for_`` makes for the owner's own events: one object, one queue key, one
    worker at a time (controller-runtime's ``EnqueueRequestForOwner`` does the same).

    For an update both the old and the new owners are reconciled, so moving an
    object between owners wakes both.
    """

    def owners(obj: Object) -> list[Request]:
        ns = (obj["metadata"].get("namespace") or None) if owner_namespaced else None
        out = []
        for ref in obj["metadata"].get("ownerReferences") or ():
            group = ref.get("apiVersion", "").rpartition("/")[0]
            if ref.get("kind") != owner_kind or group != owner_api_group:
                continue
            if controller_only and not ref.get("controller"):
                continue
            out.append(Request(ref["name"], ns))
        return out

    def handler(event: Event) -> Iterable[Request]:
        reqs = owners(event.obj)
        if isinstance(event, Updated):
            reqs += [r for r in owners(event.old) if r not in reqs]
        return reqs

    return handler


def enqueue_mapped(fn: MapFunc) -> EventHandler:
    """Reconcile whatever ``fn`` says the object concerns (``watches``)."""

    def handler(event: Event) -> Iterable[Request]:
        reqs = list(fn(event.obj))
        if isinstance(event, Updated):
            reqs += [r for r in fn(event.old) if r not in reqs]
        return reqs

    return handler
