"""Who wrote an object: a compact summary of ``metadata.managedFields``, so a 409 can
name the writers we are racing.

The apiserver records, per field manager and operation, when it last wrote the
object (``managedFields[].time``, second resolution). Comparing the entries of the
object a write was based on with those of the live object says who changed it
since. The cache strips managedFields (often half an object's size), so the
reflector keeps just this summary per object in a bounded :class:`WriterLog`,
keyed by uid and resourceVersion.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kubeloop._resource import Object


class Writer(NamedTuple):
    """One ``managedFields`` entry without its field set.

    A named tuple, not a dataclass: every write's result and every watch event's
    summary is looked up in the sharing tables below by its writers, and a tuple's
    hash and equality run in C (a frozen dataclass's ``__hash__`` is Python code,
    called per entry per lookup)."""

    manager: str
    operation: str  # Update or Apply
    subresource: str  # "" for the main resource
    time: str  # RFC 3339, as the server wrote it (UTC, so it sorts as text)

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.manager} ({self.operation}{sub} at {self.time})"


Writers = tuple[Writer, ...]

#: Distinct summaries a log shares between its objects at most (see WriterLog), and
#: distinct entries kept for writers_of.
_SHARED = 4096


#: Writer by its four fields: every watch event and write result is summarized, and a
#: cluster has few distinct (manager, operation, subresource, second) entries at a time,
#: so each is built (and its strings interned) once. Bounded like WriterLog's sharing.
_ENTRIES: dict[tuple[str, str, str, str], Writer] = {}


def writers_of(obj: Object) -> Writers | None:
    """The summary of ``obj``'s managedFields; None when it carries none (stripped)."""
    entries = (obj.get("metadata") or {}).get("managedFields")
    if not isinstance(entries, list):
        return None
    out = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        fields = (
            str(e.get("manager") or ""),
            str(e.get("operation") or ""),
            str(e.get("subresource") or ""),
            str(e.get("time") or ""),  # bulk writes share their second
        )
        writer = _ENTRIES.get(fields)
        if writer is None:
            if len(_ENTRIES) >= _SHARED:
                _ENTRIES.clear()
            # few distinct managers: interning keeps a large cache's summaries small
            writer = _ENTRIES[fields] = Writer(*map(sys.intern, fields))
        out.append(writer)
    return tuple(out)


def writers_since(before: Sequence[Writer] | None, after: Iterable[Writer]) -> list[Writer]:
    """The entries of ``after`` that are new or newer than in ``before``, newest first.

    Times have one-second resolution, so a writer that wrote again within the
    second of our read looks unchanged; when nothing is strictly newer, the most
    recent writers of ``after`` are named (one of them did it). With ``before``
    unknown, the same fallback applies.
    """
    later = sorted(after, key=lambda w: w.time, reverse=True)
    if not later:
        return []
    if before is not None:
        seen = {(w.manager, w.operation, w.subresource): w.time for w in before}
        changed = [
            w
            for w in later
            if (t := seen.get((w.manager, w.operation, w.subresource))) is None or w.time > t
        ]
        if changed:
            return changed
    newest = later[0].time
    return [w for w in later if w.time == newest]


class WriterLog:
    """uid -> (resourceVersion, writers) for the objects a client has seen, bounded.

    Holds one entry per object (the latest version seen), at most ``limit``; the
    least recently recorded go first. An informer records every object it stores
    and forgets deleted ones; the client records its writes' results.

    Sized for a large cache: equal summaries are shared (objects written by the
    same managers within the same second, as a bulk create or a rollout makes them,
    have the same one), so 100,000 objects keep a few hundred summaries, not one
    each; the sharing table is bounded and starts over when full, which only costs
    sharing. Versions and summaries are kept in two dicts rather than a tuple per
    object: a dict of strings is not tracked by the garbage collector, and 100,000
    tuples holding summaries would be, lengthening every full collection.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        # uid -> resourceVersion; its order is the recording order (the oldest first).
        # A plain dict keeps insertion order at half an OrderedDict's size per entry.
        self._versions: dict[str, str] = {}
        self._writers: dict[str, Writers] = {}  # uid -> summary, the same keys
        self._shared: dict[Writers, Writers] = {}

    def __len__(self) -> int:
        return len(self._versions)

    def record(self, obj: Object, writers: Writers | None = None) -> None:
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if writers is None:
            writers = writers_of(obj)
        if not uid or not rv or writers is None:
            return
        if len(self._shared) >= _SHARED:
            self._shared.clear()
        writers = self._shared.setdefault(writers, writers)
        self._versions.pop(uid, None)
        self._versions[uid] = str(rv)  # (re)inserted last: the oldest is first
        self._writers[uid] = writers
        while len(self._versions) > self.limit:
            oldest = next(iter(self._versions))
            del self._versions[oldest], self._writers[oldest]

    def refresh(self, obj: Object) -> None:
        """Record ``obj`` only if the log already holds its uid: a write's result
        updates what an informer recorded, but writes of kinds nobody watches (Events,
        Leases) never fill the log. Nothing to do if it holds this very version (the
        watch delivered our write before the client saw the result)."""
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        have = self._versions.get(uid) if uid else None
        if have is not None and have != str(meta.get("resourceVersion") or ""):
            self.record(obj)

    def holds(self, uid: str, rv: str) -> bool:
        """Whether the log already has the summary of ``uid`` at version ``rv``: the watch
        event of our own write, whose result the client recorded (same uid, same version,
        so the same managedFields), needs no second summary."""
        return bool(uid) and self._versions.get(uid) == rv

    def forget(self, obj: Object) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if uid and self._versions.pop(uid, None) is not None:
            del self._writers[uid]

    def at(self, obj: Object) -> Writers | None:
        """The writers of ``obj`` at its own resourceVersion: from the object itself if
        it still has managedFields, else from the log if the log has that version."""
        own = writers_of(obj)
        if own is not None:
            return own
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or ""
        if self._versions.get(uid) == str(meta.get("resourceVersion") or ""):
            return self._writers.get(uid)
        return None
