"""Telling a controller that it is feeding itself, or fighting another writer.

The seeds' trap: a reconciler writes a field that changes every time (a
timestamp), the write produces an update event, the event triggers a reconcile,
which writes again. Nothing in the spec changed, so ``metadata.generation``
stands still while the object keeps being reconciled.

The detector knows which resourceVersions the controller's own writes produced,
for every object it writes: the ``for_`` object and its children alike. An
update event that carries one of them is self-triggered (for the ``for_`` object
itself only when the generation did not change: a spec change is somebody's
request). So a loop through an owned child (reconcile writes the child, the
child's event maps back to the owner, the owner is reconciled and writes the
child again) is caught too. A reconcile run only because of such events extends
a streak; any outside change ends it. At ``threshold`` the loop is reported once
per streak, naming the fields that kept changing.

The second trap is two writers that disagree: an autoscaler and a GitOps tool
both setting ``spec.replicas``. Each write is an outside change to the other, so
no streak forms, yet the object never settles. The detector reads who owns each
changed spec field from ``metadata.managedFields`` (the reflector passes them
along on update events before stripping them from the cache) and reports a
field whose owner keeps alternating between two field managers, naming both.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Final

from kubeloop._event import Deleted, Event, Updated
from kubeloop._predicate import changed_paths
from kubeloop._reconcile import Request
from kubeloop._resource import Object


@dataclass
class LoopDetectionOptions:
    """When to call it a loop."""

    #: Consecutive self-triggered reconciles of one object (default 5).
    threshold: int = 5
    #: Our own written resourceVersions remembered per object (default 8); also the
    #: most update events of one object kept unclassified between two reconciles.
    remembered_writes: int = 8
    #: Objects whose own writes are remembered (default 10,000; the least recently
    #: written forgotten first): a write whose event never comes (an object nobody
    #: watches) must not be kept for ever.
    remembered_objects: int = 10_000
    #: Changes of owner of one spec field, alternating between two field managers,
    #: before it is reported as a fight (default 4: A, B, A, B).
    fight_threshold: int = 4
    #: Fields whose recent owners are remembered (default 1024; oldest forgotten first).
    remembered_fields: int = 1024


@dataclass
class _Owners:
    """The recent owners of one spec field, newest last."""

    managers: list[str] = field(default_factory=list)
    reported: bool = False


class _Outside:
    """The pending mark of a request that had an outside change since its last reconcile."""

    __slots__ = ()


#: One shared mark: a request with an outside change costs a dict slot, nothing more.
_OUTSIDE: Final = _Outside()

#: What is pending for a request between two reconciles: :data:`_OUTSIDE`, or the
#: fingerprints of update events not yet known to be ours, packed as :data:`_PAIR`
#: (object hash, version hash), 16 bytes each; empty: only events known to be ours.
_Pending = _Outside | bytes
_PAIR: Final = struct.Struct("<qq")

#: Called once per detected loop: (request, the object, the fields that keep changing).
OnLoop = Callable[[Request, Object, list[str]], None]
#: Called once per detected fight: (request, the object, the field, the two managers).
OnFight = Callable[[Request, Object, str, tuple[str, str]], None]

#: (API group, kind, namespace, name): one object, whatever controller it maps to.
ObjectId = tuple[str, str, str, str]


def object_id(obj: Object) -> ObjectId:
    api_version = str(obj.get("apiVersion") or "")
    meta = obj.get("metadata") or {}
    return (
        api_version.rpartition("/")[0],
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _reference(obj: Object) -> Object:
    """Just enough of ``obj`` to name it in a Warning Event (kept for a report only)."""
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "uid", "resourceVersion", "generation")
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in keep if k in meta},
    }


def field_owner(managed_fields: Sequence[Any], path: str) -> str | None:
    """The field manager owning dotted ``path`` (e.g. ``spec.replicas``) in
    ``managedFields``, ignoring the status subresource; the most recent one if several
    share it (list items, or apply managers agreeing on a value)."""
    keys = [f"f:{part}" for part in path.split(".")]
    best: tuple[str, str] | None = None  # (time, manager)
    for entry in managed_fields:
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        node: Any = entry.get("fieldsV1") or {}
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                node = None
                break
            node = node[key]
        if node is None:
            continue
        candidate = (str(entry.get("time") or ""), str(entry.get("manager") or ""))
        if best is None or candidate[0] >= best[0]:
            best = candidate
    return best[1] if best else None


class LoopDetector:
    """Per controller: own writes, self-triggered streaks and spec fights.

    What it keeps is bounded per object and does not depend on reconciles running (a
    standby's workers never start, yet its events keep coming): no event is kept.
    Each event is classified as it is enqueued, into a few integers per request: an
    outside change is one shared mark; an update that may be ours (the write's response
    can reach us after its watch event) is a pair of hashes (the object, its version; 16 bytes),
    at most ``remembered_writes`` of them, checked against our writes when the reconcile
    starts. Our writes are hashes too, at most ``remembered_writes`` per object and
    ``remembered_objects`` objects, dropped when the object is deleted. The fields that
    changed are worked out only for a request one reconcile short of being reported.

    Args:
        options: thresholds and memory bounds.
        on_loop: told once per detected loop.
        on_fight: told once per field fought over. Default: not reported.
        primary_kind: (API group, kind) of the ``for_`` resource; for its objects a
            generation change is never self-triggered. Default: none known, so the
            generation rule applies to every object.
    """

    def __init__(
        self,
        options: LoopDetectionOptions,
        on_loop: OnLoop,
        *,
        on_fight: OnFight | None = None,
        primary_kind: tuple[str, str] | None = None,
    ) -> None:
        self.options = options
        self.on_loop = on_loop
        self.on_fight = on_fight
        self.primary_kind = primary_kind
        # object fingerprint -> fingerprints of the versions our writes produced
        self._own: OrderedDict[int, tuple[int, ...]] = OrderedDict()
        self._pending: dict[Request, _Pending] = {}
        # request -> self-triggered reconciles in a row (reported when it reaches threshold)
        self._streaks: dict[Request, int] = {}
        # request one reconcile short of a report -> (changed fields, the object named)
        self._report: dict[Request, tuple[list[str], Object]] = {}
        self._owners: OrderedDict[tuple[ObjectId, str], _Owners] = OrderedDict()

    # -- our writes ---------------------------------------------------------------------
    def own_write(self, obj: Object) -> None:
        """Record the resourceVersion one of our writes produced (any object)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if not rv:
            return
        oid = hash(object_id(obj))
        seen = self._own.pop(oid, ())
        keep = max(0, self.options.remembered_writes - 1)
        self._own[oid] = (*seen[len(seen) - keep :], hash(str(rv)))
        while len(self._own) > self.options.remembered_objects:
            self._own.popitem(last=False)

    def _is_primary(self, oid: ObjectId) -> bool:
        return self.primary_kind is None or oid[:2] == self.primary_kind

    def _ours(self, oid: int, rv: int) -> bool:
        return rv in self._own.get(oid, ())

    # -- events and reconciles ----------------------------------------------------------
    def enqueued(self, req: Request, event: Event | None) -> None:
        """Note why ``req`` was enqueued (an event, or None for a timer), keeping no event.

        An update whose version our writes are not known to have produced yet is kept as
        two hashes and checked again when the reconcile starts: by then the write that
        produced a self-triggered event has certainly been recorded, even when the watch
        delivered the event before the writer saw the response.
        """
        if event is None:
            return  # timers neither extend nor end a streak
        if isinstance(event, Deleted):
            self._forget_object(object_id(event.obj))
        elif isinstance(event, Updated) and event.managed_fields:
            self._watch_fight(req, event)
        pending = self._pending.get(req, b"")
        if pending is _OUTSIDE:
            return  # already decided: this reconcile is not self-triggered
        if not isinstance(event, Updated):
            self._mark_outside(req)
            return
        oid = object_id(event.new)
        new_meta, old_meta = event.new.get("metadata") or {}, event.old.get("metadata") or {}
        if self._is_primary(oid) and new_meta.get("generation") != old_meta.get("generation"):
            self._mark_outside(req)  # a spec change is somebody's request
            return
        oid_hash, rv_hash = hash(oid), hash(str(new_meta.get("resourceVersion") or ""))
        assert isinstance(pending, bytes)
        if not self._ours(oid_hash, rv_hash):
            if len(pending) >= _PAIR.size * self.options.remembered_writes:
                # too many undecided events between two reconciles: count it as outside
                self._mark_outside(req)
                return
            pending += _PAIR.pack(oid_hash, rv_hash)
        self._pending[req] = pending
        if self._streaks.get(req, 0) == self.options.threshold - 1:
            # the next self-triggered reconcile is reported: say what changed, and where
            fields = changed_paths(event.old, event.new)
            if fields and not self._is_primary(oid):
                fields = [f"{oid[1]} {oid[3]}: {f}" for f in fields]
            before = self._report.get(req)
            self._report[req] = (fields or (before[0] if before else []), _reference(event.new))

    def _mark_outside(self, req: Request) -> None:
        # an outside change ends the streak now; the mark keeps the next reconcile from
        # counting as self-triggered whatever comes after it
        self._pending[req] = _OUTSIDE
        self._streaks.pop(req, None)
        self._report.pop(req, None)

    def starting(self, req: Request) -> bool:
        """Called when a reconcile of ``req`` starts; True if it is self-triggered."""
        pending = self._pending.pop(req, None)
        if pending is None:
            return False  # a timer or a resync: neither extends nor ends a streak
        if not isinstance(pending, bytes) or not all(
            self._ours(oid, rv) for oid, rv in _PAIR.iter_unpack(pending)
        ):
            self._streaks.pop(req, None)  # an outside change ends the streak
            self._report.pop(req, None)
            return False
        count = self._streaks.get(req, 0) + 1
        self._streaks[req] = count
        if count == self.options.threshold:
            report = self._report.pop(req, None)
            fields, obj = report if report is not None else ([], {})
            self.on_loop(req, obj, fields)
        return True

    def forget(self, req: Request, obj: Object | None = None) -> None:
        """Drop what is known about ``req`` (and about ``obj``, its deleted object)."""
        self._pending.pop(req, None)
        self._streaks.pop(req, None)
        self._report.pop(req, None)
        if obj is not None:
            self._forget_object(object_id(obj))

    def _forget_object(self, oid: ObjectId) -> None:
        self._own.pop(hash(oid), None)
        for key in [k for k in self._owners if k[0] == oid]:
            del self._owners[key]

    def footprint(self) -> dict[str, int]:
        """How many entries each table holds (for tests and benchmarks)."""
        return {
            "pending": len(self._pending),
            "own_objects": len(self._own),
            "streaks": len(self._streaks),
            "reports": len(self._report),
            "fields": len(self._owners),
        }

    def tables(self) -> dict[str, Sized]:
        """The tables themselves, by the names :meth:`footprint` counts: what the detector
        holds, for a benchmark that measures their bytes (read-only by contract)."""
        return {
            "pending": self._pending,
            "own_objects": self._own,
            "streaks": self._streaks,
            "reports": self._report,
            "fields": self._owners,
        }

    # -- two writers --------------------------------------------------------------------
    def _watch_fight(self, req: Request, event: Updated) -> None:
        # cheap filter first (this runs for every update event): a spec change bumps
        # the generation, so only then is the spec diffed
        new_gen = event.new.get("metadata", {}).get("generation")
        if new_gen is None or new_gen == event.old.get("metadata", {}).get("generation"):
            return
        paths = changed_paths({"spec": event.old.get("spec")}, {"spec": event.new.get("spec")})
        if not paths:
            return
        oid = object_id(event.new)
        for path in paths:
            owner = field_owner(event.managed_fields, path)
            if owner is None:
                continue
            key = (oid, path)
            owners = self._owners.pop(key, None) or _Owners()
            self._owners[key] = owners  # most recently seen last
            owners.managers.append(owner)
            del owners.managers[: -self.options.fight_threshold]
            while len(self._owners) > self.options.remembered_fields:
                self._owners.popitem(last=False)
            pair = _alternating(owners.managers, self.options.fight_threshold)
            if pair is not None and not owners.reported:
                owners.reported = True
                if self.on_fight is not None:
                    self.on_fight(req, event.new, path, pair)


def _alternating(managers: list[str], n: int) -> tuple[str, str] | None:
    """The two managers if the last ``n`` owners alternate between exactly two."""
    if len(managers) < n:
        return None
    recent = managers[-n:]
    a, b = recent[0], recent[1]
    if a == b:
        return None
    if all(m == (a if i % 2 == 0 else b) for i, m in enumerate(recent)):
        return (a, b) if a < b else (b, a)
    return None
