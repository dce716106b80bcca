"""Shared informers and the cache that readers use.

An :class:`Informer` is a reflector, its store and a list of event handlers.
The :class:`Cache` hands out one informer per (resource, namespace, selectors,
metadata-only or not), so any number of controllers watching Pods cost one watch, and serves reads
from memory; a read with a label selector no informer has is filtered in memory
from the kind's unselected informer (``_labelselector.py``), not given a watch.
Reads right after our own write wait for the watch to deliver
that write (read-your-own-writes), so a reconcile never acts on the version it
just replaced.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import functools
import gc
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubeloop._backoff import ListWatchBackoff
from kubeloop._errors import KubeloopError, TerminalError, Unauthorized
from kubeloop._event import Added, Deleted, Event
from kubeloop._labelselector import Selector
from kubeloop._labelselector import parse as parse_selector
from kubeloop._reflector import Reflector, ReflectorOptions, Transform, rv_at_least
from kubeloop._refused import explain_refusal
from kubeloop._resource import Object, Resource
from kubeloop._store import IndexFunc, Store, object_key, split_key
from kubeloop._writers import WriterLog, writers_of

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.cache")

Handler = Callable[[Event], None]


_startup_heap_frozen = False


def _freeze_startup_heap() -> None:
    """Once per process, as the first informer starts: move the objects alive now (the
    imported modules, classes and functions, the program's setup) out of the garbage
    collector's reach, after a young collection (``gc.freeze``).

    They live as long as the process, and every full collection would walk them again:
    with kubeloop and aiohttp imported that is some 40,000 objects, 20-35 ms of CPU on
    the 2-core development machine, and the longest event-loop stall left in a
    100,000-object sync (``bench/informer_scale.py``). Afterwards a full collection walks
    only what was allocated since, and the store itself holds nothing the collector
    tracks (``_store.py``). Frozen objects are still freed when their last reference
    goes; only a reference cycle among them that becomes garbage later is never
    reclaimed, and the young collection first frees the garbage of startup itself.
    ``gc.unfreeze()`` undoes it.
    """
    global _startup_heap_frozen
    if _startup_heap_frozen:
        return
    _startup_heap_frozen = True
    gc.collect(1)
    gc.freeze()


class Informer:
    """One resource's list/watch, store and handlers."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        options: ReflectorOptions | None = None,
    ) -> None:
        self.resource = resource
        #: Whether this informer holds ``PartialObjectMetadata`` (metadata only).
        self.metadata_only = metadata_only
        self.store = Store(namespace=namespace if resource.namespaced else None)
        self._handlers: list[Handler] = []
        # the client's log, so its update_status can name who changed an object since
        # this informer saw it (a stand-in client without one gets a private log)
        writers = getattr(client, "writers", None)
        self._writers: WriterLog = writers if isinstance(writers, WriterLog) else WriterLog()
        options = options or ReflectorOptions()
        self.reflector = Reflector(
            client,
            resource,
            self.store,
            self._dispatch,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            metadata_only=metadata_only,
            options=dataclasses.replace(options, transform=self._summarizing(options.transform)),
        )
        self._task: asyncio.Task[None] | None = None
        #: Times the reflector crashed and was restarted, and the last crash.
        self.crashes = 0
        self.last_crash: BaseException | None = None
        self._lists_at_crash = 0

    @property
    def name(self) -> str:
        return self.reflector.name

    @property
    def has_synced(self) -> bool:
        return self.reflector.synced.is_set()

    @property
    def started(self) -> bool:
        return self._task is not None

    def add_handler(self, handler: Handler) -> None:
        """Subscribe; a late subscriber first gets Added for every object already cached.

        Also while a LIST is being announced (in slices, after its content was
        swapped in): objects already announced are replayed now, the rest reach
        the new handler with everyone else's, so each arrives once.
        """
        self._handlers.append(handler)
        unannounced = self.reflector.unannounced()
        for key in self.store:  # a snapshot of the keys
            if key not in unannounced and (obj := self.store.get(key)) is not None:
                handler(Added(obj))

    def add_index(self, name: str, fn: IndexFunc) -> None:
        self.store.add_index(name, fn)

    def _summarizing(self, transform: Transform | None) -> Transform:
        """``transform``, after keeping who wrote the object (managedFields, which the
        default transform strips) in the client's :class:`~kubeloop._writers.WriterLog`,
        so a later 409 on a write based on this copy can name the other writer."""
        log_ = self._writers

        def summarize(obj: Object) -> Object:
            meta = obj.get("metadata") or {}
            if log_.holds(meta.get("uid") or "", str(meta.get("resourceVersion") or "")):
                # the echo of our own write: the client recorded this very version's
                # summary from the write's result, so there is nothing to add
                return transform(obj) if transform is not None else obj
            writers = writers_of(obj)
            out = transform(obj) if transform is not None else obj
            log_.record(out, writers)
            return out

        return summarize

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Deleted):
            self._writers.forget(event.obj)
        # a copy: a handler may subscribe another one (which the replay above serves)
        for handler in tuple(self._handlers):
            try:
                handler(event)
            except Exception:  # a bad handler must not kill the watch
                log.exception("event handler failed", extra={"informer": self.name})

    def start(self) -> None:
        if self._task is None:
            _freeze_startup_heap()
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"informer {self.name}"
            )

    async def _supervise(self) -> None:
        """Run the reflector; if it crashes (a bad ``transform``, a body that is not
        JSON, any bug), log it and start it again after a backoff, with a fresh LIST.

        The reflector itself retries the failures it expects (API and connection
        errors); this is for everything else, so no informer dies silently. The
        backoff starts over once a restarted reflector has listed successfully.
        """
        opts = self.reflector.options
        backoff = ListWatchBackoff(opts.backoff_initial, opts.backoff_max)
        while True:
            lists_before = self.reflector.lists
            try:
                await self.reflector.run()
                raise RuntimeError("reflector returned")  # it returns only when cancelled
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                err: BaseException = RuntimeError("stray cancellation in the reflector")
            except Exception as exc:
                err = exc
            if self.reflector.lists > lists_before:
                backoff = ListWatchBackoff(opts.backoff_initial, opts.backoff_max)
            self.crashes += 1
            self.last_crash = err
            self._lists_at_crash = self.reflector.lists
            pause = backoff.next()
            log.error(
                "informer crashed: %s; restarting with a fresh list in %.1fs",
                f"{type(err).__name__}: {err}",
                pause,
                exc_info=err,
                extra={"informer": self.name, "crashes": self.crashes},
            )
            await asyncio.sleep(pause)

    def failure(self) -> str | None:
        """None while healthy; else why this informer is not (for /healthz): it ended,
        or its last run crashed and it has not listed successfully since."""
        task = self._task
        if task is None:
            return None
        if task.done():
            err = None if task.cancelled() else task.exception()
            return f"dead ({err!r})" if err else "dead"
        if self.last_crash is not None and self.reflector.lists == self._lists_at_crash:
            return f"crashed {self.crashes} time(s), restarting; last: {self.last_crash!r}"
        return None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_synced(self) -> None:
        await self.reflector.synced.wait()


@dataclass(frozen=True)
class _InformerKey:
    resource: Resource
    namespace: str | None
    label_selector: str | None
    field_selector: str | None
    # a metadata-only informer is another informer: a reader of full objects never
    # gets a PartialObjectMetadata, nor the other way round
    metadata_only: bool = False


class OutOfScope(TerminalError):
    """A cache read or informer outside the namespaces this manager may see
    (``ManagerOptions.namespaces``). Terminal: retrying the reconcile cannot help;
    widen the manager's namespaces or read another way."""


class CacheReadError(KubeloopError):
    """A cache read could not be served because the informer it needs has not synced:
    the apiserver refused to ``list`` (or ``watch``) the kind, e.g. RBAC grants ``get``
    only, or it did not sync within ``Cache.read_sync_timeout``. Retriable (a role may
    be granted, an apiserver come back): :func:`~kubeloop.classify` says BACKOFF, so the
    reconcile is retried with backoff instead of a worker waiting for ever.

    ``resource``, ``namespace`` (None: all) and ``verb`` (the refused or failing one,
    ``"list"`` or ``"watch"``) say what was asked; ``cause`` is the apiserver's answer
    (None after a timeout without one)."""

    def __init__(
        self,
        message: str,
        *,
        resource: Resource,
        namespace: str | None,
        verb: str,
        cause: BaseException | None,
    ) -> None:
        super().__init__(message)
        self.resource = resource
        self.namespace = namespace
        self.verb = verb
        self.cause = cause


#: How long a cache read waits for an informer's first sync before failing with
#: :class:`CacheReadError` (a refusal fails it at once).
READ_SYNC_TIMEOUT = 60.0

#: Read-your-writes expectations kept per resource at most (oldest dropped first):
#: an expectation the watch never settles (an object outside every informer's
#: selector) must not grow the table forever.
MAX_PENDING_WRITES = 10_000


class Cache:
    """Shared informers, started together; reads come from memory.

    Reads return objects the caller owns (the store keeps frozen JSON and
    decodes a fresh dict per read, see :mod:`kubeloop._store`): a reconcile may
    mutate what it read without corrupting the cache. Reads (``get`` and
    ``list``) right after our own write wait for the watch to deliver it;
    ``read_your_writes_timeout`` (default 5 s) bounds that wait, after which the
    lagging objects are read live.

    ``namespaces`` (default None: all) are the namespaces this cache may watch;
    a namespaced informer or read outside them raises :class:`OutOfScope`. A
    read for which no informer exists starts one no wider than the read (the
    read's namespace), never a cluster-wide one behind the caller's back.

    A read waits for its informer's first sync at most ``read_sync_timeout``
    seconds (default 60), and not at all once the apiserver has refused the LIST
    (403/401, or 404: a kind it does not serve): both raise :class:`CacheReadError`,
    naming the kind and the verb.

    ``transforms`` maps a kind to its own transform (None: store its objects
    untouched), in place of ``options.transform`` for that kind's informers, full and
    metadata-only alike (controller-runtime's ``ByObject`` transforms);
    :meth:`set_transform` adds one later, before the kind's first informer.

    Reads with ``metadata_only=True`` are served from a metadata-only informer of the
    kind (``PartialObjectMetadata``: metadata, no spec, status or data), a separate
    list and watch from the full one.
    """

    def __init__(
        self,
        client: Client,
        *,
        options: ReflectorOptions | None = None,
        read_your_writes_timeout: float = 5.0,
        namespaces: Iterable[str] | None = None,
        read_sync_timeout: float = READ_SYNC_TIMEOUT,
        transforms: Mapping[Resource, Transform | None] | None = None,
    ) -> None:
        self.client = client
        self.options = options or ReflectorOptions()
        self._transforms: dict[Resource, Transform | None] = dict(transforms or {})
        self.read_your_writes_timeout = read_your_writes_timeout
        self.read_sync_timeout = read_sync_timeout
        self.namespaces: frozenset[str] | None = (
            frozenset(namespaces) if namespaces is not None else None
        )
        if self.namespaces is not None and not self.namespaces:
            raise ValueError("Cache(namespaces=...) needs at least one namespace (None: all)")
        self._informers: dict[_InformerKey, Informer] = {}
        # the same informers by kind, with their namespace: what every write and watch
        # event consults (read-your-writes), without a scan of all informers
        self._by_resource: dict[Resource, list[tuple[str | None, Informer]]] = {}
        # (kind, namespace, selector, metadata-only) -> the cluster-wide and the namespace's
        # informer that could serve a read (see _covering), looked up once per shape of read
        self._pairs: dict[
            tuple[Resource, str | None, str | None, bool], tuple[Informer | None, Informer | None]
        ] = {}
        self._started = False
        # resource -> object key -> the resourceVersion our last write produced
        self._expected: dict[Resource, dict[str, str]] = {}
        # resource -> object key -> (the uid our last delete removed, "" if unknown; the
        # version of our last write before it, "" if none): a delete answered with a
        # Status has no version to wait for, only an absence
        self._deleted: dict[Resource, dict[str, tuple[str, str]]] = {}
        # resource -> object key -> the labels our last write left it with: a selector
        # informer that does not hold it need not wait for a version outside its selector
        self._labels: dict[Resource, dict[str, dict[str, str]]] = {}
        self.live_read_fallbacks = 0
        #: Waits for our own writes that ran out of time (at most one per read: once a
        #: read's deadline has passed, its other keys are not waited for).
        self.expired_read_waits = 0

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def scope(self, resource: Resource, namespace: str | None) -> list[str | None]:
        """The informer namespaces that cover a source of ``resource`` in ``namespace``
        (None: all): ``[None]`` for a cluster-scoped kind or an unrestricted cache,
        the allowed namespaces for an all-namespaces source of a restricted one.
        Raises :class:`OutOfScope` for a namespace this cache may not see."""
        if not resource.namespaced:
            return [None]
        if namespace is not None:
            self._check(resource, namespace)
            return [namespace]
        if self.namespaces is None:
            return [None]
        out: list[str | None] = [*sorted(self.namespaces)]
        return out

    def _check(self, resource: Resource, namespace: str | None) -> None:
        if self.namespaces is None or not resource.namespaced:
            return
        allowed = ", ".join(sorted(self.namespaces))
        if namespace is None:
            raise OutOfScope(
                f"{resource.key} across all namespaces: this manager may only see "
                f"namespaces [{allowed}] (ManagerOptions.namespaces); pass a namespace"
            )
        if namespace not in self.namespaces:
            raise OutOfScope(
                f"{resource.key} in namespace {namespace!r}: this manager may only see "
                f"namespaces [{allowed}] (ManagerOptions.namespaces)"
            )

    def _default_namespace(self, resource: Resource, namespace: str | None) -> str | None:
        """None for a cluster-scoped kind; the one allowed namespace for an
        all-namespaces request on a cache restricted to one."""
        if not resource.namespaced:
            return None
        if namespace is None and self.namespaces is not None and len(self.namespaces) == 1:
            (namespace,) = self.namespaces
        return namespace

    def set_transform(self, resource: Resource, transform: Transform | None) -> None:
        """Give ``resource`` its own transform (None: none, managedFields kept) in place of
        the cache-wide ``options.transform``. Only before the kind's first informer: its
        store already holds objects transformed the other way."""
        if any(k.resource == resource for k in self._informers):
            raise ValueError(
                f"set_transform({resource.key}): the kind already has an informer; "
                "set its transform before any controller or read uses it"
            )
        self._transforms[resource] = transform

    def _options_for(self, resource: Resource) -> ReflectorOptions:
        if resource not in self._transforms:
            return self.options
        return dataclasses.replace(self.options, transform=self._transforms[resource])

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Informer:
        """The shared informer for this scope (created, and started if the cache runs).

        On a cache restricted to one namespace, ``namespace=None`` means that one;
        with several, a namespaced kind needs an explicit namespace
        (:meth:`scope` lists them) or :class:`OutOfScope` is raised.
        ``metadata_only``: one that lists and watches ``PartialObjectMetadata``
        (separate from the kind's full informer).
        """
        namespace = self._default_namespace(resource, namespace)
        self._check(resource, namespace)
        key = _InformerKey(resource, namespace, label_selector, field_selector, metadata_only)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(
                self.client,
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                metadata_only=metadata_only,
                options=self._options_for(resource),
            )
            self._informers[key] = inf
            self._by_resource.setdefault(resource, []).append((namespace, inf))
            self._pairs.clear()  # a read may now be served by this one
            inf.add_handler(functools.partial(self._settle, resource))
            if self._started:
                inf.start()
        return inf

    def start(self) -> None:
        self._started = True
        for inf in self._informers.values():
            inf.start()

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()))

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        """Wait until every informer has listed once."""
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(inf.wait_synced() for inf in self._informers.values()))

    async def refresh_stale(self, max_silence: float, timeout: float | None) -> list[str]:
        """List again, from scratch, every started informer that cannot be shown fresh:
        not synced, failing, or silent (no event, no bookmark) for over ``max_silence``
        seconds; wait (at most ``timeout``) for those LISTs. Returns their names.

        For a standby that has just won the lease: its informers have run all along, but
        a watch that hangs shows nothing, and workers started on it would act on what the
        old leader has since changed. A fresh LIST is a quorum read (the apiserver's
        current state); the store swaps it in at once and announces only what changed,
        so the warm cache still spares a full round of reconciles."""
        stale = [
            inf
            for inf in self._informers.values()
            if inf.started
            and (
                not inf.has_synced
                or inf.reflector.last_error is not None
                or inf.reflector.stalled_for() > max_silence
            )
        ]
        if not stale:
            return []
        listed = {inf: inf.reflector.lists for inf in stale}
        for inf in stale:
            # a relist must not race its own watch (the swap would drop newer events):
            # the informer restarts, and its reflector lists before it watches again
            await inf.stop()
            inf.start()
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(i.reflector.wait_listed(n) for i, n in listed.items()))
        return [inf.name for inf in stale]

    def stalled(self, threshold: float) -> list[str]:
        """Names of informers whose watch showed no life for ``threshold`` seconds."""
        return [
            inf.name
            for inf in self._informers.values()
            if inf.has_synced and inf.reflector.stalled_for() > threshold
        ]

    # -- reads ----------------------------------------------------------------------
    def _covering(
        self, resource: Resource, ns: str | None, label_selector: str | None, meta: bool
    ) -> Informer | None:
        """An informer of ``resource`` covering namespace ``ns`` with exactly this selector
        (full, or metadata-only with ``meta``); of a cluster-wide one and the namespace's,
        the one furthest along.

        A reconcile's read must see at least the event that triggered it. That event came
        from one of them; if the other one's watch lags, reading it could miss a create
        the reconcile was told about (and return, leaving the object until its next
        event), or read the data before a change. Both are at etcd revisions of one
        sequence, and an informer at revision R holds every object of its scope as of R,
        so the one at the later revision has seen all the other has in the namespace
        both cover, the event included. controller-runtime reads the informer that
        delivered the event (one per kind); this is the same guarantee with two.
        """
        pair = self._pairs.get((resource, ns, label_selector, meta))
        if pair is None:
            wide = self._informers.get(_InformerKey(resource, None, label_selector, None, meta))
            scoped = (
                self._informers.get(_InformerKey(resource, ns, label_selector, None, meta))
                if ns is not None
                else None
            )
            if len(self._pairs) >= 1024:  # reads with ever new selectors: bounded
                self._pairs.clear()
            pair = self._pairs[(resource, ns, label_selector, meta)] = (wide, scoped)
        wide, scoped = pair
        if wide is None or scoped is None:
            return wide or scoped
        if not wide.has_synced:  # an unsynced one holds nothing yet
            return scoped
        ahead = scoped.has_synced and not rv_at_least(
            wide.reflector.store_version, scoped.reflector.store_version
        )
        return scoped if ahead else wide

    async def _reader(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        meta: bool = False,
    ) -> tuple[Informer, Selector | None]:
        """A synced informer that covers the read, and the selector to filter it by in
        memory (None: no filter).

        An informer with the read's own selector (a ``for_``/``watches`` with it) serves
        it as is: the same informer that delivered the controller's event. Otherwise the
        kind's unselected informer serves it, filtered in memory; if the kind has none,
        one is started, unselected and no wider than the read's namespace, and every
        later read of the kind, whatever its selector, shares it (one watch per kind and
        namespace, not one per distinct selector, as controller-runtime's cache)."""
        ns = self._default_namespace(resource, namespace)
        selector = parse_selector(label_selector) if label_selector else None
        inf = self._covering(resource, ns, label_selector, meta) if label_selector else None
        if inf is not None:
            selector = None  # its watch already filters
        else:
            inf = self._covering(resource, ns, None, meta)
        if inf is None:
            self._check(resource, ns)  # never wider than the read, never out of scope
            same_kind = [
                k for k in self._informers if k.resource == resource and k.namespace in (None, ns)
            ]
            others = sorted(k.label_selector or "" for k in same_kind if k.metadata_only == meta)
            extra = {"resource": resource.key, "namespace": ns or "", "selector": label_selector}
            if not others and same_kind:
                # the kind is watched, in the other form: this read costs a second watch
                log.warning(
                    "starting a %s informer for a read of a kind watched only %s (pass "
                    "metadata_only=%s to read from the watched one)",
                    "metadata-only" if meta else "full",
                    "as full objects" if meta else "as metadata",
                    not meta,
                    extra=extra,
                )
            elif others:
                # A second informer of a kind already watched lags the first: a reconcile
                # triggered by one and reading the other can see data older than its event.
                log.warning(
                    "starting a second informer for a read whose label_selector matches no "
                    "watched one (unselected: later reads of the kind share it; pass the "
                    "controller's selector to read from its informer)",
                    extra={**extra, "watched_selectors": others},
                )
            else:
                log.info(
                    "starting an informer for a read (declare it with owns() or watches())",
                    extra=extra,
                )
            inf = self.informer(resource, namespace=ns, metadata_only=meta)
        if not inf.has_synced:
            if not self._started:
                inf.start()
            await self._wait_synced(inf, resource, ns)
        return inf, selector

    async def _wait_synced(self, inf: Informer, resource: Resource, ns: str | None) -> None:
        """Wait for ``inf``'s first sync, bounded: a refused LIST (RBAC, or a kind the
        apiserver does not serve) fails the read at once, since it will not sync until
        someone changes the cluster; anything else after :attr:`read_sync_timeout`. The
        informer keeps retrying meanwhile, so a read after the role is granted succeeds."""
        refl = inf.reflector
        where = f" in namespace {ns!r}" if ns else " in all namespaces"
        try:
            async with asyncio.timeout(self.read_sync_timeout):
                while not inf.has_synced:
                    err, verb = refl.last_failure, refl.last_failure_verb or "list"
                    if err is not None:
                        refusal = explain_refusal(resource, refl.namespace, verb, err)
                        if refusal is None and isinstance(err, Unauthorized):
                            refusal = f"{verb} on {resource.key} refused: {err}"
                        if refusal is not None:
                            raise CacheReadError(
                                f"cannot read {resource.kind} ({resource.key}){where} from "
                                f"the cache, which needs list and watch: {refusal}",
                                resource=resource,
                                namespace=ns,
                                verb=verb,
                                cause=err,
                            )
                    await refl.wait_synced_or_failed()
        except TimeoutError as exc:
            last, verb = refl.last_failure, refl.last_failure_verb or "list"
            why = f"; last {verb!r} failed: {last}" if last is not None else ""
            raise CacheReadError(
                f"cannot read {resource.kind} ({resource.key}){where} from the cache: its "
                f"informer did not sync within {self.read_sync_timeout:g}s{why}",
                resource=resource,
                namespace=ns,
                verb=verb,
                cause=last,
            ) from exc

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Object | None:
        """The cached object (the caller's own copy), or None. Never older than our own
        last write to it.

        ``metadata_only``: its ``PartialObjectMetadata`` (metadata only), from the
        kind's metadata-only informer (started for the read if there is none, as below).

        ``label_selector``: an object outside it is None. It is read from the informer
        with that selector if there is one (the one a ``for_``/``watches`` with the same
        selector uses), else from the kind's unselected informer, filtered in memory.
        Without an informer of the kind covering ``namespace``, one for just that
        namespace is started, unselected (:class:`OutOfScope` if the manager may not
        see it).
        """
        # on a one-namespace cache "no namespace" is that namespace, for the key too
        ns = self._default_namespace(resource, namespace)
        inf, selector = await self._reader(resource, ns, label_selector, metadata_only)
        key = f"{ns}/{name}" if ns else name
        lagging = await self._caught_up(resource, inf, [key])
        if lagging:
            live = await self._live(resource, lagging, metadata_only)
            obj = live.get(key)  # straight from the server: nobody else holds it
            if obj is not None and not self._selects(inf, obj):
                obj = None  # outside the informer's selector: it would not hold it
        else:
            obj = inf.store.get(key)  # decoded for this read: the caller's own
        if obj is not None and selector is not None and not selector.matches(obj):
            return None
        return obj

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        index: tuple[str, str] | None = None,
        label_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[Object]:
        """The cached objects of a kind (the caller's own copies), optionally in one
        namespace or under one index value; ``label_selector`` filters them, served as
        for :meth:`get` (no new watch per selector). Objects we wrote are never older
        than our write. ``metadata_only``: ``PartialObjectMetadata``, as for :meth:`get`
        (an ``index`` is the metadata-only informer's own)."""
        ns = self._default_namespace(resource, namespace)
        inf, selector = await self._reader(resource, ns, label_selector, metadata_only)
        lagging: builtins.list[str] = []
        pending = [*self._expected.get(resource, ()), *self._deleted.get(resource, ())]
        if pending:
            prefix = f"{ns}/" if ns else ""
            keys = list(dict.fromkeys(k for k in pending if k.startswith(prefix)))
            lagging = await self._caught_up(resource, inf, keys)
        # read once the watch has delivered our writes (or the wait gave up); each
        # object is decoded for this read, so the caller owns it
        # (a namespaced read uses the namespace index: no scan of other namespaces)
        if index:
            objs = inf.store.by_index(*index, namespace=ns)
        elif selector is not None:
            # objects whose JSON lacks a required label=value are skipped undecoded
            objs = inf.store.list_containing(ns, selector.needles)
        else:
            objs = inf.store.list(ns)
        if lagging:
            objs = await self._merge_live(resource, inf, objs, lagging, index)
        if selector is not None:
            objs = [o for o in objs if selector.matches(o)]
        return objs

    async def _caught_up(
        self, resource: Resource, inf: Informer, keys: builtins.list[str]
    ) -> builtins.list[str]:
        """Wait for the watch to deliver our writes to ``keys``; return those it did not
        deliver within the read-your-writes timeout."""
        exp = self._expected.get(resource) or {}
        gone = self._deleted.get(resource) or {}
        if not exp and not gone:
            return []
        lagging = []
        # one deadline for the whole read, not one timeout per pending key: a list over
        # many lagging writes waits at most read_your_writes_timeout, then reads them live
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_your_writes_timeout
        expired = False
        for key in keys:
            # once one wait ran out, the rest only look (the deadline is the read's)
            timeout = 0.0 if expired else max(0.0, deadline - loop.time())
            # the read's own informer must have it; the expectation goes once every
            # informer covering the key has it (another may be read next)
            deleted = gone.get(key)
            if deleted is not None:
                uid, floor = deleted
                if not await inf.reflector.wait_gone(key, uid, floor, timeout):
                    lagging.append(key)
                    expired = self._ran_out(timeout) or expired
                elif self._all_gone(resource, key, deleted):
                    gone.pop(key, None)
                continue
            want = exp.get(key)
            if want is None:
                continue
            if self._never_holds(resource, inf, key):
                continue  # nothing to wait for; kept for the other informers
            if not await inf.reflector.wait_for(key, want, timeout):
                lagging.append(key)
                expired = self._ran_out(timeout) or expired
            elif self._all_have(resource, key, want):
                exp.pop(key, None)
        return lagging

    def _ran_out(self, timeout: float) -> bool:
        """Count a wait that had time and ran out of it; whether one did."""
        if timeout <= 0:
            return False
        self.expired_read_waits += 1
        return True

    def _never_holds(self, resource: Resource, inf: Informer, key: str) -> bool:
        """Whether ``inf`` (with a label selector) neither holds ``key`` nor will be sent
        our last write to it, which its selector leaves out: waiting for its watch to pass
        that version would only wait for some other object's event."""
        sel = inf.reflector.label_selector
        if not sel or key in inf.store:
            return False
        labels = self._labels.get(resource, {}).get(key)
        return labels is not None and not parse_selector(sel).matches(
            {"metadata": {"labels": labels}}
        )

    def _covering_key(self, resource: Resource, key: str) -> builtins.list[Informer]:
        """The informers whose scope could hold the object ``key`` (selectors aside)."""
        ns, _ = split_key(key)
        return [
            inf
            for inf_ns, inf in self._by_resource.get(resource, ())
            if inf_ns is None or inf_ns == ns
        ]

    def _all_have(
        self,
        resource: Resource,
        key: str,
        want: str,
        covering: builtins.list[Informer] | None = None,
    ) -> bool:
        """Whether every informer that could hold ``key`` (``covering``, if the caller
        has them already) is at version ``want`` or later for it (an informer whose
        selector leaves it out: once its watch is past it)."""
        if covering is None:
            covering = self._covering_key(resource, key)
        for inf in covering:
            have = inf.store.resource_version(key)
            if not rv_at_least(have if have is not None else inf.reflector.resource_version, want):
                return False
        return True

    def _all_gone(self, resource: Resource, key: str, deleted: tuple[str, str]) -> bool:
        """Whether every informer that could hold ``key`` has seen our delete of it."""
        return all(inf.reflector.gone(key, *deleted) for inf in self._covering_key(resource, key))

    async def _live(
        self, resource: Resource, keys: builtins.list[str], metadata_only: bool = False
    ) -> dict[str, Object | None]:
        from kubeloop._errors import NotFound

        self.live_read_fallbacks += len(keys)
        log.warning("watch lagging behind our write; reading live", extra={"objects": keys})
        out: dict[str, Object | None] = {}
        for key in keys:
            ns, name = split_key(key)
            try:
                out[key] = await self.client.get(resource, name, ns, metadata_only=metadata_only)
            except NotFound:
                out[key] = None
        return out

    async def _merge_live(
        self,
        resource: Resource,
        inf: Informer,
        objs: builtins.list[Object],
        lagging: builtins.list[str],
        index: tuple[str, str] | None,
    ) -> builtins.list[Object]:
        live = await self._live(resource, lagging, inf.metadata_only)
        by_key = {object_key(o): o for o in objs}
        for key, obj in live.items():
            if obj is None:
                by_key.pop(key, None)
                continue
            obj = inf.reflector.options.transform(obj) if inf.reflector.options.transform else obj
            if index and index[1] not in inf.store.index_func(index[0])(obj):
                by_key.pop(key, None)
            elif self._selects(inf, obj):
                # one the informer has not seen yet belongs in its list if it matches
                by_key[key] = obj
            else:  # our write took it out of the informer's selector
                by_key.pop(key, None)
        return list(by_key.values())

    @staticmethod
    def _selects(inf: Informer, obj: Object) -> bool:
        """Whether ``obj`` is within ``inf``'s label selector (any, if it has none)."""
        sel = inf.reflector.label_selector
        return not sel or parse_selector(sel).matches(obj)

    def _settle(self, resource: Resource, event: Event) -> None:
        """Drop a read-your-writes expectation once the watch has delivered it, so the
        table holds only writes still in flight (not every object ever written)."""
        key = object_key(event.obj)
        gone = self._deleted.get(resource)
        if gone and isinstance(event, Deleted) and key in gone:
            uid = (event.obj.get("metadata") or {}).get("uid", "")
            # an older incarnation's delete is not ours; another informer may still hold it
            if gone[key][0] in ("", uid) and self._all_gone(resource, key, gone[key]):
                del gone[key]
        exp = self._expected.get(resource)
        if not exp:
            return
        want = exp.get(key)
        if want is None:
            return
        # a delete settles only if it is at or after our write (compare versions, not
        # the event type: an older incarnation's delete arriving late is not ours)
        have = event.obj.get("metadata", {}).get("resourceVersion", "")
        if rv_at_least(have, want) and self._all_have(resource, key, want):
            del exp[key]

    def note_delete(self, resource: Resource, namespace: str | None, name: str, uid: str) -> None:
        """Record that our delete removed ``uid``, so reads wait until the informer has
        seen it go (bounded, then read live): a list right after our delete must not show
        the object (the over-delete client-go's expectations exist to prevent)."""
        key = f"{namespace}/{name}" if namespace else name
        if not self._covering_key(resource, key):
            return  # no informer could hold it: nobody reads it from here
        # a write still in flight becomes the floor: until the watch has delivered it,
        # the object may still arrive in an informer that has not seen it yet
        floor = self._expected.get(resource, {}).pop(key, "")
        gone = self._deleted.setdefault(resource, {})
        gone.pop(key, None)
        gone[key] = (uid, floor)
        while len(gone) > MAX_PENDING_WRITES:
            del gone[next(iter(gone))]

    def note_write(self, resource: Resource, obj: Object) -> None:
        """Record the version our write produced, so reads wait for it. Only for a
        kind and namespace some informer watches: nothing else reads it from here."""
        rv = obj.get("metadata", {}).get("resourceVersion")
        if not rv:
            return
        key = object_key(obj)
        watching = self._covering_key(resource, key)
        if not watching:
            return
        if self._all_have(resource, key, rv, watching):
            return  # every watch was faster than our response: nothing to wait for
        exp = self._expected.setdefault(resource, {})
        if key in self._deleted.get(resource, {}):
            # recreated after our delete: waiting for the new version covers both
            del self._deleted[resource][key]
        if key not in exp or rv_at_least(rv, exp[key]):
            exp.pop(key, None)
            exp[key] = rv  # (re)inserted last: the oldest expectation is first
            # set with every expectation, so the one consulted is always that write's;
            # bounded alike (an entry outliving its expectation is never read)
            labels = self._labels.setdefault(resource, {})
            labels.pop(key, None)
            labels[key] = dict((obj.get("metadata") or {}).get("labels") or {})
            for table in (exp, labels):
                while len(table) > MAX_PENDING_WRITES:
                    del table[next(iter(table))]
