"""JSON patches for the NodePool finalizer: never clobber another writer's finalizers."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers._finalizer import add_patch, has_finalizer, remove_patch

F = "kubeloop.dev/nodepool-cleanup"


def test_add_creates_the_list_guarded_by_the_resource_version() -> None:
    obj = {"metadata": {"name": "p", "resourceVersion": "7"}}
    assert add_patch(obj, F) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/metadata/finalizers", "value": [F]},
    ]


def test_add_appends_to_an_existing_list() -> None:
    obj = {"metadata": {"name": "p", "resourceVersion": "7", "finalizers": ["other"]}}
    assert add_patch(obj, F)[1] == {"op": "add", "path": "/metadata/finalizers/-", "value": F}


def test_remove_tests_the_entry_it_removes() -> None:
    obj = {"metadata": {"name": "p", "finalizers": ["other", F]}}
    assert has_finalizer(obj, F)
    assert remove_patch(obj, F) == [
        {"op": "test", "path": "/metadata/finalizers/1", "value": F},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]


def test_remove_of_an_absent_finalizer_is_a_bug() -> None:
    obj = {"metadata": {"name": "p", "finalizers": ["other"]}}
    assert not has_finalizer(obj, F)
    with pytest.raises(ValueError, match="not in list"):
        remove_patch(obj, F)
