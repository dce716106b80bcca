"""The cache's read-your-writes table: only for kinds (and namespaces) it watches, and
bounded; scope checks that need no server."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, SECRETS, Client, ClusterConfig
from kubeloop._informer import MAX_PENDING_WRITES, Cache, Informer, OutOfScope
from kubeloop._resource import NODES


def written(name: str, ns: str = "a", rv: str = "10") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}}


def cache(**kwargs: object) -> Cache:
    return Cache(Client(ClusterConfig("https://h"), qps=None), **kwargs)  # type: ignore[arg-type]


def test_writes_of_unwatched_kinds_and_namespaces_are_not_tracked() -> None:
    c = cache()
    c.informer(CONFIGMAPS, namespace="a")
    c.note_write(SECRETS, written("s"))
    c.note_write(CONFIGMAPS, written("cm", ns="b"))
    assert c._expected.get(SECRETS) is None
    assert not c._expected.get(CONFIGMAPS)
    c.note_write(CONFIGMAPS, written("cm"))
    assert c._expected[CONFIGMAPS] == {"a/cm": "10"}


def test_the_table_is_bounded_oldest_first() -> None:
    c = cache()
    c.informer(CONFIGMAPS)  # cluster-wide: every namespace is watched
    for i in range(MAX_PENDING_WRITES + 5):
        c.note_write(CONFIGMAPS, written(f"cm{i}", ns=f"n{i % 7}"))
    table = c._expected[CONFIGMAPS]
    assert len(table) == MAX_PENDING_WRITES
    assert "n0/cm0" not in table
    assert f"n{(MAX_PENDING_WRITES + 4) % 7}/cm{MAX_PENDING_WRITES + 4}" in table


def test_scope_of_a_restricted_cache() -> None:
    c = cache(namespaces=["a", "b"])
    assert c.scope(CONFIGMAPS, None) == ["a", "b"]
    assert c.scope(CONFIGMAPS, "a") == ["a"]
    assert c.scope(NODES, None) == [None], "cluster-scoped kinds are not namespaced"
    with pytest.raises(OutOfScope, match="'c'"):
        c.scope(CONFIGMAPS, "c")
    with pytest.raises(OutOfScope, match="all namespaces"):
        c.informer(CONFIGMAPS)
    single = cache(namespaces=["a"])
    assert single.informer(CONFIGMAPS).reflector.namespace == "a"
    with pytest.raises(ValueError, match="at least one"):
        cache(namespaces=[])


async def test_the_startup_heap_is_frozen_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first informer to start moves the startup heap out of the collector's reach
    (gc.freeze); later ones do not freeze again (what they allocate stays collectable)."""
    import kubeloop._informer as informer_module

    frozen: list[int] = []
    monkeypatch.setattr(informer_module, "_startup_heap_frozen", False)
    monkeypatch.setattr("kubeloop._informer.gc.freeze", lambda: frozen.append(1))
    client = Client(ClusterConfig("https://h"), qps=None)  # stopped before it connects
    informers = [Informer(client, CONFIGMAPS, namespace=ns) for ns in ("a", "b")]
    for inf in informers:
        inf.start()
    for inf in informers:
        await inf.stop()
    assert frozen == [1]
    await client.close()
