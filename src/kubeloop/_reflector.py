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
import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubeloop._backoff import Backoff
from kubeloop._errors import Gone, KubeloopError, RequestTimeout
from kubeloop._event import Added, Deleted, Event, Updated
from kubeloop._resource import Object, Resource
from kubeloop._store import Store, object_key

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

    def backoff(self) -> Backoff:
        """The schedule of pauses between failed tries: doubling from
        ``backoff_initial`` up to ``backoff_max``, +20 % jitter, never giving up."""
        return Backoff(
            duration=self.backoff_initial,
            factor=2.0,
            jitter=0.2,
            steps=sys.maxsize,
            cap=self.backoff_max,
        )


def _rv(obj: Object) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


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
        options: ReflectorOptions | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.store = store
        self.emit = emit
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.options = options or ReflectorOptions()
        self.synced = asyncio.Event()
        self.resource_version = ""
        #: monotonic time of the last line received (event or bookmark) or (re)connect
        self.last_activity = time.monotonic()
        self.stalls = 0
        self.relists = 0
        #: Successful LISTs so far (the first one included).
        self.lists = 0
        self._changed = asyncio.Condition()

    @property
    def name(self) -> str:
        scope = f"/{self.namespace}" if self.namespace else ""
        sel = f"?{self.label_selector}" if self.label_selector else ""
        return f"{self.resource.key}{scope}{sel}"

    def stalled_for(self) -> float:
        """Seconds since the watch last showed life."""
        return time.monotonic() - self.last_activity

    async def run(self) -> None:
        """Run until cancelled. Expected failures (API and connection errors, 410 Gone,
        stalls) are retried here; anything else is raised for the informer to restart."""
        need_list = True
        delays = self.options.backoff().delays()
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                delays = self.options.backoff().delays()
            except Gone:
                log.info("watch expired (410 Gone); relisting", extra={"informer": self.name})
                need_list = True
            except RequestTimeout:
                self.stalls += 1
                log.warning(
                    "watch stalled: nothing received for %.0fs; restarting",
                    self.options.read_timeout,
                    extra={"informer": self.name},
                )
            except (KubeloopError, OSError) as err:
                pause = next(delays)
                log.warning(
                    "list/watch failed: %s; retrying in %.1fs",
                    err,
                    pause,
                    extra={"informer": self.name},
                )
                await asyncio.sleep(pause)

    async def _list(self) -> None:
        items, rv = await self.client.list_all(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.options.page_size,
        )
        self.last_activity = time.monotonic()
        transform = self.options.transform
        seen: set[str] = set()
        for n, item in enumerate(items):
            managed = item.get("metadata", {}).get("managedFields") or ()
            obj = transform(item) if transform else item
            key = object_key(obj)
            seen.add(key)
            old = self.store.put(obj)
            if old is None:
                self.emit(Added(obj))
            elif _rv(old) != _rv(obj):
                self.emit(Updated(old, obj, managed))
            if n % 500 == 499:
                await asyncio.sleep(0)  # let other tasks run during a big relist
        for key in self.store:
            if key not in seen:
                gone = self.store.remove(key)
                if gone is not None:
                    self.emit(Deleted(gone, final_state_unknown=True))
        if self.synced.is_set():
            self.relists += 1
        self.lists += 1
        self.resource_version = rv
        self.synced.set()
        await self._notify()

    async def _watch(self) -> None:
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
        ):
            self.last_activity = time.monotonic()
            obj: Any = event.object
            if event.type == "BOOKMARK":
                self.resource_version = _rv(obj) or self.resource_version
                continue
            managed = obj.get("metadata", {}).get("managedFields") or ()
            if transform:
                obj = transform(obj)
            if event.type in ("ADDED", "MODIFIED"):
                old = self.store.put(obj)
                self.emit(Added(obj) if old is None else Updated(old, obj, managed))
            elif event.type == "DELETED":
                old = self.store.remove(object_key(obj))
                self.emit(Deleted(obj))
            self.resource_version = _rv(obj) or self.resource_version
            await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, key: str, min_rv: str, timeout: float) -> bool:
        """Wait until the store holds ``key`` at ``min_rv`` or later (or it is deleted
        at a later version). Returns False on timeout."""

        def caught_up() -> bool:
            obj = self.store.get(key)
            if obj is not None:
                return rv_at_least(_rv(obj), min_rv)
            return rv_at_least(self.resource_version, min_rv)

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(caught_up)
        except TimeoutError:
            return False
        return True
