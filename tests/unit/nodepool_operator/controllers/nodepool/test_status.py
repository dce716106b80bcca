"""A NodePool's status from one pass: counts, scaleOperation and conditions."""

from __future__ import annotations

from typing import Any

from nodepool_operator.api import InstanceRecord, InvalidField
from nodepool_operator.cloud import IdempotencyMismatch, InvalidRequest, QuotaExceeded
from nodepool_operator.controllers.nodepool._pool_status import (
    cloud_failure,
    invalid_spec,
    pool_status,
)


def running(*names: str) -> list[InstanceRecord]:
    return [
        InstanceRecord(name=n, instance_id=f"i-{n}", state="running", node_name=n) for n in names
    ]


def status_for(records: list[InstanceRecord], *, desired: int, ready: set[str], **kw: Any) -> Any:
    args: dict[str, Any] = {
        "name": "web",
        "generation": 4,
        "target": desired,
        "desired": desired,
        "min_nodes": 0,
        "records": records,
        "ready": ready,
        "failure": None,
    }
    return pool_status(**{**args, **kw})


def conditions(st: Any) -> dict[str, tuple[str, str, str]]:
    return {t: (s, r, m) for t, s, r, m in st.conditions}


def test_converged_pool() -> None:
    st = status_for(running("a", "b"), desired=2, ready={"a", "b"})
    assert (st.current_nodes, st.ready_nodes, st.scale_operation) == (2, 2, "inactive")
    assert st.selector == "kubeloop.dev/nodepool=web"
    assert conditions(st) == {
        "Ready": ("True", "Converged", "2/2 nodes ready"),
        "Scaling": ("False", "Stable", ""),
        "Degraded": ("False", "CloudHealthy", ""),
        "RepairBlocked": ("False", "WithinThreshold", ""),
        "Expiring": ("False", "NoneExpired", ""),
        "Drifted": ("False", "NoneDrifted", ""),
    }


def test_repair_held_back_is_a_condition() -> None:
    why = "4 of 10 nodes unhealthy (40%) > maxUnhealthyPercent 20%: not replacing a, b, c, d"
    st = status_for(running("a", "b"), desired=2, ready={"a", "b"}, repair_blocked=why)
    assert conditions(st)["RepairBlocked"] == ("True", "TooManyUnhealthy", why)


def test_expiring_nodes_are_a_condition() -> None:
    why = "replacing nodes older than expireAfter 1h0m0s, replacement first: a"
    st = status_for(running("a", "b"), desired=2, ready={"a", "b"}, expiring=why)
    assert conditions(st)["Expiring"] == ("True", "Replacing", why)


def test_provisioning_pool() -> None:
    records = [*running("a"), InstanceRecord(name="b", state="creating")]
    st = status_for(records, desired=2, ready={"a"})
    assert (st.current_nodes, st.ready_nodes, st.scale_operation) == (1, 1, "active")
    assert conditions(st)["Ready"] == ("False", "Provisioning", "1/2 nodes ready")
    assert conditions(st)["Scaling"] == ("True", "ScalingUp", "1 -> 2 nodes")


def test_scaling_down_pool() -> None:
    records = [*running("a"), InstanceRecord(name="b", instance_id="i-b", state="deleting")]
    st = status_for(records, desired=1, ready={"a", "b"})
    assert (st.current_nodes, st.ready_nodes, st.scale_operation) == (1, 1, "active")
    assert conditions(st)["Ready"][1] == "ScalingDown"
    assert conditions(st)["Scaling"][:2] == ("True", "ScalingDown")


def test_a_drain_held_by_a_blocker_is_named_in_ready() -> None:
    records = [*running("a"), InstanceRecord(name="b", instance_id="i-b", state="deleting")]
    held = ["node b: pod prod/x has no controller: evicted, it would not come back"]
    st = status_for(records, desired=1, ready={"a", "b"}, held=held)
    assert conditions(st)["Ready"] == (
        "False",
        "DisruptionBlocked",
        f"1/1 nodes ready; {held[0]}",
    )
    assert conditions(st)["Scaling"][:2] == ("True", "ScalingDown")


def test_clamped_target_is_reported() -> None:
    st = status_for(running("a"), desired=1, ready={"a"}, target=0, min_nodes=1)
    assert conditions(st)["Ready"] == (
        "True",
        "Converged",
        "1/1 nodes ready (targetNodes 0 clamped to minNodes 1)",
    )


def test_cloud_failures_degrade_the_pool() -> None:
    quota = cloud_failure(QuotaExceeded("instance quota of 1 reached"))
    st = status_for(running("a"), desired=3, ready={"a"}, failure=quota)
    assert conditions(st)["Degraded"] == ("True", "QuotaExceeded", "instance quota of 1 reached")
    assert conditions(st)["Ready"][1] == "Provisioning"

    bad_type = cloud_failure(
        InvalidRequest("unknown instance type 'z9'", reason="InvalidInstanceType")
    )
    assert bad_type.reason == "InvalidInstanceType"
    st = status_for([], desired=1, ready=set(), failure=bad_type)
    assert conditions(st)["Ready"] == (
        "False",
        "InvalidSpec",
        "spec.instanceType: unknown instance type 'z9'",
    )
    assert cloud_failure(IdempotencyMismatch("x")).reason == "IdempotencyMismatch"
    # what the cloud refused is the reason, and only the instance type is Ready's InvalidSpec
    bad_ami = cloud_failure(InvalidRequest("ami-0 not found", reason="InvalidAMI"))
    st = status_for([], desired=1, ready=set(), failure=bad_ami)
    assert conditions(st)["Degraded"] == ("True", "InvalidAMI", "ami-0 not found")
    assert conditions(st)["Ready"][1] == "Provisioning"


def test_apply_writes_everything_and_is_stable() -> None:
    st = status_for(running("a"), desired=1, ready={"a"})
    status: dict[str, Any] = {}
    st.apply(status)
    assert status["currentNodes"] == status["readyNodes"] == 1
    assert status["scaleOperation"] == "inactive"
    assert status["observedGeneration"] == 4
    assert status["instances"] == [
        {"name": "a", "instanceId": "i-a", "state": "running", "nodeName": "a"}
    ]
    assert all(c["observedGeneration"] == 4 for c in status["conditions"])
    before = repr(status)
    st.apply(status)  # a second pass that saw the same world changes nothing
    assert repr(status) == before


def test_apply_drops_an_empty_instance_list() -> None:
    status: dict[str, Any] = {"instances": [{"name": "a", "state": "running"}]}
    status_for([], desired=0, ready=set(), dropped=frozenset({"a"})).apply(status)
    assert "instances" not in status
    assert status["scaleOperation"] == "inactive"


def test_apply_merges_by_name_and_keeps_records_another_writer_added() -> None:
    """On a 409 the mutation runs again on the latest status: a record this pass never saw
    survives, one it removed on purpose does not, and its own records win by name."""
    latest: dict[str, Any] = {
        "instances": [
            {"name": "mine", "state": "creating"},
            {"name": "theirs", "instanceId": "i-2", "state": "running"},
            {"name": "retired", "instanceId": "i-3", "state": "deleting"},
        ]
    }
    records = [InstanceRecord(name="mine", instance_id="i-1", state="pending")]
    status_for(records, desired=2, ready=set(), dropped=frozenset({"retired"})).apply(latest)
    assert [(r["name"], r.get("instanceId"), r["state"]) for r in latest["instances"]] == [
        ("mine", "i-1", "pending"),
        ("theirs", "i-2", "running"),
    ]


def test_invalid_spec_names_the_field_and_keeps_the_rest() -> None:
    status: dict[str, Any] = {"currentNodes": 2}
    invalid_spec(5, InvalidField("spec.taints[0].effect", "Unsupported value"))(status)
    assert status["currentNodes"] == 2
    assert status["observedGeneration"] == 5
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "False", "InvalidSpec")
    assert cond["message"] == "spec.taints[0].effect: Unsupported value"
