"""The pure part of the status discipline: deciding that nothing changed.

Everything that talks to the API is tested against the real apiserver in
``tests/integration/test_status.py``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubeloop._client import Client
from kubeloop._metrics import Registry, RuntimeMetrics
from kubeloop._resource import Resource
from kubeloop._status import mutated_status, same, update_status

THINGS = Resource("example.dev", "v1", "things", "Thing")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]}, True),
        ({"a": 1}, {"a": 1.0}, True),  # the server writes a whole float back as an int
        ({"ready": True}, {"ready": 1}, False),  # Python's True == 1 is not JSON's
        ({"ready": False}, {"ready": 0}, False),
        ({"a": None}, {}, False),  # null is a value, not an absence
        ({"a": [1, 2]}, {"a": [2, 1]}, False),
        ({"a": [1]}, {"a": [1, 1]}, False),
        ({"a": {}}, {"a": []}, False),
        ({"a": "1"}, {"a": 1}, False),
    ],
)
def test_same(a: Any, b: Any, expected: bool) -> None:
    assert same(a, b) is expected
    assert same(b, a) is expected


def test_unchanged_status_is_none_and_the_object_is_untouched() -> None:
    obj: dict[str, Any] = {"status": {"phase": "Ready", "conditions": [{"type": "Ready"}]}}

    def ready(status: dict[str, Any]) -> None:
        status["phase"] = "Ready"
        status["conditions"][0]["type"] = "Ready"

    assert mutated_status(obj, ready) is None


def test_changed_status_is_a_copy() -> None:
    obj: dict[str, Any] = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    def flip(status: dict[str, Any]) -> None:
        status["conditions"][0]["status"] = "False"

    new = mutated_status(obj, flip)
    assert new == {"conditions": [{"type": "Ready", "status": "False"}]}
    assert obj["status"]["conditions"][0]["status"] == "True"


def test_the_copy_mutate_edits_shares_nothing_mutable_with_the_object() -> None:
    # deep at every level, a transform's tuple included (copied, not shared)
    inner = {"k": [1, {"x": "y"}]}
    obj: dict[str, Any] = {"status": {"a": inner, "t": ([1],), "n": None, "f": 1.5}}

    def scribble(status: dict[str, Any]) -> None:
        status["a"]["k"][1]["x"] = "z"
        status["a"]["k"].append(2)
        status["t"][0].append(9)

    new = mutated_status(obj, scribble)
    assert new == {"a": {"k": [1, {"x": "z"}, 2]}, "t": ([1, 9],), "n": None, "f": 1.5}
    assert obj["status"] == {"a": {"k": [1, {"x": "y"}]}, "t": ([1],), "n": None, "f": 1.5}


@pytest.mark.parametrize("status", [None, {}], ids=["missing", "empty"])
def test_missing_status_starts_empty(status: dict[str, Any] | None) -> None:
    obj: dict[str, Any] = {} if status is None else {"status": status}
    assert mutated_status(obj, lambda s: None) is None
    assert mutated_status(obj, lambda s: s.update(phase="Pending")) == {"phase": "Pending"}


class _NoRequests:
    """Stands in for the client where sending anything at all is the bug."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call: {name}")


async def test_update_status_sends_nothing_when_unchanged() -> None:
    metrics = RuntimeMetrics(Registry())
    obj: dict[str, Any] = {
        "metadata": {"name": "t", "namespace": "ns", "resourceVersion": "7"},
        "status": {"phase": "Ready"},
    }
    client = cast(Client, _NoRequests())

    result = await update_status(
        client, THINGS, obj, lambda s: s.update(phase="Ready"), controller="c", metrics=metrics
    )
    assert result is obj
    assert metrics.writes_skipped_total.labels("c", THINGS.key, "status").value == 1


async def test_update_status_needs_a_resource_version() -> None:
    client = cast(Client, _NoRequests())
    with pytest.raises(ValueError, match="resourceVersion"):
        await update_status(client, THINGS, {"metadata": {"name": "t"}}, lambda s: None)
