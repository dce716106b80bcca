"""owns() and watches() follow for_()'s namespace unless told otherwise."""

from __future__ import annotations

import pytest

from kubeloop import (
    CONFIGMAPS,
    SECRETS,
    Client,
    ClusterConfig,
    KindSource,
    OutOfScope,
    Request,
    Result,
)
from kubeloop._event import Added
from kubeloop._resource import NODES
from kubeloop.testing import new_manager


async def reconcile(req: object) -> Result:
    return Result()


def namespaces(controller: object) -> list[tuple[str, str | None]]:
    return [
        (s.resource.plural, s.namespace)
        for s in controller.sources  # type: ignore[attr-defined]
        if isinstance(s, KindSource)
    ]


def test_children_and_watched_kinds_follow_the_for_namespace() -> None:
    mgr = new_manager(Client(ClusterConfig("https://h"), qps=None))
    c = (
        mgr.controller("c")
        .for_(CONFIGMAPS, namespace="a")
        .owns(SECRETS)
        .watches(SECRETS, lambda o: [])
        .watches(CONFIGMAPS, lambda o: [], namespace=None)  # explicitly all namespaces
        .watches(NODES, lambda o: [])  # cluster-scoped: no namespace
        .complete(reconcile)
    )
    assert namespaces(c) == [
        ("configmaps", "a"),
        ("secrets", "a"),
        ("secrets", "a"),
        ("configmaps", None),
        ("nodes", None),
    ]


def test_a_restricted_manager_rejects_sources_outside_it_when_built() -> None:
    mgr = new_manager(Client(ClusterConfig("https://h"), qps=None), namespaces=["a"])
    builder = mgr.controller("c").for_(CONFIGMAPS)
    with pytest.raises(OutOfScope, match="'b'"):
        builder.owns(SECRETS, namespace="b")
    with pytest.raises(OutOfScope, match="'b'"):
        mgr.controller("d").for_(CONFIGMAPS, namespace="b")


def test_owns_maps_a_child_to_its_owners_own_key_whatever_the_owners_scope() -> None:
    """A namespaced owner is in its child's namespace; a cluster-scoped one in none,
    which is also the key for_() gives its own events (one object, one queue key)."""
    mgr = new_manager(Client(ClusterConfig("https://h")))
    child = {
        "metadata": {
            "name": "c",
            "namespace": "a",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "n1", "controller": True},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "m1", "controller": True},
            ],
        }
    }
    by_kind = {}
    for owner in (NODES, CONFIGMAPS):
        c = mgr.controller(f"of-{owner.plural}").for_(owner).owns(SECRETS).complete(reconcile)
        [own, children] = [s for s in c.sources if isinstance(s, KindSource)]
        by_kind[owner.kind] = list(children.handler(Added(child)))
        assert list(own.handler(Added({"metadata": {"name": "x"}}))) == [Request("x", None)]
    assert by_kind == {"Node": [Request("n1", None)], "ConfigMap": [Request("m1", "a")]}
