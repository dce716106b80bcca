"""The store: the namespace index, atomic relists, copies for readers, frozen storage."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kubeloop._client import Client
from kubeloop._config import ClusterConfig
from kubeloop._event import Event
from kubeloop._reflector import Reflector
from kubeloop._resource import CONFIGMAPS
from kubeloop._store import Store, copy_object, object_key
from kubeloop._transport import Response
from tests.unit.kubeloop.test_client import FakeStream, FakeTransport, Reply


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


def pages(objs: list[dict[str, Any]], size: int, rv: str = "9") -> list[Response]:
    """A paged LIST of ``objs``: ``size`` per page, continue tokens in between."""
    out = []
    for start in range(0, len(objs), size):
        last = start + size >= len(objs)
        meta = {"resourceVersion": rv, **({} if last else {"continue": f"c{start}"})}
        body = {"kind": "ConfigMapList", "metadata": meta, "items": objs[start : start + size]}
        out.append(Response(200, {}, json.dumps(body).encode()))
    return out


def reflector_over(store: Store, *replies: Reply, emit: Any = None) -> Reflector:
    transport = FakeTransport(*replies)
    transport._stream = FakeStream(200, [])
    client = Client(ClusterConfig("https://h"), transport=transport, qps=None)
    return Reflector(client, CONFIGMAPS, store, emit or (lambda e: None))


async def test_readers_never_see_a_half_replaced_store() -> None:
    """A relist of 2,000 objects (4 pages) yields to other tasks while it stores them;
    a reader running in between sees the old content or the new, never a mix."""
    old = [cm(f"o{i}") for i in range(1500)]
    new = [cm(f"n{i}") for i in range(2000)]
    store = Store()
    for obj in old:
        store.put(obj)
    reflector = reflector_over(store, *pages(new, 500))
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


def test_no_read_can_change_the_store() -> None:
    """Every read is the caller's own: mutating it (deeply) changes nothing stored."""
    store = Store()
    store.add_index("owner", lambda o: [o["owner"]])
    put = cm("x", owner="p", data={"k": ["v", {"n": 1}]})
    store.put(put)
    put["data"]["k"].append("after put")  # the caller's object is not the stored one
    reads = [
        store.get("a/x"),
        *store.list(),
        *store.list("a"),
        *store.by_index("owner", "p"),
        *store.by_index("owner", "p", namespace="a"),
    ]
    for obj in reads:
        assert obj is not None
        obj["data"]["k"][1]["n"] = 2
        obj["metadata"]["labels"] = {"a": "b"}
    assert len({id(o) for o in reads}) == len(reads), "each read decodes its own"
    assert store.get("a/x") == cm("x", owner="p", data={"k": ["v", {"n": 1}]})
    old = store.put(cm("x", rv="2", owner="p"))
    assert old is not None
    old["owner"] = "q"
    assert store.by_index("owner", "q") == []
    assert store.resource_version("a/x") == "2"
    assert store.resource_version("a/none") is None


def test_an_object_json_cannot_hold_is_kept_as_a_private_copy() -> None:
    class Note:
        def __init__(self) -> None:
            self.items = [1]

    store = Store()
    odd: dict[str, Any] = {"metadata": {"name": "x", "resourceVersion": "1"}, "note": Note()}
    store.put(odd)
    odd["note"].items.append(2)
    read = store.get("x")
    assert read is not None
    assert read["note"].items == [1]
    read["note"].items.append(3)
    again = store.get("x")
    assert again is not None
    assert again["note"].items == [1]


def test_indexes_added_late_or_during_a_relist_cover_everything() -> None:
    store = Store()
    store.put(cm("x", owner="p"))
    store.add_index("owner", lambda o: [o["owner"]])  # existing objects indexed at once
    assert [object_key(o) for o in store.by_index("owner", "p")] == ["a/x"]
    relist = store.relist()
    relist.put(cm("y", owner="q"))
    store.add_index("size", lambda o: [str(o.get("size", 0))])  # while the relist builds
    relist.put(cm("z", owner="q", size=3))
    store.commit(relist)
    assert sorted(object_key(o) for o in store.by_index("owner", "q")) == ["a/y", "a/z"]
    assert [object_key(o) for o in store.by_index("size", "3")] == ["a/z"]
    assert [object_key(o) for o in store.by_index("size", "0")] == ["a/y"]
    assert store.by_index("owner", "p") == []


def test_an_index_name_registered_again_keeps_the_first_function() -> None:
    store = Store()
    store.put(cm("x", owner="p"))
    store.add_index("owner", lambda o: [o["owner"]])
    store.add_index("owner", lambda o: ["other"])
    store.add_index("size", lambda o: [str(o.get("size", 0))])
    assert store.indexes == ("owner", "size")
    assert [object_key(o) for o in store.by_index("owner", "p")] == ["a/x"]
    assert store.by_index("owner", "other") == []


def test_a_handler_subscribing_while_a_relist_is_announced_gets_each_object_once() -> None:
    """A relist is announced in slices after its swap; a handler added in the middle
    gets the objects already announced as a replay and the rest as they come."""
    from kubeloop._informer import Informer

    objs = [cm(f"o{i:04d}") for i in range(1200)]
    transport = FakeTransport(*pages(objs, 500))
    transport._stream = FakeStream(200, [])
    client = Client(ClusterConfig("https://h"), transport=transport, qps=None)
    inf = Informer(client, CONFIGMAPS)
    late: list[str] = []
    first: list[str] = []

    def early(event: Event) -> None:
        first.append(object_key(event.obj))
        if len(first) == 700:  # after at least one slice: some announced, some not
            inf.add_handler(lambda e: late.append(object_key(e.obj)))

    inf.add_handler(early)

    async def run() -> None:
        await inf.reflector._list()

    asyncio.run(run())
    keys = [object_key(o) for o in objs]
    assert first == keys
    assert sorted(late) == keys, "every object once: no gap, no duplicate"


async def test_an_expired_continue_token_restarts_the_relist() -> None:
    """The pages stored before the token expired are void: the store ends with the
    full list's content only, announced once."""
    store = Store()
    store.put(cm("kept"))
    events: list[Event] = []
    first = pages([cm("kept"), cm("stale"), cm("never")], 2)[0]  # a token to go on
    body = {"kind": "Status", "code": 410, "reason": "Expired", "status": "Failure"}
    expired = Response(410, {}, json.dumps(body).encode())
    full = pages([cm("kept"), cm("new", rv="5")], 10, rv="12")[0]
    reflector = reflector_over(store, first, expired, full, emit=events.append)
    await reflector._list()
    assert sorted(store.keys()) == ["a/kept", "a/new"]
    assert [(type(e).__name__, object_key(e.obj)) for e in events] == [("Added", "a/new")]
    assert reflector.resource_version == "12"


def test_relists_report_updates_and_deletions_with_the_previous_state() -> None:
    store = Store()
    store.put(cm("same"))
    store.put(cm("changed", data={"v": "old"}))
    store.put(cm("gone", data={"v": "last"}))
    relist = store.relist()
    relist.put(cm("same"))
    relist.put(cm("changed", rv="2", data={"v": "new"}))
    done = store.commit(relist)
    walked = list(done.changes())
    assert walked[0] is None, "the unchanged object is passed over, in list order"
    changes = [c for c in walked if c is not None]
    assert [(o["data"] if o else None, n["data"]) for o, n in changes] == [
        ({"v": "old"}, {"v": "new"})
    ]
    assert [g["data"] for g in done.gone()] == [{"v": "last"}]
    with pytest.raises(ValueError, match="store it was made for"):
        Store().commit(store.relist())


def test_the_writer_log_shares_equal_summaries() -> None:
    """Objects written by the same manager in the same second keep one summary; each
    still answers for its own uid and version only."""
    from kubeloop._writers import WriterLog

    def written(uid: str, rv: str, time: str) -> dict[str, Any]:
        entry = {"manager": "ctl", "operation": "Update", "time": time, "fieldsV1": {}}
        return {
            "metadata": {"name": uid, "uid": uid, "resourceVersion": rv, "managedFields": [entry]}
        }

    log = WriterLog(limit=3)
    for uid in ("u1", "u2"):
        log.record(written(uid, "5", "2026-12-01T10:00:01Z"))
    log.record(written("u3", "6", "2026-12-01T10:00:02Z"))
    stripped = [
        {"metadata": {"uid": u, "resourceVersion": rv}}
        for u, rv in (("u1", "5"), ("u2", "5"), ("u3", "6"), ("u1", "4"))
    ]
    one, two, three, older = (log.at(o) for o in stripped)
    assert one is not None
    assert one is two
    assert three is not None
    assert three != one
    assert three[0].time == "2026-12-01T10:00:02Z"
    assert older is None, "another version of u1: unknown"
    log.record(written("u4", "7", "2026-12-01T10:00:02Z"))
    assert len(log) == 3
    assert log.at(stripped[0]) is None, "the oldest went first"
    log.forget({"metadata": {"uid": "u2"}})
    assert len(log) == 2
    assert log.at(stripped[1]) is None


def test_the_tables_hold_nothing_the_garbage_collector_tracks() -> None:
    """Entries and the key sets of the namespace index and secondary indexes are bytes,
    strings and dicts of them: a full collection has nothing per object of a large cache
    to walk (see _store.py); only the small tables of namespaces and index values are
    tracked."""
    import gc

    store = Store()
    store.add_index("owner", lambda o: [o.get("owner", "")])
    for i in range(50):
        store.put(cm(f"o{i}", ns=f"n{i % 3}", owner=f"p{i % 4}", data={"k": [i, {"v": "x"}]}))
    relist = store.relist()
    for i in range(50):
        relist.put(cm(f"o{i}", ns=f"n{i % 3}", rv="2", owner="p"))
    store.commit(relist)
    t = store._tables
    containers = [t.items, *t.namespaces.values(), *t.indexes["owner"].values()]
    assert len(containers) == 1 + 3 + 1
    assert [gc.is_tracked(c) for c in containers] == [False] * len(containers)
    assert store.by_index("owner", "p") != []
    assert sorted(k for k in store.keys("n1")) == sorted(f"n1/o{i}" for i in range(1, 50, 3))


def test_a_namespaced_store_lists_its_namespace_without_an_index() -> None:
    store = Store(namespace="a")
    for name in ("x", "y"):
        store.put(cm(name, "a"))
    assert store._tables.namespaces == {}, "the scope's keys are all the keys"
    assert sorted(store.keys("a")) == ["a/x", "a/y"]
    assert [o["metadata"]["name"] for o in store.list("a")] == ["x", "y"]
    # an object of another namespace (a server would not send one) is still kept apart
    store.put(cm("z", "b"))
    assert sorted(store.keys("a")) == ["a/x", "a/y"]
    assert store.keys("b") == ["b/z"]
    store.remove("b/z")
    assert store._tables.namespaces == {}
    assert store.keys("c") == []


def test_stored_entries_keep_versions_and_index_values_through_updates() -> None:
    store = Store()
    store.add_index("owner", lambda o: [o["owner"], f"x-{o['owner']}"])
    store.put(cm("x", rv="7", owner="p"))
    assert store.resource_version("a/x") == "7"
    store.put(cm("x", rv="8", owner="q"))  # re-filed: out of p's entries, into q's
    assert store.resource_version("a/x") == "8"
    assert store.index_keys("owner", "p") == []
    assert store.index_keys("owner", "x-q") == ["a/x"]
    store.add_index("rv", lambda o: [o["metadata"]["resourceVersion"]])  # re-packed
    assert store.index_keys("rv", "8") == ["a/x"]
    assert store.resource_version("a/x") == "8"
    assert store.get("a/x") == cm("x", rv="8", owner="q")
    store.remove("a/x")
    assert store._tables.indexes == {"owner": {}, "rv": {}}


def test_a_key_listed_twice_is_announced_once_as_its_last_version() -> None:
    store = Store()
    store.put(cm("x", rv="1"))
    store.put(cm("y", rv="1"))
    relist = store.relist()
    relist.put(cm("x", rv="2"))
    relist.put(cm("y", rv="1"))
    relist.put(cm("x", rv="1"))  # back to what the store has: unchanged after all
    relist.put(cm("y", rv="3"))  # changed after all
    done = store.commit(relist)
    changes = [c for c in done.changes() if c is not None]
    announced = [(o and o["metadata"]["resourceVersion"], n["metadata"]) for o, n in changes]
    assert [(old, new["name"], new["resourceVersion"]) for old, new in announced] == [
        ("1", "y", "3")
    ]
    assert store.resource_version("a/x") == "1"
    assert store.resource_version("a/y") == "3"
    assert list(done.gone()) == []
