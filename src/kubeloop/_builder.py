"""Declarative controller wiring, in the controller-runtime builder's shape.

    mgr.controller("nodepool") \\
        .for_(NODEPOOLS, predicates=[generation_changed]) \\
        .owns(NODES) \\
        .watches(PODS, pods_to_pool) \\
        .with_options(ControllerOptions(max_concurrent_reconciles=4)) \\
        .complete(reconciler)
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from kubeloop._controller import Controller, ControllerOptions
from kubeloop._handler import MapFunc, enqueue_mapped, enqueue_object, enqueue_owner
from kubeloop._predicate import Predicate
from kubeloop._reconcile import Reconciler, Request
from kubeloop._resource import Resource
from kubeloop._source import KindSource, PeriodicSource, Source

if TYPE_CHECKING:
    from kubeloop._manager import Manager


class _Follow(enum.Enum):
    FOR = "the for_ namespace"


#: The default ``namespace`` of :meth:`Builder.owns` and :meth:`Builder.watches`: the
#: namespace given to ``for_`` (controller-runtime's builder does the same for owns).
#: Pass ``namespace=None`` to watch every namespace the manager may see.
FOLLOW_FOR: Final = _Follow.FOR


class Builder:
    def __init__(self, manager: Manager, name: str) -> None:
        self._manager = manager
        self._name = name
        self._for: KindSource | None = None
        self._sources: list[Source] = []
        self._global_predicates: list[Predicate] = []
        self._options = ControllerOptions()

    def for_(
        self,
        resource: Resource,
        *,
        predicates: Sequence[Predicate] = (),
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Builder:
        """The kind this controller reconciles; its events enqueue the object itself.

        ``label_selector``/``field_selector`` are passed to the LIST and WATCH.
        ``metadata_only`` (controller-runtime's ``OnlyMetadata``) watches the kind's
        ``PartialObjectMetadata``: names, labels, annotations, ownerReferences,
        finalizers, no spec, status or data, for a fraction of the memory; read it in
        the reconcile with ``cache.get(..., metadata_only=True)``.
        """
        if self._for is not None:
            raise ValueError(f"controller {self._name}: for_() may be called once")
        self._manager.cache.scope(resource, namespace)  # OutOfScope now, not at start
        self._for = KindSource(
            resource,
            enqueue_object,
            list(predicates),
            namespace,
            label_selector,
            field_selector,
            metadata_only,
        )
        self._sources.append(self._for)
        return self

    def owns(
        self,
        resource: Resource,
        *,
        predicates: Sequence[Predicate] = (),
        namespace: str | _Follow | None = FOLLOW_FOR,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Builder:
        """A kind this controller creates; its events enqueue the controlling owner.

        Watched in ``for_``'s namespace by default: an operator scoped to namespace A
        never watches (nor reconciles because of) children in namespace B.
        ``label_selector``, ``field_selector`` and ``metadata_only`` as for
        :meth:`for_` (the owner is found from ``ownerReferences``, which a
        metadata-only child has).
        """
        if self._for is None:
            raise ValueError(f"controller {self._name}: call for_() before owns()")
        owner = self._for.resource
        # the owner's scope from its Resource, as for_ lists and watches it
        handler = enqueue_owner(owner.kind, owner.group, owner_namespaced=owner.namespaced)
        ns = self._for.namespace if namespace is FOLLOW_FOR else namespace
        ns = ns if resource.namespaced else None
        self._manager.cache.scope(resource, ns)
        self._sources.append(
            KindSource(
                resource,
                handler,
                list(predicates),
                ns,
                label_selector,
                field_selector,
                metadata_only,
            )
        )
        return self

    def watches(
        self,
        resource: Resource,
        map_fn: MapFunc,
        *,
        predicates: Sequence[Predicate] = (),
        namespace: str | _Follow | None = FOLLOW_FOR,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Builder:
        """Any other kind; ``map_fn`` says which requests an object concerns.

        ``namespace`` defaults to ``for_``'s (all namespaces without ``for_``);
        ``None`` watches every namespace the manager may see. ``label_selector``,
        ``field_selector`` and ``metadata_only`` as for :meth:`for_` (``map_fn`` then
        gets ``PartialObjectMetadata``).
        """
        if namespace is FOLLOW_FOR:
            namespace = self._for.namespace if self._for is not None else None
        namespace = namespace if resource.namespaced else None
        self._manager.cache.scope(resource, namespace)
        self._sources.append(
            KindSource(
                resource,
                enqueue_mapped(map_fn),
                list(predicates),
                namespace,
                label_selector,
                field_selector,
                metadata_only,
            )
        )
        return self

    def periodic(self, interval: float, requests: Callable[[], Iterable[Request]]) -> Builder:
        """Enqueue ``requests()`` every ``interval`` seconds (predicates do not apply)."""
        self._sources.append(PeriodicSource(interval, requests))
        return self

    def watches_source(self, source: Source) -> Builder:
        """A custom source, e.g. a :class:`~kubeloop.ChannelSource`."""
        self._sources.append(source)
        return self

    def with_event_filter(self, *predicates: Predicate) -> Builder:
        """Predicates applied to every kind source of this controller."""
        self._global_predicates.extend(predicates)
        return self

    def with_options(self, options: ControllerOptions) -> Builder:
        self._options = options
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """Build the controller and register it with the manager.

        Raises :class:`TypeError` if ``reconciler`` is a plain (not ``async``) function:
        it would only fail at its first reconcile, once per object, retried forever.
        """
        _check_async(self._name, reconciler)
        if self._for is None and not self._sources:
            raise ValueError(f"controller {self._name}: no sources (call for_() or watches())")
        for src in self._sources:
            if isinstance(src, KindSource) and self._global_predicates:
                src.predicates = [*self._global_predicates, *src.predicates]
        controller = Controller(
            self._name,
            reconciler,
            sources=self._sources,
            for_resource=self._for.resource if self._for else None,
            options=self._options,
            metrics=self._manager.metrics,
            recorder=self._manager.recorder,
        )
        self._manager.add(controller)
        return controller


def _check_async(controller: str, reconciler: object) -> None:
    """Refuse a reconciler that cannot return an awaitable, naming it.

    Accepted: an ``async def`` (also wrapped in :func:`functools.partial`, or a bound
    method), an object with an ``async def __call__``, and a lambda or a function
    annotated to return an ``Awaitable``/``Coroutine`` (wrappers that return one).
    """
    target: Any = reconciler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return
    name = getattr(target, "__qualname__", None) or repr(target)
    if not callable(target):
        raise TypeError(f"controller {controller}: the reconciler {name} is not callable")
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        # the class's __call__, not the object's: that is what calling the object runs
        call = type(target).__call__
        if call is None or inspect.iscoroutinefunction(call):
            return
        target, name = call, f"{type(target).__qualname__}.__call__"
    if getattr(target, "__name__", "") == "<lambda>":
        return  # `lambda req: reconcile(req, extra)` returns the coroutine
    returns = inspect.signature(target).return_annotation
    if any(word in str(returns) for word in ("Awaitable", "Coroutine")):
        return
    raise TypeError(
        f"controller {controller}: the reconciler {name} is a plain function; it must be"
        f" `async def {getattr(target, '__name__', 'reconcile')}(req: Request) -> Result`"
    )
