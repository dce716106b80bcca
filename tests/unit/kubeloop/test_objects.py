"""The pure parts of kubeloop's object helpers: finalizer patches, owner references,
merge patches."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import (
    AlreadyOwnedError,
    controller_of,
    finalizer_add_patch,
    finalizer_remove_patch,
    has_finalizer,
    merge_patch,
    owner_reference,
    set_controller_reference,
    set_owner_reference,
)

F = "example.com/cleanup"


def owner(name: str = "p", kind: str = "Pool", ns: str | None = "a") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "example.com/v1", "kind": kind, "metadata": meta}


def test_finalizer_add_creates_the_list_guarded_by_the_resource_version() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "p", "resourceVersion": "7"}}
    assert finalizer_add_patch(obj, F) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/metadata/finalizers", "value": [F]},
    ]
    obj["metadata"]["finalizers"] = ["other"]
    assert finalizer_add_patch(obj, F)[1] == {
        "op": "add",
        "path": "/metadata/finalizers/-",
        "value": F,
    }


def test_finalizer_remove_tests_the_entry_it_removes() -> None:
    obj = {"metadata": {"name": "p", "finalizers": ["other", F]}}
    assert has_finalizer(obj, F)
    assert finalizer_remove_patch(obj, F) == [
        {"op": "test", "path": "/metadata/finalizers/1", "value": F},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    with pytest.raises(ValueError, match="not in list"):
        finalizer_remove_patch({"metadata": {"finalizers": ["other"]}}, F)


def test_controller_reference_is_set_once_and_refuses_a_second_controller() -> None:
    child: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}}
    set_controller_reference(owner(), child)
    set_controller_reference(owner(), child)  # idempotent
    assert child["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Pool",
            "name": "p",
            "uid": "uid-p",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    with pytest.raises(AlreadyOwnedError, match="already controlled by Pool 'p'"):
        set_controller_reference(owner("q"), child)
    set_owner_reference(owner("q"), child)  # a plain owner is fine
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["p", "q"]
    assert controller_of(child) == child["metadata"]["ownerReferences"][0]
    assert "controller" not in child["metadata"]["ownerReferences"][1]


def test_owner_references_refuse_what_the_garbage_collector_would_ignore() -> None:
    with pytest.raises(ValueError, match="cross-namespace"):
        set_owner_reference(owner(ns="a"), {"metadata": {"name": "c", "namespace": "b"}})
    # a cluster-scoped owner may own namespaced objects
    child: dict[str, Any] = {"metadata": {"name": "c", "namespace": "b"}}
    set_owner_reference(owner(ns=None), child)
    assert child["metadata"]["ownerReferences"][0]["uid"] == "uid-p"
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        owner_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"}})


def test_merge_patch_carries_exactly_the_change() -> None:
    before = {"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}, "keep": [1, 2]}
    after = {"metadata": {"labels": {"a": "1", "c": "3"}}, "data": {"x": "2"}, "keep": [1, 2]}
    assert merge_patch(before, after) == {
        "metadata": {"labels": {"b": None, "c": "3"}},
        "data": {"x": "2"},
    }
    assert merge_patch(before, before) == {}
    assert merge_patch({"l": [1]}, {"l": [1, 2]}) == {"l": [1, 2]}  # lists are replaced
