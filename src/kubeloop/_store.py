"""The informer's in-memory store: objects by key, a namespace index, named indexes.

Each object is kept as one ``bytes``: a short header with the few decoded fields the
store itself needs (its resourceVersion and the values it is filed under in each
index), then its compact JSON (msgspec-encoded, managedFields already stripped by the
reflector). Every read decodes a fresh dict.

Why bytes and not the decoded dicts (measured with ``bench/informer_scale.py``'s
``Sample`` objects, ~260 B of JSON each, on the 2-core development machine):

- **Memory.** A decoded API object is a tree of dicts, lists and strings, several
  times its JSON size; its bytes are one flat object. Per cached object (RSS delta
  across the sync, 100,000 objects): ~2.7 KB with dicts, ~0.9 KB with bytes.
- **Reads cannot corrupt the cache.** The stored form is immutable, so a reader
  gets a dict nobody else holds by construction: no separate copy step. One
  decode is also cheaper than the encode-then-decode copy reads paid before
  (1.8 vs 2.3 us for a Sample; 73 vs 95 us for a 3.4 KB Pod).
- **No garbage-collector pauses.** Python's cyclic GC tracks containers: 100,000
  cached dict trees are half a million of them, and each full collection walks all
  of them (with dicts the longest event-loop stall of a 100,000-object sync held
  ~420 ms of CPU). It tracks neither bytes nor strings, nor a dict holding only
  those, so the tables here are exactly that: entries are one ``bytes`` each (not a
  tuple or an instance: a dict of 100,000 tuples is still walked whole, ~30 ms a
  collection), and key sets are dicts of keys (a ``set`` is always tracked). A relist
  notes what changed in a ``bytearray``, not in a table of keys. (The imported
  modules are the rest of a full collection's walk; the informer freezes them once,
  see ``_informer.py``.)

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

A store made for one namespace (``Store(namespace=...)``, a namespaced informer's)
does not index its keys by namespace: they are all of it.

Atomic relists: a :class:`Relist` builds the new tables aside, page by page (the
reflector yields to other tasks in between), and :meth:`Store.commit` swaps them
in with a single assignment, so a reader sees the store before or after the
relist, never a mix.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import struct
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


#: The values an object is filed under, per registered index in registration order.
_Values = tuple[tuple[str, ...], ...]

#: One stored object. Normally one ``bytes``: a header (the lengths of the two fields
#: after it), its resourceVersion, the JSON of its index values (empty without indexes),
#: then its compact JSON. A single bytes object, because the garbage collector tracks
#: neither it nor a dict holding only strings and bytes: the tables of 100,000 objects add
#: nothing to a full collection's walk, whereas a dict holding 100,000 tuples is walked
#: whole each time (about 30 ms). An object msgspec cannot encode is kept as a tuple
#: (private deep copy, resourceVersion, index values) instead.
_Entry = bytes | tuple[Object, str, _Values]
_HEAD: Final = struct.Struct("<II")


def _make(obj: Object, rv: str, values: _Values) -> _Entry:
    try:
        data = _encoder.encode(obj)
    except (TypeError, msgspec.EncodeError):
        return (copy.deepcopy(obj), rv, values)
    rv_bytes = rv.encode()
    vals = _encoder.encode(values) if values else b""
    return b"".join((_HEAD.pack(len(rv_bytes), len(vals)), rv_bytes, vals, data))


def _thaw(entry: _Entry) -> Object:
    if isinstance(entry, bytes):
        rv_len, vals_len = _HEAD.unpack_from(entry)
        start = _HEAD.size + rv_len + vals_len
        thawed: Object = _decoder.decode(memoryview(entry)[start:])
        return thawed
    return copy.deepcopy(entry[0])


def _entry_rv(entry: _Entry) -> str:
    if isinstance(entry, bytes):
        rv_len = _HEAD.unpack_from(entry)[0]
        return entry[_HEAD.size : _HEAD.size + rv_len].decode()
    return entry[1]


def _entry_values(entry: _Entry) -> Sequence[Sequence[str]]:
    if isinstance(entry, bytes):
        rv_len, vals_len = _HEAD.unpack_from(entry)
        if not vals_len:
            return ()
        start = _HEAD.size + rv_len
        values: list[list[str]] = _decoder.decode(memoryview(entry)[start : start + vals_len])
        return values
    return entry[2]


def _with_values(entry: _Entry, values: _Values) -> _Entry:
    """``entry`` filed under ``values`` instead (an index was added)."""
    if isinstance(entry, bytes):
        rv_len, vals_len = _HEAD.unpack_from(entry)
        rv = entry[_HEAD.size : _HEAD.size + rv_len]
        data = memoryview(entry)[_HEAD.size + rv_len + vals_len :]
        vals = _encoder.encode(values) if values else b""
        return b"".join((_HEAD.pack(rv_len, len(vals)), rv, vals, data))
    return (entry[0], entry[1], values)


def version_of(obj: Object) -> str:
    """``obj``'s resourceVersion, ``""`` if it has none (the store's and the reflector's)."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


#: A set of keys, as a dict: unlike a set, a dict of strings is not tracked by the garbage
#: collector (see _Entry), and it keeps insertion order.
_Keys = dict[str, None]


class _Tables:
    """Entries by key and the indexes over them: what a relist builds aside and swaps."""

    __slots__ = ("indexes", "items", "namespaces", "scope")

    def __init__(self, index_names: Iterable[str], scope: str | None = None) -> None:
        self.items: dict[str, _Entry] = {}
        # namespace -> keys: a namespaced read of a cluster-wide informer scans only them.
        # Keys of ``scope`` (the one namespace a namespaced informer sees) are not filed:
        # they are all the keys, and a second 100,000-key table would only cost memory.
        self.scope = scope
        self.namespaces: dict[str, _Keys] = {}
        # index name -> value -> keys
        self.indexes: dict[str, dict[str, _Keys]] = {name: {} for name in index_names}

    def put(self, key: str, entry: _Entry, values: Sequence[Sequence[str]]) -> _Entry | None:
        """Store ``entry`` (filed under ``values``); the entry it replaced, if any."""
        old = self.items.get(key)
        if old is not None:
            self._unindex(key, old)
        self.items[key] = entry
        ns, _ = split_key(key)
        if ns and ns != self.scope:
            self.namespaces.setdefault(ns, {})[key] = None
        for table, vals in zip(self.indexes.values(), values, strict=True):
            for value in vals:
                table.setdefault(value, {})[key] = None
        return old

    def remove(self, key: str) -> _Entry | None:
        old = self.items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def keys(self, namespace: str) -> builtins.list[str]:
        if namespace != self.scope:
            return list(self.namespaces.get(namespace, ()))
        if not self.namespaces:  # every key is of the scope, as the server sends them
            return list(self.items)
        prefix = f"{namespace}/"
        return [k for k in self.items if k.startswith(prefix)]

    def _unindex(self, key: str, entry: _Entry) -> None:
        ns, _ = split_key(key)
        if ns and ns != self.scope:
            _discard(self.namespaces, ns, key)
        if self.indexes:
            for table, vals in zip(self.indexes.values(), _entry_values(entry), strict=True):
                for value in vals:
                    _discard(table, value, key)


def _discard(table: dict[str, _Keys], value: str, key: str) -> None:
    keys = table.get(value)
    if keys is not None:
        keys.pop(key, None)
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

    It also notes, per object in list order, whether it is new or changed against the
    store's content, to announce it after the swap (one byte each, not a table of keys:
    see :class:`Relisted`); only the reflector that owns the store writes to it, so that
    content cannot change meanwhile. It keeps no decoded object: a page's dicts can go as
    soon as they are stored.
    """

    __slots__ = ("_added", "_changed", "_funcs", "_redone", "_store", "_tables")

    def __init__(self, store: Store) -> None:
        self._store = store
        # the indexes as they are now: one added meanwhile is filled in at commit
        self._funcs = tuple(store._index_funcs.values())
        self._tables = _Tables(store._index_funcs, store.namespace)
        # per key of the new content, in its order: 1 if it is new or changed
        self._changed = bytearray()
        # keys listed twice: whether their last version changed (the flag of the first
        # no longer holds); a LIST never repeats a key, so this stays empty
        self._redone: dict[str, bool] = {}
        self._added = 0  # keys the store does not have

    def __len__(self) -> int:
        return len(self._tables.items)

    def put(self, obj: Object) -> None:
        """Add ``obj`` to the new content (a later duplicate of a key wins)."""
        key = object_key(obj)
        rv = version_of(obj)
        values = _values(self._funcs, obj)
        old = self._store._tables.items.get(key)
        changed = old is None or _entry_rv(old) != rv
        if self._tables.put(key, _make(obj, rv, values), values) is None:
            self._changed.append(changed)
            self._added += old is None
        else:
            self._redone[key] = changed


class Relisted:
    """What a committed :class:`Relist` changed, decoded one object at a time as it is
    announced: objects added or changed (with their previous version), and those gone.

    Found by walking the new content beside the relist's flags, and the old content for
    keys the new one lacks: no list of keys is built (100,000 keys in a list are 100,000
    references the garbage collector follows on every full collection while it lives).
    """

    __slots__ = ("_changed", "_gone", "_new", "_next", "_old", "_redone")

    def __init__(self, old: _Tables, new: _Tables, relist: Relist) -> None:
        self._old = old
        self._new = new
        self._changed = relist._changed
        self._redone = relist._redone
        # how many keys of the old content the new one lacks
        self._gone = len(old.items) - (len(new.items) - relist._added)
        self._next = 0  # position in the new content of the first key changes() has not passed

    def _flag(self, position: int, key: str) -> bool:
        redone = self._redone.get(key)
        return bool(self._changed[position]) if redone is None else redone

    def changes(self) -> Iterator[tuple[Object | None, Object] | None]:
        """Per object of the new content, in list order: (previous version or None, new
        object) if it was added or changed, both freshly decoded, the caller's own; None
        if it is unchanged (so a caller can pace a long walk by what it skips, too)."""
        old_items = self._old.items
        for position, (key, entry) in enumerate(self._new.items.items()):
            self._next = position + 1
            if not self._flag(position, key):
                yield None
                continue
            old = old_items.get(key)
            yield (_thaw(old) if old is not None else None), _thaw(entry)

    def gone(self) -> Iterator[Object]:
        """The last known state of each object the relist no longer has."""
        if self._gone <= 0:
            return
        new_items = self._new.items
        for key, entry in self._old.items.items():
            if key not in new_items:
                yield _thaw(entry)

    def pending(self) -> set[str]:
        """Keys whose change :meth:`changes` has not handed out yet."""
        later = itertools.islice(self._new.items, self._next, None)
        return {key for position, key in enumerate(later, self._next) if self._flag(position, key)}


class Store:
    """Objects by key with a namespace index and secondary indexes, kept current by
    one reflector.

    Every read (:meth:`get`, :meth:`list`, :meth:`by_index`, and what :meth:`put`,
    :meth:`remove` and :meth:`replace` return) is a freshly decoded dict the caller
    owns: mutating it never changes the store (see the module docstring).

    ``namespace``: the one namespace the store's objects are in, if its informer watches
    one namespace (an optimization: those keys need no namespace index).
    """

    def __init__(self, *, namespace: str | None = None) -> None:
        self.namespace = namespace
        self._index_funcs: dict[str, IndexFunc] = {}
        self._tables = _Tables((), namespace)

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
        return _entry_rv(entry) if entry is not None else None

    def keys(self, namespace: str | None = None) -> builtins.list[str]:
        """Every key, or those of one namespace (through the namespace index)."""
        t = self._tables
        if namespace is None:
            return list(t.items)
        return t.keys(namespace)

    def list(self, namespace: str | None = None) -> builtins.list[Object]:
        """Every object, or those of one namespace (through the namespace index)."""
        t = self._tables
        if namespace is None:
            return [_thaw(e) for e in t.items.values()]
        return [_thaw(t.items[k]) for k in t.keys(namespace)]

    def list_containing(
        self, namespace: str | None, needles: Sequence[bytes]
    ) -> builtins.list[Object]:
        """Like :meth:`list`, leaving out, before decoding it, every object whose stored
        JSON lacks one of ``needles`` (a prefilter: the caller still tests what it gets)."""
        t = self._tables
        keys = t.items if namespace is None else t.keys(namespace)
        out = []
        for k in keys:
            e = t.items[k]
            if isinstance(e, bytes) and not all(n in e for n in needles):
                continue
            out.append(_thaw(e))
        return out

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index; existing objects are indexed at once."""
        if name in self._index_funcs:
            return
        self._index_funcs[name] = fn
        self._tables = self._reindexed(self._tables)

    def _reindexed(self, old: _Tables) -> _Tables:
        """``old``'s entries filed under every registered index (one was added)."""
        tables = _Tables(self._index_funcs, self.namespace)
        funcs = tuple(self._index_funcs.values())
        for key, entry in old.items.items():
            values = _values(funcs, _thaw(entry))
            tables.put(key, _with_values(entry, values), values)
        return tables

    def index_func(self, name: str) -> IndexFunc:
        return self._index_funcs[name]

    @property
    def indexes(self) -> tuple[str, ...]:
        """The registered index names, in the order added (each object is filed under every
        one of them, so two controllers sharing an informer can check they share indexes)."""
        return tuple(self._index_funcs)

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
        values = _values(tuple(self._index_funcs.values()), obj)
        old = self._tables.put(object_key(obj), _make(obj, version_of(obj), values), values)
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
            new = self._reindexed(new)
        self._tables = new
        return Relisted(old, new, relist)

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
        for change in done.changes():
            if change is None:
                continue
            old, obj = change
            if old is None:
                changes.added.append(obj)
            else:
                changes.updated.append((old, obj))
        changes.deleted = list(done.gone())
        return changes


def _values(funcs: tuple[IndexFunc, ...], obj: Object) -> _Values:
    """The values ``obj`` is filed under, per index; () without indexes (shared)."""
    if not funcs:
        return ()
    return tuple(tuple(fn(obj)) for fn in funcs)
