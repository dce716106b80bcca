"""An ``events.k8s.io/v1`` event recorder that aggregates repeats instead of spamming.

Recording is synchronous and never waits for the API: a reconcile calls
:meth:`EventRecorder.warning` and moves on, and one background task does the
writes. The first occurrence of an event creates an Event object; identical
repeats only bump a counter in memory, written back as the Event's ``series``
at most once per ``series_interval``. A controller stuck on one error therefore
costs one Event and a PATCH every 30 s, not one Event per retry.

Events are best-effort: a failed write is logged and forgotten, never raised to
the caller and never retried in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import socket
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Literal, Self

from kubeloop._client import Client, PatchType
from kubeloop._errors import KubeloopError, NotFound
from kubeloop._resource import EVENTS, Object

log = logging.getLogger("kubeloop.recorder")

EventType = Literal["Normal", "Warning"]

# Field limits enforced by the API server's Event validation.
_REASON_MAX: Final = 128
_ACTION_MAX: Final = 128
_NOTE_MAX_BYTES: Final = 1024
_INSTANCE_MAX: Final = 128
# Room for ".<16 hex>" inside a 253-character DNS subdomain.
_NAME_BASE_MAX: Final = 253 - 17
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_QUALIFIED_NAME: Final = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
)
# Expired entries are swept at most this often (seconds); a sweep scans them all.
_PRUNE_EVERY: Final = 60.0

#: regarding (uid, kind, name, namespace), related uid, type, reason, action, the
#: caller's aggregate_by: no note
_Key = tuple[str, str, str, str, str, str, str, str, str]


def micro_time(when: datetime) -> str:
    """``metav1.MicroTime`` as the API serialises it: ``2024-01-02T03:04:05.123456Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_reference(obj: Object) -> dict[str, str]:
    """A ``v1.ObjectReference`` to ``obj`` (empty fields left out)."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: str(v) for k, v in ref.items() if v}


def _event_name_base(name: str) -> str:
    # Events must have DNS-subdomain names; a few kinds allow others ("system:foo").
    base = name[:_NAME_BASE_MAX].rstrip(".-")
    if _DNS_SUBDOMAIN.fullmatch(base):
        return base
    return re.sub(r"[^a-z0-9]+", "-", name.lower())[:_NAME_BASE_MAX].strip("-") or "event"


def _truncate_bytes(text: str, limit: int) -> str:
    # The limit is on UTF-8 bytes; cutting bytes may split a character, so drop the tail.
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


@dataclass(eq=False, slots=True)
class _Series:
    """One distinct event and its repeats. Identity-hashed: lives in a set."""

    key: _Key
    body: Object  # the Event to create, without ``series``
    namespace: str
    started: float  # monotonic time of the first occurrence, for expiry
    last_observed: datetime
    count: int = 1  # occurrences seen
    written: int = 0  # occurrences the server knows of
    created: bool = False
    last_write: float = 0.0  # monotonic time of the last create or PATCH

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    def series(self) -> dict[str, Any]:
        return {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}


class EventRecorder:
    """Records ``events.k8s.io/v1`` Events about objects, aggregating repeats.

    Call :meth:`start` inside the event loop before recording, and
    ``await close()`` on shutdown to write what is still pending (or use
    ``async with``). Events recorded before :meth:`start` wait for it; events
    recorded after :meth:`close` are dropped.

    Two occurrences are the same event when they agree on the regarding object
    (uid, kind, name, namespace), the related object, type, reason and action;
    the note is left out of the key, as client-go's ``events`` broadcaster does, so
    a failure whose message carries changing details (a count, a timestamp, a
    resourceVersion) still costs one Event with a growing ``series.count``. The
    Event keeps the note of its first occurrence (the API does not let a note
    change). A caller whose notes are distinct findings passes ``aggregate_by``.

    Counters for tests and debugging: :attr:`created` (Events created),
    :attr:`series_updates` (series PATCHes), :attr:`dropped` (occurrences never
    sent: queue full, recorder closed, or an invalid type), :attr:`failed`
    (writes the API rejected or that did not reach it).

    Args:
        client: the API client; needs ``create`` and ``patch`` on
            ``events.events.k8s.io`` in the objects' namespaces (and ``default``).
        reporting_controller: the Event's ``reportingController``, a qualified
            name such as ``kubeloop.dev/nodepool``. Required.
        reporting_instance: the Event's ``reportingInstance``: which replica
            reported it. Default: this host's name (the pod name in a cluster).
        series_interval: seconds between two writes of one event's repeats.
            Default 30.0.
        expiry: seconds after its first occurrence that an event stops
            aggregating; a later repeat creates a new Event. Default 1800.0
            (30 minutes; the API server deletes Events after 1 hour by default).
        max_pending: Events waiting to be created before new ones are dropped,
            so a stalled API cannot grow memory without bound. Default 1000
            (client-go's limit).
    """

    def __init__(
        self,
        client: Client,
        *,
        reporting_controller: str,
        reporting_instance: str | None = None,
        series_interval: float = 30.0,
        expiry: float = 1800.0,
        max_pending: int = 1000,
    ) -> None:
        if not _QUALIFIED_NAME.fullmatch(reporting_controller):
            raise ValueError(
                f"invalid reporting_controller {reporting_controller!r}: want a qualified "
                "name such as 'example.com/my-controller'"
            )
        if series_interval < 0 or expiry <= 0 or max_pending < 1:
            raise ValueError("need series_interval >= 0, expiry > 0 and max_pending >= 1")
        self._client = client
        self.reporting_controller = reporting_controller
        instance = reporting_instance or socket.gethostname() or "unknown"
        self.reporting_instance = instance[:_INSTANCE_MAX]
        self._interval = series_interval
        self._expiry = expiry
        self._max_pending = max_pending

        self._series: dict[_Key, _Series] = {}
        self._pending: deque[_Series] = deque()
        self._dirty: set[_Series] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_prune = time.monotonic()
        self._warned_full = False

        self.created = 0
        self.series_updates = 0
        self.dropped = 0
        self.failed = 0

    # -- recording (synchronous, never blocks) -----------------------------------------

    def normal(
        self, obj: Object, reason: str, note: str, *, action: str = "", aggregate_by: str = ""
    ) -> None:
        """Record a ``Normal`` event; see :meth:`event`."""
        self.event(obj, "Normal", reason, note, action=action, aggregate_by=aggregate_by)

    def warning(
        self, obj: Object, reason: str, note: str, *, action: str = "", aggregate_by: str = ""
    ) -> None:
        """Record a ``Warning`` event; see :meth:`event`."""
        self.event(obj, "Warning", reason, note, action=action, aggregate_by=aggregate_by)

    def event(
        self,
        obj: Object,
        type: EventType,
        reason: str,
        note: str,
        *,
        action: str = "",
        related: Object | None = None,
        aggregate_by: str = "",
    ) -> None:
        """Record that ``reason`` happened to ``obj``. Returns at once; never raises
        for API trouble.

        Args:
            obj: the object the event is about (its ``regarding``).
            type: ``"Normal"`` or ``"Warning"``; anything else is logged and dropped.
            reason: why, in UpperCamelCase (``ScaleUpFailed``); cut to 128 characters.
            note: a human-readable description; cut to 1024 bytes.
            action: what was being done (``Reconcile``, ``Provision``); cut to 128
                characters. Default ``""``: the reason is used, since the API
                requires an action.
            related: a second object involved, if any. Default ``None``.
            aggregate_by: occurrences that differ here are separate Events even when
                everything else in the key matches: for a caller whose notes are
                distinct findings rather than one failure's changing details (pass the
                note itself to get one Event per distinct note). Default ``""``.
        """
        if type not in ("Normal", "Warning"):
            log.error("dropping event %s with unsupported type %r", reason, type)
            self.dropped += 1
            return
        if self._closed:
            self.dropped += 1
            return
        reason = reason[:_REASON_MAX]
        action = (action or reason)[:_ACTION_MAX]
        note = _truncate_bytes(note, _NOTE_MAX_BYTES)
        regarding = object_reference(obj)
        key: _Key = (
            regarding.get("uid", ""),
            regarding.get("kind", ""),
            regarding.get("name", ""),
            regarding.get("namespace", ""),
            object_reference(related).get("uid", "") if related is not None else "",
            type,
            reason,
            action,
            aggregate_by,
        )
        now = time.monotonic()
        wall = datetime.now(UTC)

        entry = self._series.get(key)
        if entry is not None and now - entry.started < self._expiry:
            entry.count += 1
            entry.last_observed = wall
            # Not yet created: the create will carry the count. Already dirty: the
            # worker's deadline for it stands, no need to wake it.
            if entry.created and entry not in self._dirty:
                self._dirty.add(entry)
                self._wake.set()
            return

        if len(self._pending) >= self._max_pending:
            self.dropped += 1
            if not self._warned_full:
                self._warned_full = True
                log.warning("event queue full (%d); dropping new events", self._max_pending)
            return
        self._warned_full = False

        # Cluster-scoped objects have no namespace; their Events live in "default".
        namespace = regarding.get("namespace") or "default"
        body: Object = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {
                "name": f"{_event_name_base(regarding.get('name', ''))}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "eventTime": micro_time(wall),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "type": type,
            "note": note,
            "regarding": regarding,
        }
        if related is not None:
            body["related"] = object_reference(related)
        entry = _Series(key, body, namespace, now, wall)
        self._series[key] = entry
        self._pending.append(entry)
        self._wake.set()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task. Call from inside the running event loop; idempotent."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name="kubeloop-event-recorder")

    async def close(self, *, flush: bool = True) -> None:
        """Stop recording, then create pending Events and write every unwritten
        series count before returning. Idempotent.

        ``flush=False`` drops what is pending instead (counted in :attr:`dropped`):
        for a process that must stop writing at once, such as a leader that lost its
        lease.
        """
        self._closed = True
        if not flush:
            self.dropped += len(self._pending) + len(self._dirty)
            self._pending.clear()
            self._dirty.clear()
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                self._task = None
            return
        self._wake.set()
        if self._task is None:
            await self._run()  # never started: drain inline
        else:
            await self._task

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the writer task ------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            while self._pending:
                await self._create(self._pending.popleft())
            await self._flush(force=self._closed)
            self._prune()
            # No await between clear() and wait(): an event() after this point sets it again.
            self._wake.clear()
            if self._pending:
                continue
            if self._closed:
                if not self._dirty:
                    return
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._next_flush()):
                    await self._wake.wait()

    def _next_flush(self) -> float | None:
        """Seconds until the earliest dirty series may be written, or None."""
        if not self._dirty:
            return None
        earliest = min(entry.last_write for entry in self._dirty) + self._interval
        return max(0.0, earliest - time.monotonic())

    async def _create(self, entry: _Series) -> None:
        body = entry.body
        if entry.count > 1:
            # Repeats arrived before the create: send them with it, saving a PATCH.
            body = {**body, "series": entry.series()}
        sent = entry.count
        try:
            await self._client.create(EVENTS, body, entry.namespace)
        except Exception as err:
            self.failed += 1
            self._forget(entry)
            log.warning(
                "could not create event %s/%s (%s): %s",
                entry.namespace,
                entry.name,
                entry.body["reason"],
                err,
                # API and connection errors are expected; anything else is a bug.
                exc_info=not isinstance(err, KubeloopError),
            )
            return
        self.created += 1
        entry.created = True
        entry.written = sent
        entry.last_write = time.monotonic()
        if entry.count > entry.written:
            self._dirty.add(entry)

    async def _flush(self, *, force: bool) -> None:
        now = time.monotonic()
        due = [e for e in self._dirty if force or now - e.last_write >= self._interval]
        for entry in due:
            self._dirty.discard(entry)
            await self._patch(entry)

    async def _patch(self, entry: _Series) -> None:
        series = entry.series()
        try:
            await self._client.patch(
                EVENTS,
                entry.name,
                {"series": series},
                entry.namespace,
                patch_type=PatchType.MERGE,
            )
        except NotFound:
            # Deleted (TTL, or by hand): the next repeat starts a new Event.
            self._forget(entry)
            return
        except Exception as err:
            self.failed += 1
            # Not retried: the next repeat marks the series dirty again, and its
            # write carries the full count.
            entry.last_write = time.monotonic()
            log.warning("could not update event %s/%s: %s", entry.namespace, entry.name, err)
            return
        self.series_updates += 1
        entry.written = series["count"]
        entry.last_write = time.monotonic()
        if entry.count > entry.written:
            self._dirty.add(entry)

    def _forget(self, entry: _Series) -> None:
        self._dirty.discard(entry)
        # The key may already belong to a newer Event (this one expired meanwhile).
        if self._series.get(entry.key) is entry:
            del self._series[entry.key]

    def _prune(self) -> None:
        """Drop expired series that have nothing left to write."""
        now = time.monotonic()
        if now - self._last_prune < _PRUNE_EVERY:
            return
        self._last_prune = now
        expired = [
            key
            for key, entry in self._series.items()
            if now - entry.started >= self._expiry and entry.created and entry not in self._dirty
        ]
        for key in expired:
            del self._series[key]
