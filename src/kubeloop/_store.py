"""The informer's in-memory store: objects by key, a namespace index, named indexes.

Each object is kept as its compact JSON (msgspec-encoded bytes, managedFields
already stripped by the reflector) next to the few decoded fields the store itself
needs: its resourceVersion and the values it is filed under in each index. Every
read decodes a fresh dict.

Why bytes and not the decoded dicts (measured with ``bench/informer_scale.py``'s
``Sample`` objects, ~260 B of JSON each, on the 2-core development machine):

- **Memory.** A decoded API object is a tree of dicts, lists and strings, several
  times its JSON size; its bytes are one flat object. Per cached object (RSS delta
  across the sync, 100,000 objects): ~2.7 KB with dicts, ~0.9-1.0 KB with bytes.
- **Reads cannot corrupt the cache.** The stored form is immutable, so a reader
  gets a dict nobody else holds by construction: no separate copy step. One
  decode is also cheaper than the encode-then-decode copy reads paid before
  (1.8 vs 2.3 us for a Sample; 73 vs 95 us for a 3.4 KB Pod).
- **No garbage-collector pauses.** Bytes, strings and tuples of them are not
  tracked by Python's cyclic GC; 100,000 cached dict trees are (half a million
  containers), and each full collection walks all of them: with dicts the
  longest event-loop stall during a 100,000-object sync held ~420 ms of CPU. Entries are
  therefore plain tuples, not instances of a class.

The cost is a decode per read (reads that want only versions or keys use
:meth:`Store.resource_version` and :meth:`Store.keys`, which decode nothing), an
encode per stored version, and a decode of the previous version for each update
event. Alternatives considered: interning the decoded dicts' strings keeps the
dict trees (most of the size, and all of the GC's walk) and still needs a copy
per read; sharing read-only views (``MappingProxyType``) protects only the top
level and breaks callers that modify what they read before writing it back;
msgspec Structs need a schema per kind.

An object msgspec cannot encode (a custom ``transform`` put a non-JSON value in
it) is kept as a private deep copy and deep-copied on every read instead: slower,
equally safe. Round-tripped objects are JSON-typed, like what the API sent (a
tuple a transform added comes back as a list).

Atomic relists: a :class:`Relist` builds the new tables aside, page by page (the
reflector yields to other tasks in between), and :meth:`Store.commit` swaps them
in with a single assignment, so a reader sees the store before or after the
relist, never a mix.
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from kubeloop._resource import Object

#: Maps an object to the index values it is filed under (e.g. its owner's name).
IndexFunc = Callable[[Object], Iterable[str]]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def object_key(obj: Object) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def split_key(key: str) -> tuple[str | None, str]:
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


def copy_object(obj: Object) -> Object:
    """A deep copy of a decoded JSON object, so a reader may mutate it freely.

    A msgspec encode/decode round trip: about 5x faster than :func:`copy.deepcopy`
    for API objects. The copy is JSON-typed, like what the API sent (a tuple a
    custom transform put there comes back as a list); a value msgspec cannot
    encode falls back to deepcopy. (The store needs no copies: see the module
    docstring.)
    """
    try:
        copied: Object = _decoder.decode(_encoder.encode(obj))
    except (TypeError, msgspec.EncodeError):
        return copy.deepcopy(obj)
    return copied


#: One stored object: (its frozen form, its resourceVersion, per registered index in
#: registration order the values it is filed under). The frozen form is compact JSON,
#: or a private deep copy when the object is not JSON-encodable. A plain tuple, not a
#: class: a tuple of strings and bytes is dropped from the garbage collector's
#: tracking, so 100,000 entries add nothing to a full collection's walk.
_Entry = tuple[bytes | Object, str, tuple[tuple[str, ...], ...]]
_DATA: Final = 0
_RV: Final = 1
_VALUES: Final = 2


def _freeze(obj: Object) -> bytes | Object:
    try:
        return _encoder.encode(obj)
    except (TypeError, msgspec.EncodeError):
        return copy.deepcopy(obj)


def _thaw(entry: _Entry) -> Object:
    data = entry[_DATA]
    if isinstance(data, bytes):
        thawed: Object = _decoder.decode(data)
        return thawed
    return copy.deepcopy(data)


def _rv(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Tables:
    """Entries by key and the indexes over them: what a relist builds aside and swaps."""

    __slots__ = ("indexes", "items", "namespaces")

    def __init__(self, index_names: Iterable[str]) -> None:
        self.items: dict[str, _Entry] = {}
        # namespace -> keys: a namespaced read of a cluster-wide informer scans only them
        self.namespaces: dict[str, set[str]] = {}
        # index name -> value -> keys
        self.indexes: dict[str, dict[str, set[str]]] = {name: {} for name in index_names}

    def put(self, key: str, entry: _Entry) -> _Entry | None:
        old = self.items.get(key)
        if old is not None:
            self._unindex(key, old)
        self.items[key] = entry
        ns, _ = split_key(key)
        if ns:
            self.namespaces.setdefault(ns, set()).add(key)
        for table, values in zip(self.indexes.values(), entry[_VALUES], strict=True):
            for value in values:
                table.setdefault(value, set()).add(key)
        return old

    def remove(self, key: str) -> _Entry | None:
        old = self.items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, entry: _Entry) -> None:
        ns, _ = split_key(key)
        if ns:
            _discard(self.namespaces, ns, key)
        for table, values in zip(self.indexes.values(), entry[_VALUES], strict=True):
            for value in values:
                _discard(table, value, key)


def _discard(table: dict[str, set[str]], value: str, key: str) -> None:
    keys = table.get(value)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del table[value]


@dataclass(slots=True)
class Replaced:
    """What :meth:`Store.replace` changed: the events a relist must emit."""

    added: builtins.list[Object] = field(default_factory=builtins.list)
    #: (old, new) pairs whose resourceVersion differs
    updated: builtins.list[tuple[Object, Object]] = field(default_factory=builtins.list)
    deleted: builtins.list[Object] = field(default_factory=builtins.list)


class Relist:
    """A relist under construction (:meth:`Store.relist`): the new content is built
    aside while the store keeps serving the old one; :meth:`Store.commit` swaps it in.

    It also notes which keys are new or changed against the store's content, to
    announce them after the swap; only the reflector that owns the store writes to
    it, so that content cannot change meanwhile. It keeps no decoded object: a
    page's dicts can go as soon as they are stored.
    """

    __slots__ = ("_changed", "_funcs", "_store", "_tables")

    def __init__(self, store: Store) -> None:
        self._store = store
        # the indexes as they are now: one added meanwhile is filled in at commit
        self._funcs = tuple(store._index_funcs.values())
        self._tables = _Tables(store._index_funcs)
        # keys added or changed by this relist, in list order (a dict as an ordered set)
        self._changed: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._tables.items)

    def put(self, obj: Object) -> None:
        """Add ``obj`` to the new content (a later duplicate of a key wins)."""
        key = object_key(obj)
        entry: _Entry = (_freeze(obj), _rv(obj), _values(self._funcs, obj))
        self._tables.put(key, entry)
        old = self._store._tables.items.get(key)
        if old is None or old[_RV] != entry[_RV]:
            self._changed[key] = None
        else:
            self._changed.pop(key, None)


class Relisted:
    """What a committed :class:`Relist` changed, decoded one object at a time as it is
    announced: objects added or changed (with their previous version), and those gone."""

    __slots__ = ("_changed", "_gone", "_new", "_next", "_old")

    def __init__(self, old: _Tables, new: _Tables, changed: Iterable[str], gone: list[str]) -> None:
        self._old = old
        self._new = new
        self._changed = list(changed)
        self._gone = gone
        self._next = 0  # index of the first change not yet taken by changes()

    def __len__(self) -> int:
        return len(self._changed) + len(self._gone)

    def changes(self) -> Iterator[tuple[Object | None, Object]]:
        """(previous version or None, new object) per added or changed object, in list
        order; both freshly decoded, the caller's own."""
        while self._next < len(self._changed):
            key = self._changed[self._next]
            self._next += 1
            old = self._old.items.get(key)
            yield (_thaw(old) if old is not None else None), _thaw(self._new.items[key])

    def gone(self) -> Iterator[Object]:
        """The last known state of each object the relist no longer has."""
        for key in self._gone:
            yield _thaw(self._old.items[key])

    def pending(self) -> set[str]:
        """Keys whose change :meth:`changes` has not handed out yet."""
        return set(self._changed[self._next :])


class Store:
    """Objects by key with a namespace index and secondary indexes, kept current by
    one reflector.

    Every read (:meth:`get`, :meth:`list`, :meth:`by_index`, and what :meth:`put`,
    :meth:`remove` and :meth:`replace` return) is a freshly decoded dict the caller
    owns: mutating it never changes the store (see the module docstring).
    """

    def __init__(self) -> None:
        self._index_funcs: dict[str, IndexFunc] = {}
        self._tables = _Tables(())

    def __len__(self) -> int:
        return len(self._tables.items)

    def __contains__(self, key: str) -> bool:
        return key in self._tables.items

    def __iter__(self) -> Iterator[str]:
        """Iterates over a snapshot of the keys, so the store may change meanwhile."""
        return iter(list(self._tables.items))

    def get(self, key: str) -> Object | None:
        entry = self._tables.items.get(key)
        return _thaw(entry) if entry is not None else None

    def resource_version(self, key: str) -> str | None:
        """The stored object's resourceVersion, without decoding it; None if absent."""
        entry = self._tables.items.get(key)
        return entry[_RV] if entry is not None else None

    def keys(self, namespace: str | None = None) -> builtins.list[str]:
        """Every key, or those of one namespace (through the namespace index)."""
        t = self._tables
        if namespace is None:
            return list(t.items)
        return list(t.namespaces.get(namespace, ()))

    def list(self, namespace: str | None = None) -> builtins.list[Object]:
        """Every object, or those of one namespace (through the namespace index)."""
        t = self._tables
        if namespace is None:
            return [_thaw(e) for e in t.items.values()]
        return [_thaw(t.items[k]) for k in t.namespaces.get(namespace, ())]

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index; existing objects are indexed at once."""
        if name in self._index_funcs:
            return
        self._index_funcs[name] = fn
        old = self._tables
        tables = _Tables(self._index_funcs)
        for key, entry in old.items.items():
            values = (*entry[_VALUES], tuple(fn(_thaw(entry))))
            tables.put(key, (entry[_DATA], entry[_RV], values))
        self._tables = tables

    def index_func(self, name: str) -> IndexFunc:
        return self._index_funcs[name]

    def index_keys(self, name: str, value: str, namespace: str | None = None) -> builtins.list[str]:
        """Keys filed under ``value`` in index ``name``, optionally of one namespace."""
        keys = self._tables.indexes[name].get(value, ())
        if namespace is None:
            return list(keys)
        return [k for k in keys if split_key(k)[0] == namespace]

    def by_index(
        self, name: str, value: str, namespace: str | None = None
    ) -> builtins.list[Object]:
        """Objects filed under ``value`` in index ``name``, optionally of one namespace
        (filtered by key, before anything is decoded)."""
        items = self._tables.items
        return [_thaw(items[k]) for k in self.index_keys(name, value, namespace)]

    def put(self, obj: Object) -> Object | None:
        """Insert or replace; returns the previous object."""
        old = self._tables.put(object_key(obj), self._entry(obj))
        return _thaw(old) if old is not None else None

    def remove(self, key: str) -> Object | None:
        """Remove; returns the object removed."""
        old = self._tables.remove(key)
        return _thaw(old) if old is not None else None

    def discard(self, key: str) -> bool:
        """Remove without decoding what was there; whether there was anything."""
        return self._tables.remove(key) is not None

    def relist(self) -> Relist:
        """Start building a new content aside (see :class:`Relist`)."""
        return Relist(self)

    def commit(self, relist: Relist) -> Relisted:
        """Swap in ``relist``'s content in one step and say what changed.

        The swap is one assignment, so a reader sees the store either before or
        after the relist, never half of each (an object of the new list next to
        one the server already deleted).
        """
        if relist._store is not self:
            raise ValueError("a Relist commits only to the store it was made for")
        old, new = self._tables, relist._tables
        if new.indexes.keys() != self._index_funcs.keys():  # an index added meanwhile
            rebuilt = _Tables(self._index_funcs)
            funcs = tuple(self._index_funcs.values())
            for key, entry in new.items.items():
                values = _values(funcs, _thaw(entry))
                rebuilt.put(key, (entry[_DATA], entry[_RV], values))
            new = rebuilt
        self._tables = new
        gone = [key for key in old.items if key not in new.items]
        return Relisted(old, new, relist._changed, gone)

    def replace(self, objs: Sequence[Object]) -> Replaced:
        """Make ``objs`` the whole content in one step (a relist), and say what changed.

        The synchronous form of :meth:`relist` and :meth:`commit`; the reflector
        uses those to yield to other tasks while a large list is stored.
        """
        relist = self.relist()
        for obj in objs:
            relist.put(obj)
        done = self.commit(relist)
        changes = Replaced()
        for old, obj in done.changes():
            if old is None:
                changes.added.append(obj)
            else:
                changes.updated.append((old, obj))
        changes.deleted = list(done.gone())
        return changes

    def _entry(self, obj: Object) -> _Entry:
        return (_freeze(obj), _rv(obj), _values(tuple(self._index_funcs.values()), obj))


def _values(funcs: tuple[IndexFunc, ...], obj: Object) -> tuple[tuple[str, ...], ...]:
    """The values ``obj`` is filed under, per index; () without indexes (shared)."""
    if not funcs:
        return ()
    return tuple(tuple(fn(obj)) for fn in funcs)
