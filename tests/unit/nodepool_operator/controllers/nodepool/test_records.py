"""A Node read once into the NodePool controller's typed record."""

from __future__ import annotations

from typing import Any

from nodepool_operator.controllers._reserve import reservation_taint
from nodepool_operator.controllers._unneeded import DRAIN_TIMED_OUT_AT, parse_time
from nodepool_operator.controllers.nodepool.records import decode_node

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"


def node_obj(**parts: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n-1", **parts.get("metadata", {})},
        "spec": {"providerID": "kwok://i-0abc", **parts.get("spec", {})},
        "status": parts.get("status", {}),
    }


def test_a_fresh_node() -> None:
    node = decode_node(node_obj())
    assert (node.name, node.instance_id) == ("n-1", "i-0abc")
    assert not node.ready
    assert not node.deleting
    assert not node.tainted
    assert not node.reserved
    assert node.unhealthy is None  # no conditions reported yet: not since when
    assert node.ready_for(0.0) is None


def test_every_field_the_controller_reads() -> None:
    obj = node_obj(
        metadata={
            "deletionTimestamp": T2,
            "annotations": {DRAIN_TIMED_OUT_AT: T1, "karpenter.sh/do-not-disrupt": "true"},
        },
        spec={
            "taints": [
                {"key": "kubeloop.dev/disrupting", "effect": "NoSchedule", "timeAdded": T1},
                reservation_taint("n-1"),
            ]
        },
        status={
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": T0},
                {"type": "DiskPressure", "status": "True", "lastTransitionTime": T1},
            ]
        },
    )
    node = decode_node(obj, ["DiskPressure"])
    assert node.deleting
    assert node.ready
    assert node.tainted
    assert node.reserved
    assert node.disrupting
    assert not node.scaling_down
    assert node.disrupting_since == parse_time(T1)
    assert node.timed_out_at == parse_time(T1)
    assert node.ready_since == parse_time(T0)
    assert node.unhealthy == (parse_time(T1), "DiskPressure=True")
    assert node.hold != ""
    t0 = parse_time(T0)
    assert t0 is not None
    assert node.ready_for(t0 + 30) == 30.0
    assert node.resting(t0 + 300) == 300.0  # 300 s after it timed out, for RECHECK_SECONDS
    assert node.raw is obj
