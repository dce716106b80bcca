"""Shared informers and the cache that readers use.

An :class:`Informer` is a reflector, its store and a list of event handlers.
The :class:`Cache` hands out one informer per (resource, namespace, selector),
so any number of controllers watching Pods cost one watch, and serves reads
from memory. Reads right after our own write wait for the watch to deliver
that write (read-your-own-writes), so a reconcile never acts on the version it
just replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubeloop._event import Added, Deleted, Event
from kubeloop._reflector import Reflector, ReflectorOptions, rv_at_least
from kubeloop._resource import Object, Resource
from kubeloop._store import IndexFunc, Store, object_key

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.cache")

Handler = Callable[[Event], None]


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
        options: ReflectorOptions | None = None,
    ) -> None:
        self.resource = resource
        self.store = Store()
        self._handlers: list[Handler] = []
        self.reflector = Reflector(
            client,
            resource,
            self.store,
            self._dispatch,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            options=options,
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

        Also during the first LIST, whose objects enter the store one by one: those
        already stored are replayed now, the rest reach every handler as they arrive.
        """
        self._handlers.append(handler)
        for obj in self.store.list():
            handler(Added(obj))

    def add_index(self, name: str, fn: IndexFunc) -> None:
        self.store.add_index(name, fn)

    def _dispatch(self, event: Event) -> None:
        # a copy: a handler may subscribe another one (which the replay above serves)
        for handler in tuple(self._handlers):
            try:
                handler(event)
            except Exception:  # a bad handler must not kill the watch
                log.exception("event handler failed", extra={"informer": self.name})

    def start(self) -> None:
        if self._task is None:
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
        delays = self.reflector.options.backoff().delays()
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
                delays = self.reflector.options.backoff().delays()
            self.crashes += 1
            self.last_crash = err
            self._lists_at_crash = self.reflector.lists
            pause = next(delays)
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


class Cache:
    """Shared informers, started together; reads come from memory.

    ``read_your_writes_timeout`` (default 5 s) bounds how long a read waits for
    the watch to deliver our own write before it falls back to a live GET.
    """

    def __init__(
        self,
        client: Client,
        *,
        options: ReflectorOptions | None = None,
        read_your_writes_timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.options = options or ReflectorOptions()
        self.read_your_writes_timeout = read_your_writes_timeout
        self._informers: dict[_InformerKey, Informer] = {}
        self._started = False
        # resource -> object key -> the resourceVersion our last write produced
        self._expected: dict[Resource, dict[str, str]] = {}
        self.live_read_fallbacks = 0

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Informer:
        """The shared informer for this scope (created, and started if the cache runs)."""
        key = _InformerKey(resource, namespace, label_selector, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(
                self.client,
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                options=self.options,
            )
            self._informers[key] = inf
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

    def stalled(self, threshold: float) -> list[str]:
        """Names of informers whose watch showed no life for ``threshold`` seconds."""
        return [
            inf.name
            for inf in self._informers.values()
            if inf.has_synced and inf.reflector.stalled_for() > threshold
        ]

    # -- reads ----------------------------------------------------------------------
    def _reader(
        self, resource: Resource, namespace: str | None, label_selector: str | None
    ) -> Informer:
        # a cluster-wide informer serves every namespace; prefer it when present
        for key in (
            _InformerKey(resource, None, label_selector, None),
            _InformerKey(resource, namespace, label_selector, None),
        ):
            if key in self._informers:
                return self._informers[key]
        return self.informer(resource, label_selector=label_selector)

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> Object | None:
        """The cached object, or None. Never older than our own last write to it.

        ``label_selector`` reads from the informer of that scope (the one a
        ``for_``/``watches`` with the same selector uses): an object outside it is
        None. Without it, the read is served by an unscoped informer, started if
        none exists, which watches every object of the kind.
        """
        inf = self._reader(resource, namespace, label_selector)
        if not inf.has_synced:
            if not self._started:
                inf.start()
            await inf.wait_synced()
        key = f"{namespace}/{name}" if namespace and resource.namespaced else name
        expected = self._expected.get(resource, {}).get(key)
        if expected is not None:
            if not await inf.reflector.wait_for(key, expected, self.read_your_writes_timeout):
                self.live_read_fallbacks += 1
                log.warning("watch lagging behind our write; reading live", extra={"object": key})
                from kubeloop._errors import NotFound

                try:
                    return await self.client.get(resource, name, namespace)
                except NotFound:
                    return None
            self._expected[resource].pop(key, None)
        return inf.store.get(key)

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        index: tuple[str, str] | None = None,
        label_selector: str | None = None,
    ) -> list[Object]:
        """Cached objects of a kind, optionally in one namespace or under one index value;
        ``label_selector`` picks the informer of that scope, as for :meth:`get`."""
        inf = self._reader(resource, namespace, label_selector)
        if not inf.has_synced:
            if not self._started:
                inf.start()
            await inf.wait_synced()
        objs = inf.store.by_index(*index) if index else inf.store.list()
        if namespace and resource.namespaced:
            objs = [o for o in objs if o["metadata"].get("namespace") == namespace]
        return objs

    def _settle(self, resource: Resource, event: Event) -> None:
        """Drop a read-your-writes expectation once the watch has delivered it, so the
        table holds only writes still in flight (not every object ever written)."""
        exp = self._expected.get(resource)
        if not exp:
            return
        key = object_key(event.obj)
        want = exp.get(key)
        if want is None:
            return
        have = event.obj.get("metadata", {}).get("resourceVersion", "")
        if isinstance(event, Deleted) or rv_at_least(have, want):
            del exp[key]

    def note_write(self, resource: Resource, obj: Object) -> None:
        """Record the version our write produced, so reads wait for it."""
        rv = obj.get("metadata", {}).get("resourceVersion")
        if not rv:
            return
        key = object_key(obj)
        for k, inf in self._informers.items():
            cached = inf.store.get(key) if k.resource == resource else None
            if cached is not None and rv_at_least(
                cached["metadata"].get("resourceVersion", ""), rv
            ):
                return  # the watch was faster than our response: nothing to wait for
        exp = self._expected.setdefault(resource, {})
        if key not in exp or rv_at_least(rv, exp[key]):
            exp[key] = rv
