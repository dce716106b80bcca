"""The store: the namespace index, atomic relists, copies for readers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kubeloop._client import Client
from kubeloop._config import ClusterConfig
from kubeloop._reflector import Reflector
from kubeloop._resource import CONFIGMAPS
from kubeloop._store import Store, copy_object, object_key
from kubeloop._transport import Response
from tests.unit.test_client import FakeStream, FakeTransport


def cm(name: str, ns: str = "a", rv: str = "1", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, **extra}


def test_namespace_index_follows_puts_moves_and_removes() -> None:
    store = Store()
    for name, ns in (("x", "a"), ("y", "a"), ("z", "b")):
        store.put(cm(name, ns))
    assert sorted(o["metadata"]["name"] for o in store.list("a")) == ["x", "y"]
    assert [o["metadata"]["name"] for o in store.list("b")] == ["z"]
    assert store.list("c") == []
    store.remove("a/x")
    assert [o["metadata"]["name"] for o in store.list("a")] == ["y"]
    store.remove("a/y")
    assert store._tables.namespaces.keys() == {"b"}, "an emptied namespace leaves the index"
    store.put(cm("z", "b", rv="2"))
    assert [o["metadata"]["resourceVersion"] for o in store.list("b")] == ["2"]


def test_replace_swaps_everything_and_reports_the_changes() -> None:
    store = Store()
    store.add_index("owner", lambda o: [o.get("owner", "")])
    for obj in (cm("keep", owner="p"), cm("change", owner="p"), cm("gone", "b", owner="q")):
        store.put(obj)
    changes = store.replace(
        [cm("keep", owner="p"), cm("change", rv="2", owner="q"), cm("new", "c", owner="q")]
    )
    assert [object_key(o) for o in changes.added] == ["c/new"]
    assert [(object_key(o), n["metadata"]["resourceVersion"]) for o, n in changes.updated] == [
        ("a/change", "2")
    ]
    assert [object_key(o) for o in changes.deleted] == ["b/gone"]
    assert sorted(store.keys()) == ["a/change", "a/keep", "c/new"]
    assert sorted(object_key(o) for o in store.by_index("owner", "q")) == ["a/change", "c/new"]
    assert [object_key(o) for o in store.by_index("owner", "p")] == ["a/keep"]
    assert store.list("b") == []


def test_copy_object_is_deep_and_equal() -> None:
    obj = cm("x", data={"k": ["v", {"n": 1.5, "t": True, "z": None}]})
    copied = copy_object(obj)
    assert copied == obj
    copied["data"]["k"][1]["n"] = 2
    copied["metadata"]["labels"] = {"a": "b"}
    assert obj["data"]["k"][1]["n"] == 1.5
    assert "labels" not in obj["metadata"]

    class Note:
        def __init__(self) -> None:
            self.items = [1]

    odd = {"metadata": {"name": "x"}, "note": Note()}  # not JSON at all: deepcopy
    odd_copy = copy_object(odd)
    assert odd_copy["note"] is not odd["note"]
    assert odd_copy["note"].items == [1]


async def test_readers_never_see_a_half_replaced_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """A relist of 2,000 objects yields to other tasks while it transforms them;
    a reader running in between sees the old content or the new, never a mix."""
    old = [cm(f"o{i}") for i in range(1500)]
    new = [cm(f"n{i}") for i in range(2000)]
    body = {"kind": "ConfigMapList", "metadata": {"resourceVersion": "9"}, "items": new}
    transport = FakeTransport(Response(200, {}, json.dumps(body).encode()))
    transport._stream = FakeStream(200, [])
    client = Client(ClusterConfig("https://h"), transport=transport, qps=None)
    store = Store()
    for obj in old:
        store.put(obj)
    reflector = Reflector(client, CONFIGMAPS, store, lambda e: None)
    old_keys = {object_key(o) for o in old}
    new_keys = {object_key(o) for o in new}
    seen: list[str] = []

    async def reader() -> None:
        while True:
            keys = set(store.keys())
            seen.append("old" if keys == old_keys else "new" if keys == new_keys else "mixed")
            await asyncio.sleep(0)

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)
    await reflector._list()
    await asyncio.sleep(0)
    task.cancel()
    assert "mixed" not in seen
    assert seen[0] == "old"
    assert seen[-1] == "new"
    assert seen.count("old") >= 3, "the reader ran while the relist was under way"
