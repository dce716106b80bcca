"""The informer's in-memory store: objects by key, plus named indexes."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator

from kubeloop._resource import Object

#: Maps an object to the index values it is filed under (e.g. its owner's name).
IndexFunc = Callable[[Object], Iterable[str]]


def object_key(obj: Object) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def split_key(key: str) -> tuple[str | None, str]:
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


class Store:
    """Objects by key with secondary indexes, kept current by one reflector.

    Readers get the cached dicts themselves; treat them as read-only (copy
    before mutating) so the cache never drifts from the server.
    """

    def __init__(self) -> None:
        self._items: dict[str, Object] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        # index name -> value -> keys
        self._indexes: dict[str, dict[str, set[str]]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        """Iterates over a snapshot of the keys, so the store may change meanwhile."""
        return iter(list(self._items))

    def get(self, key: str) -> Object | None:
        return self._items.get(key)

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def list(self) -> list[Object]:
        return list(self._items.values())

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index; existing objects are indexed at once."""
        if name in self._index_funcs:
            return
        self._index_funcs[name] = fn
        table: dict[str, set[str]] = {}
        for key, obj in self._items.items():
            for value in fn(obj):
                table.setdefault(value, set()).add(key)
        self._indexes[name] = table

    def by_index(self, name: str, value: str) -> builtins.list[Object]:
        keys = self._indexes[name].get(value, ())
        return [self._items[k] for k in keys if k in self._items]

    def put(self, obj: Object) -> Object | None:
        """Insert or replace; returns the previous object."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name, fn in self._index_funcs.items():
            table = self._indexes[name]
            for value in fn(obj):
                table.setdefault(value, set()).add(key)
        return old

    def remove(self, key: str) -> Object | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: Object) -> None:
        for name, fn in self._index_funcs.items():
            table = self._indexes[name]
            for value in fn(obj):
                keys = table.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del table[value]
