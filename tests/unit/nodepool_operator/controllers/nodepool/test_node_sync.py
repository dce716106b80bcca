"""Keeping a registered Node's labels, taints and finalizer in line with its pool."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers.nodepool._node_sync import OWNED_ANNOTATION, sync_patch

FIN = "kubeloop.dev/termination"


def _apply(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A small RFC 6902 applier (add/remove/test on objects and list appends)."""
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = out
        for part in parts[:-1]:
            parent = parent[part]
        last = parts[-1]
        if op["op"] == "test":  # kube-apiserver's JSON patch: null tests for "missing"
            assert parent.get(last) == op["value"], "the guard must hold on the object read"
        elif op["op"] == "add":
            if isinstance(parent, list):
                parent.append(op["value"])
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del parent[last]
    return out


def _node(labels: dict[str, str], taints: list[dict[str, str]], **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "resourceVersion": "7", "labels": dict(labels), **meta},
        "spec": {"taints": list(taints)},
    }


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def test_adoption_adds_labels_taints_finalizer_and_remembers_what_it_owns() -> None:
    node = _node({"kubernetes.io/hostname": "n"}, [NOT_READY])
    gpu = {"key": "gpu", "effect": "NoSchedule"}
    ops = sync_patch(node_fields(node), {"team": "a"}, [gpu], finalizers=(FIN,))
    # every whole-value replacement is guarded by the value read; nothing by resourceVersion
    tests = [(o["path"], o["value"]) for o in ops if o["op"] == "test"]
    assert tests == [
        ("/spec/taints", [NOT_READY]),
        ("/metadata/annotations", None),
        ("/metadata/finalizers", None),
    ]
    out = _apply(node, ops)
    assert out["metadata"]["labels"] == {"kubernetes.io/hostname": "n", "team": "a"}
    assert out["spec"]["taints"] == [NOT_READY, gpu], "the lifecycle taint is kept"
    assert out["metadata"]["finalizers"] == [FIN]
    assert OWNED_ANNOTATION in out["metadata"]["annotations"]
    # in line now: nothing more to write
    assert sync_patch(node_fields(out), {"team": "a"}, [gpu], finalizers=(FIN,)) == []


def test_spec_edits_reach_the_node_and_only_owned_keys_are_removed() -> None:
    gpu = {"key": "gpu", "effect": "NoSchedule"}
    node = _apply(
        _node({"kubernetes.io/hostname": "n", "other/team": "x"}, []),
        sync_patch(
            node_fields(_node({"kubernetes.io/hostname": "n", "other/team": "x"}, [])),
            {"team": "a", "tier": "web"},
            [gpu],
        ),
    )
    node["metadata"]["resourceVersion"] = "8"
    node["spec"]["taints"].append(CORDON)  # someone cordons it meanwhile
    dedicated = {"key": "dedicated", "value": "db", "effect": "NoExecute"}
    out = _apply(node, sync_patch(node_fields(node), {"team": "b"}, [dedicated]))
    assert out["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n",
        "other/team": "x",  # never the pool's: left alone
        "team": "b",
    }
    assert out["spec"]["taints"] == [CORDON, dedicated]


def test_a_taint_value_change_is_a_change() -> None:
    node = _node({}, [{"key": "d", "value": "x", "effect": "NoSchedule"}])
    node["metadata"]["annotations"] = {OWNED_ANNOTATION: '{"labels":[],"taints":["d:NoSchedule"]}'}
    out = _apply(
        node,
        sync_patch(node_fields(node), {}, [{"key": "d", "value": "y", "effect": "NoSchedule"}]),
    )
    assert out["spec"]["taints"] == [{"key": "d", "value": "y", "effect": "NoSchedule"}]


def test_label_keys_with_slashes_are_escaped() -> None:
    node = _node({}, [])
    ops = sync_patch(node_fields(node), {"example.com/team": "a"}, [])
    assert {"op": "add", "path": "/metadata/labels/example.com~1team", "value": "a"} in ops


def test_a_heartbeat_does_not_refuse_the_patch_but_a_new_taint_does() -> None:
    """The status (and so the resourceVersion) moving is no reason to refuse; a taint
    someone added after our read is."""
    gpu = {"key": "gpu", "effect": "NoSchedule"}
    read = _node({}, [NOT_READY])
    ops = sync_patch(node_fields(read), {"team": "a"}, [gpu])
    beat = copy.deepcopy(read)
    beat["metadata"]["resourceVersion"] = "9"
    beat["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert _apply(beat, ops)["spec"]["taints"] == [NOT_READY, gpu]
    tainted = copy.deepcopy(read)
    tainted["spec"]["taints"].append(CORDON)
    with pytest.raises(AssertionError, match="the guard must hold"):
        _apply(tainted, ops)
