"""The list-then-watch loop that keeps a :class:`~kubeloop._store.Store` current.

LIST (paged) gives the objects and a resourceVersion; WATCH from that version,
with bookmarks, gives every later change. A watch that ends cleanly resumes from
the last version seen; a watch that goes silent for longer than the read timeout
is treated as stalled and restarted; a 410 Gone means the server no longer has
our version, so we list again and report objects that vanished meanwhile as
deletions (``final_state_unknown``) rather than silently forgetting them.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubeloop._backoff import ListWatchBackoff, retry_after_pause
from kubeloop._errors import Gone, KubeloopError, RequestTimeout
from kubeloop._event import Added, Deleted, Event, Updated
from kubeloop._refused import explain_refusal
from kubeloop._resource import Object, Resource
from kubeloop._store import Relist, Relisted, Store, object_key, version_of

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.reflector")

Transform = Callable[[Object], Object]


def strip_managed_fields(obj: Object) -> Object:
    """Drop ``metadata.managedFields``: often half of an object's size, rarely read."""
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


@dataclass
class ReflectorOptions:
    """Tuning for list/watch. The defaults follow client-go's reflector."""

    #: LIST page size; each page is decoded separately, bounding event-loop stalls.
    page_size: int = 500
    #: WATCH timeoutSeconds is drawn from this range so many watches do not expire together.
    watch_timeout: tuple[int, int] = (300, 600)
    #: Seconds without any line (event or bookmark) before a watch counts as stalled.
    #: The apiserver sends a bookmark about once a minute, so 3x that is safe.
    read_timeout: float = 180.0
    #: Backoff after a failed list or watch: initial and maximum seconds (client-go: 0.8 s, 30 s).
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    #: Applied to every object before it enters the store (default strips managedFields).
    #: If it raises, the informer logs the crash and restarts with a fresh list.
    transform: Transform | None = field(default=strip_managed_fields)


def rv_at_least(have: str, want: str) -> bool:
    """Whether version ``have`` is at least ``want``.

    resourceVersions are opaque by contract; kube-apiserver's are etcd revisions
    (integers), which is what read-your-writes relies on. Anything else compares
    as "not yet", so callers fall back to a live read.
    """
    try:
        return int(have) >= int(want)
    except ValueError:
        return have == want


#: Seconds of work between two yields to other tasks while a list is stored.
_SLICE = 0.002


class _Pace:
    """Says when to yield to other tasks: after ``every`` steps or ``budget`` seconds of
    work since the last yield, whichever comes first. A large list is announced in
    slices, so the event loop is never blocked for long, however slow the handlers
    (bench/informer_scale.py reports the longest stall). A plain check, not a coroutine:
    it runs once per object."""

    def __init__(self, every: int = 500, budget: float = _SLICE) -> None:
        self.every = every
        self.budget = budget
        self._steps = 0
        self._since = time.perf_counter()

    def due(self) -> bool:
        """Count one step; True (and start counting afresh) if it is time to yield."""
        self._steps += 1
        if self._steps >= self.every or time.perf_counter() - self._since >= self.budget:
            self._steps = 0
            self._since = time.perf_counter()
            return True
        return False


class Reflector:
    """Lists and watches one resource (optionally one namespace/selector) into a store."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        store: Store,
        emit: Callable[[Event], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        options: ReflectorOptions | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.store = store
        self.emit = emit
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        #: List and watch ``PartialObjectMetadata`` (metadata only) instead of objects.
        self.metadata_only = metadata_only
        self.options = options or ReflectorOptions()
        self.synced = asyncio.Event()
        self.resource_version = ""
        #: The version the store holds the state of: a LIST's as soon as it is swapped in
        #: (before its objects are announced, unlike :attr:`resource_version`, which a
        #: watch resumes from), then each watch event's and bookmark's. A cache read picks,
        #: of two informers covering it, the one furthest along by it.
        self.store_version = ""
        #: monotonic time of the last line received (event or bookmark) or (re)connect
        self.last_activity = time.monotonic()
        self.stalls = 0
        self.relists = 0
        #: Successful LISTs so far (the first one included).
        self.lists = 0
        #: Why the last list or watch failed, while it has not succeeded since (None:
        #: healthy). A cache-sync timeout names it.
        self.last_error: str | None = None
        #: The same failure as raised, and the verb that failed (``"list"``/``"watch"``);
        #: ``failures`` counts them all. A cache read waiting for the first sync reads
        #: them to fail fast on a refusal (RBAC) instead of waiting for a sync.
        self.last_failure: BaseException | None = None
        self.last_failure_verb = ""
        self.failures = 0
        self._changed = asyncio.Condition()
        self._waiting = 0  # tasks in _wait: a change with none costs no notify
        # the relist whose changes are being announced to the handlers, if any
        self._announcing: Relisted | None = None

    def unannounced(self) -> set[str]:
        """Keys a relist has stored but not announced to the handlers yet: a handler
        subscribing now gets them from the announcement, not from a replay."""
        return self._announcing.pending() if self._announcing is not None else set()

    @property
    def name(self) -> str:
        scope = f"/{self.namespace}" if self.namespace else ""
        query = [
            *([self.label_selector] if self.label_selector else []),
            *([f"fields:{self.field_selector}"] if self.field_selector else []),
        ]
        sel = f"?{'&'.join(query)}" if query else ""
        meta = "[metadata]" if self.metadata_only else ""
        return f"{self.resource.key}{meta}{scope}{sel}"

    def stalled_for(self) -> float:
        """Seconds since the watch last showed life."""
        return time.monotonic() - self.last_activity

    async def run(self) -> None:
        """Run until cancelled. Expected failures (API and connection errors, 410 Gone,
        stalls) are retried here; anything else is raised for the informer to restart."""
        need_list = True
        # one schedule for failures, relists and watches dropped at once (_backoff.py)
        backoff = ListWatchBackoff(self.options.backoff_initial, self.options.backoff_max)
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                started, lines = time.monotonic(), await self._watch()
                if ListWatchBackoff.ended_early(time.monotonic() - started, lines):
                    await asyncio.sleep(backoff.next())
            except Gone:
                log.info("watch expired (410 Gone); relisting", extra={"informer": self.name})
                need_list = True
                await asyncio.sleep(backoff.next())
            except (KubeloopError, OSError) as err:
                if isinstance(err, RequestTimeout) and not need_list:
                    # a silent watch: restart it at once. A LIST that timed out is a
                    # failure like any other, retried with backoff (below)
                    self.stalls += 1
                    log.warning(
                        "watch stalled: nothing received for %.0fs; restarting",
                        self.options.read_timeout,
                        extra={"informer": self.name},
                    )
                    continue
                # a throttled watch (429 + Retry-After) waits at least as the server asked
                delay = retry_after_pause(getattr(err, "retry_after", None), backoff.next())
                verb = "list" if need_list else "watch"
                refusal = explain_refusal(self.resource, self.namespace, verb, err)
                if refusal is not None:
                    # configuration, not a blip: said in full when it starts or changes,
                    # then once per (backed-off) retry without the explanation
                    if refusal != self.last_error:
                        log.error(
                            "%s; retrying with backoff", refusal, extra={"informer": self.name}
                        )
                    else:
                        log.warning(
                            "%s still refused (%s); retrying in %.1fs",
                            verb,
                            err,
                            delay,
                            extra={"informer": self.name},
                        )
                    self.last_error = refusal
                else:
                    self.last_error = f"{verb} failed: {err}"
                    log.warning(
                        "list/watch failed: %s; retrying in %.1fs",
                        err,
                        delay,
                        extra={"informer": self.name},
                    )
                self.last_failure, self.last_failure_verb = err, verb
                self.failures += 1
                await self._notify()  # wakes a cache read waiting for the first sync
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        # the new content is built aside, page by page as the pages arrive, yielding to
        # other tasks as it goes, and swapped in at once: readers never see a
        # half-replaced store (see Store.commit). Each page's dicts can go once stored,
        # so a big list is never held decoded as a whole.
        relist = self.store.relist()
        rv = ""
        pace = _Pace()
        async for page in self.client.list_pages(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.options.page_size,
            metadata_only=self.metadata_only,
        ):
            self.last_activity = time.monotonic()
            if page.restart:
                relist = self.store.relist()
            rv = page.resource_version
            items = page.items
            del page
            items.reverse()  # popped from the end: in list order
            while items:
                # receiving and decoding the page was one step; storing it starts in the next
                await asyncio.sleep(0)
                self._store_slice(relist, items, _SLICE)
        done = self.store.commit(relist)
        del relist
        self.store_version = rv
        # announced after the swap, so a handler's reconcile finds what it is told about;
        # decoded from the store one by one (the caller's own, gone after the handlers)
        self._announcing = done
        try:
            for change in done.changes():  # None: unchanged, a step all the same
                if change is not None:
                    old, obj = change
                    self.emit(Added(obj) if old is None else Updated(old, obj))
                if pace.due():
                    await asyncio.sleep(0)
            for gone in done.gone():
                self.emit(Deleted(gone, final_state_unknown=True))
                if pace.due():
                    await asyncio.sleep(0)
        finally:
            self._announcing = None
        if self.synced.is_set():
            self.relists += 1
        self.lists += 1
        self.last_error = None
        self.resource_version = rv
        self.last_failure, self.last_failure_verb = None, ""
        self.synced.set()
        await self._notify()

    def _store_slice(self, relist: Relist, items: list[Object], budget: float) -> None:
        """Store objects of a page (reversed: popped from the end) into ``relist`` for up
        to ``budget`` seconds, with the cyclic GC paused (no await in between, so no
        other task runs with it off). Each object is freed as soon as it is stored, so
        what a slice allocates dies young and triggers no collection: a full one walks
        the whole process's heap, a stall each time."""
        transform = self.options.transform
        deadline = time.perf_counter() + budget
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            while items:
                obj = items.pop()
                relist.put(transform(obj) if transform else obj)
                if len(items) % 64 == 0 and time.perf_counter() >= deadline:
                    break
        finally:
            if was_enabled:
                gc.enable()

    async def _watch(self) -> int:
        """Watch until the server ends it; returns the number of lines received."""
        lines = 0
        lo, hi = self.options.watch_timeout
        transform = self.options.transform
        self.last_activity = time.monotonic()
        async for event in self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version,
            allow_bookmarks=True,
            timeout_seconds=random.randint(lo, hi),
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            read_timeout=self.options.read_timeout,
            metadata_only=self.metadata_only,
        ):
            self.last_activity = time.monotonic()
            lines += 1
            obj: Any = event.object
            if event.type == "BOOKMARK":
                self.resource_version = version_of(obj) or self.resource_version
                self.store_version = self.resource_version
                continue
            managed = obj.get("metadata", {}).get("managedFields") or ()
            if transform:
                obj = transform(obj)
            if event.type in ("ADDED", "MODIFIED"):
                old = self.store.put(obj)
                self.emit(Added(obj) if old is None else Updated(old, obj, managed))
            elif event.type == "DELETED":
                self.store.discard(object_key(obj))
                self.emit(Deleted(obj))
            self.resource_version = version_of(obj) or self.resource_version
            self.store_version = self.resource_version
            if self._waiting:  # as _notify, without a coroutine per event when nobody waits
                await self._notify()
        return lines

    async def _notify(self) -> None:
        # nobody waiting (the usual case: read-your-writes waits are rare) costs no lock
        if self._waiting:
            async with self._changed:
                self._changed.notify_all()

    async def _wait(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate``, checked at every :meth:`_notify`."""
        self._waiting += 1
        try:
            async with self._changed:
                await self._changed.wait_for(predicate)
        finally:
            self._waiting -= 1

    async def wait_listed(self, after: int) -> None:
        """Until more than ``after`` LISTs have succeeded (see :attr:`lists`)."""
        await self._wait(lambda: self.lists > after)

    async def wait_synced_or_failed(self) -> None:
        """Until the first LIST has succeeded, or a list/watch fails after this call."""
        seen = self.failures
        await self._wait(lambda: self.synced.is_set() or self.failures != seen)

    def gone(self, key: str, uid: str, floor: str) -> bool:
        """Whether the store no longer holds the incarnation ``uid`` of ``key`` (absent, or
        recreated with another uid; any incarnation when ``uid`` is empty) and the watch
        is past ``floor`` (our last write before the delete: until it has delivered that,
        the object may still arrive)."""
        if floor and not rv_at_least(self.resource_version, floor):
            return False
        if key not in self.store:
            return True
        if not uid:
            return False
        obj = self.store.get(key)
        return obj is None or (obj.get("metadata") or {}).get("uid") != uid

    async def wait_gone(self, key: str, uid: str, floor: str, timeout: float) -> bool:
        """Wait until :meth:`gone`; False on timeout."""
        return await self._wait_until(lambda: self.gone(key, uid, floor), timeout)

    async def wait_for(self, key: str, min_rv: str, timeout: float) -> bool:
        """Wait until the store holds ``key`` at ``min_rv`` or later (or it is deleted
        at a later version). Returns False on timeout."""

        def caught_up() -> bool:
            rv = self.store.resource_version(key)
            if rv is not None:
                return rv_at_least(rv, min_rv)
            return rv_at_least(self.resource_version, min_rv)

        return await self._wait_until(caught_up, timeout)

    async def _wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait (woken by every change to the store) until ``predicate``; False on timeout."""
        if predicate():  # already true: no timer, no lock
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._wait(predicate)
        except TimeoutError:
            return False
        return True
