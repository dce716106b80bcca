"""A Node's patchable fields, read once for the patches that compare against them."""

from __future__ import annotations

from nodepool_operator.controllers._node_fields import NodeFields, node_fields
from nodepool_operator.controllers._reserve import RESERVED_KEY, lift_patch, reserved_for


def test_an_absent_list_or_map_reads_as_none_an_empty_one_as_empty() -> None:
    bare = node_fields({"metadata": {"name": "n1"}})
    assert bare == NodeFields("n1")
    empty = node_fields(
        {
            "metadata": {
                "name": "n1",
                "resourceVersion": "7",
                "labels": {},
                "annotations": {},
                "finalizers": [],
            },
            "spec": {"taints": []},
        }
    )
    assert empty == NodeFields("n1", "7", {}, {}, (), ())


def test_taints_are_kept_as_stored_in_their_order() -> None:
    odd = {"key": "x", "effect": "NoSchedule", "timeAdded": None}
    reserved = {"key": RESERVED_KEY, "value": "pool-a1", "effect": "NoSchedule"}
    fields = node_fields({"metadata": {"name": "n1"}, "spec": {"taints": [odd, reserved]}})
    assert fields.taints == (odd, reserved)
    assert fields.taint(RESERVED_KEY) is reserved
    assert fields.taint("missing") is None
    assert reserved_for(fields) == "pool-a1"
    # the guarded removal names the entry where it is stored, as it is stored
    assert lift_patch(fields) == [
        {"op": "test", "path": "/spec/taints/1", "value": reserved},
        {"op": "remove", "path": "/spec/taints/1"},
    ]
