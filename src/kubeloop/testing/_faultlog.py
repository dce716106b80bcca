"""The fault proxy's record of every request: who asked what, what the proxy did, what came back.

It is an oracle, so it records what the API server said, not what a client believed:
the status code, the ``Date`` header and, for writes, the ``resourceVersion`` of the
object in the response. In kube-apiserver a resourceVersion is etcd's revision of the
write, one counter for the whole cluster, so sorting writes by it gives the exact order
etcd committed them in, whichever client made them and however the clocks drift.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from kubeloop.testing._requestinfo import WRITE_VERBS

_log = logging.getLogger("kubeloop.testing.faults")

#: Fields :meth:`FaultLog.counts` can group by.
COUNT_KEYS = frozenset(
    {"client", "verb", "resource", "subresource", "namespace", "name", "status", "action"}
)


@dataclass
class LogEntry:
    """One request through the proxy. Filled in as the request goes; a watch's entry
    exists from its first byte and gets ``events`` and ``ended`` as it runs."""

    #: Order of arrival at the proxy (0, 1, 2, ...; it goes on counting after ``clear()``).
    seq: int
    #: The proxy client's name (see :meth:`FaultProxy.kubeconfig_for`).
    client: str
    #: The identity the API server saw (impersonated), and the client's User-Agent.
    user: str
    user_agent: str
    method: str
    path: str
    query: str
    verb: str
    resource: str | None
    subresource: str | None
    namespace: str | None
    name: str | None
    #: ``time.monotonic()`` and wall-clock (``time.time()``) when the request arrived.
    started: float
    started_wall: float
    #: The answer's HTTP status: the API server's, or the one the proxy injected; 0 when
    #: there was none (reset, hang, upstream down). With ``action == "drop"`` the API
    #: server answered this but the client never got it.
    status: int = 0
    #: What the proxy did: ``"forward"``, ``"delay"``, ``"respond"``, ``"reset"``, ``"drop"``,
    #: ``"stale"``, ``"hide"``, ``"hang"``, ``"cut"`` (a watch ended by a rule) or
    #: ``"partition"``, joined with ``+`` (``"delay+forward"``).
    action: str = "forward"
    #: Id of the rule that acted, if any.
    rule: int | None = None
    #: ``time.monotonic()`` when the response was complete (a watch: when it ended).
    finished: float | None = None
    #: The apiserver's ``Date`` header (RFC 7231), when it answered.
    api_date: str | None = None
    #: The answer's ``metav1.Status`` reason for errors (``Conflict``, ``NotFound``, ...).
    reason: str | None = None
    #: For a write answered with an object: its ``metadata.resourceVersion`` and uid.
    resource_version: str | None = None
    uid: str | None = None
    #: For a watch: events forwarded, and why it ended (``"server"``, ``"client"``,
    #: ``"cut"``, ``"partition"``, ``"proxy"``).
    events: int = 0
    ended: str | None = None
    #: The resource's API group (``""`` for the core group, as in :class:`RequestInfo`).
    group: str = ""
    #: The request's ``Accept`` header (say, ``as=PartialObjectMetadataList`` for a
    #: metadata-only LIST).
    accept: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def resource_key(self) -> str | None:
        """``plural.group`` as :attr:`kubeloop.Resource.key` spells it (``pods`` for core)."""
        if self.resource is None:
            return None
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def watch(self) -> bool:
        return self.verb == "watch"

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def revision(self) -> int | None:
        """``resource_version`` as etcd's revision (None when absent or not numeric)."""
        try:
            return int(self.resource_version) if self.resource_version else None
        except ValueError:
            return None

    @property
    def api_time(self) -> datetime | None:
        """``api_date`` parsed (one-second resolution, as HTTP dates are)."""
        if not self.api_date:
            return None
        try:
            return email.utils.parsedate_to_datetime(self.api_date)
        except (TypeError, ValueError):
            return None

    def __str__(self) -> str:
        target = "/".join(p for p in (self.namespace, self.name) if p)
        res = self.resource or self.path
        if self.subresource:
            res += f"/{self.subresource}"
        rv = f" rv={self.resource_version}" if self.resource_version else ""
        return (
            f"#{self.seq} {self.client} {self.verb} {res} {target} -> {self.status} "
            f"[{self.action}]{rv}"
        ).replace("  ", " ")


@dataclass(eq=False)
class _Waiter:
    where: Callable[[LogEntry], bool]
    count: int
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[LogEntry]
    seen: int = 0

    def offer(self, entry: LogEntry) -> bool:
        """Count ``entry`` if it matches; True once the waiter is satisfied."""
        if not self.where(entry):
            return False
        self.seen += 1
        if self.seen < self.count:
            return False
        self.loop.call_soon_threadsafe(self._resolve, entry)
        return True

    def _resolve(self, entry: LogEntry) -> None:
        if not self.done.done():
            self.done.set_result(entry)


class FaultLog:
    """Every request the proxy saw, in arrival order. Safe to read from any thread."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._seq = 0
        # re-entrant: a wait_for predicate may itself query the log
        self._lock = threading.RLock()
        self._listeners: list[Callable[[LogEntry], None]] = []
        self._waiters: list[_Waiter] = []

    def add_listener(self, fn: Callable[[LogEntry], None]) -> None:
        """Call ``fn(entry)`` when each request is complete: for an ordinary request after
        the API server answered and *before* the client gets the answer; for a watch
        when it ends. It runs on the proxy's event loop and must not block; it is the
        place for "kill the operator right after its third write is committed"."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[LogEntry], None]) -> None:
        self._listeners.remove(fn)

    async def wait_for(
        self, where: Callable[[LogEntry], bool], *, count: int = 1, timeout: float = 30.0
    ) -> LogEntry:
        """Wait until ``count`` requests matching ``where`` have completed (counting those
        already in the log); returns the ``count``-th. TimeoutError after ``timeout`` s.
        Await it on any event loop (the proxy's own, or the test's for a threaded proxy)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[LogEntry] = loop.create_future()
        waiter = _Waiter(where, count, loop, done)
        with self._lock:
            for entry in self._entries:
                if entry.finished is not None and waiter.offer(entry):
                    break
            else:
                self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await done
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _complete(self, entry: LogEntry) -> None:
        for fn in list(self._listeners):
            try:
                fn(entry)
            except Exception:  # a test's hook must not break the proxy
                _log.exception("fault log listener failed")
        with self._lock:
            self._waiters = [w for w in self._waiters if not w.offer(entry)]

    def _append(self, entry: LogEntry) -> None:
        with self._lock:  # arrival order, never reused (not even after clear())
            entry.seq = self._seq
            self._seq += 1
            self._entries.append(entry)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[LogEntry]:
        with self._lock:
            return iter(list(self._entries))

    def clear(self) -> None:
        """Forget everything so far (e.g. between the set-up and the part under test)."""
        with self._lock:
            self._entries.clear()

    def entries(
        self,
        *,
        client: str | None = None,
        verb: str | Iterable[str] | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        status: int | None = None,
        action: str | None = None,
        where: Callable[[LogEntry], bool] | None = None,
    ) -> list[LogEntry]:
        """Entries matching every given filter (``verb`` may be a set of verbs)."""
        verbs = {verb} if isinstance(verb, str) else set(verb) if verb is not None else None

        def keep(e: LogEntry) -> bool:
            return (
                (client is None or e.client == client)
                and (verbs is None or e.verb in verbs)
                and (resource is None or e.resource == resource)
                and (subresource is None or e.subresource == subresource)
                and (namespace is None or e.namespace == namespace)
                and (name is None or e.name == name)
                and (status is None or e.status == status)
                and (action is None or e.action == action)
                and (where is None or where(e))
            )

        return [e for e in self if keep(e)]

    def writes(
        self,
        *,
        client: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        ok: bool = True,
    ) -> list[LogEntry]:
        """Writes (create, update, patch, delete, deletecollection), by default only
        those the apiserver accepted, in etcd's commit order where it is known (by
        resourceVersion; writes without one keep their arrival order after them)."""
        found = self.entries(
            client=client,
            verb=WRITE_VERBS,
            resource=resource,
            namespace=namespace,
            name=name,
            where=(lambda e: e.ok) if ok else None,
        )
        return sorted(found, key=lambda e: (e.revision is None, e.revision or 0, e.seq))

    def last_write(
        self,
        client: str,
        *,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> LogEntry | None:
        """``client``'s last accepted write (by etcd revision), or None."""
        found = self.writes(client=client, resource=resource, namespace=namespace, name=name)
        writes = [w for w in found if w.revision is not None]
        return writes[-1] if writes else None

    def first_write(
        self,
        client: str,
        *,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> LogEntry | None:
        """``client``'s first accepted write (by etcd revision), or None."""
        found = self.writes(client=client, resource=resource, namespace=namespace, name=name)
        writes = [w for w in found if w.revision is not None]
        return writes[0] if writes else None

    def counts(self, *keys: str) -> Counter[tuple[object, ...]]:
        """How many requests per combination of ``keys`` (default: client, verb, status),
        e.g. ``counts("client", "status")[("op", 429)]``."""
        keys = keys or ("client", "verb", "status")
        unknown = set(keys) - COUNT_KEYS
        if unknown:
            raise ValueError(f"cannot count by {sorted(unknown)}; known: {sorted(COUNT_KEYS)}")
        return Counter(tuple(getattr(e, k) for k in keys) for e in self)

    def dump(self) -> str:
        """The whole log, one line per request (for a failing test's message)."""
        return "\n".join(str(e) for e in self)
