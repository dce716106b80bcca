"""Drift as decision tables: what drifted and why (the launch's record against what a node
would be launched with now), replacement first within the budgets of reason Drifted, after
expired nodes, the Nodes' marks read back from the cluster; the launch hash; the image
resolved once per period."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodepool_operator.api import parse_nodeclass
from nodepool_operator.cloud import Instance, InvalidRequest
from nodepool_operator.controllers.nodepool import decide
from nodepool_operator.controllers.nodepool._drift import Launch, drift_of
from nodepool_operator.controllers.nodepool._images import ImageResolver
from nodepool_operator.controllers.nodepool._launch_record import CLASS_HASH_TAG, class_hash
from nodepool_operator.controllers.nodepool.observe import Observation
from tests.unit.nodepool_operator.controllers.nodepool.tables import (
    NOW,
    SETTINGS,
    node,
    observed,
    pool,
    rec,
    states,
    vm,
)

HOUR = 3600.0
CLASS = {"amiSsmParameter": "/eks/ami", "amiFamily": "AL2023", "tags": {"team": "a"}}
HASH = class_hash(parse_nodeclass({"spec": CLASS}).spec)
NOW_LAUNCH = Launch(HASH, frozenset({"m5.large", "m5.xlarge"}), "ami-new")


def launched(
    name: str,
    *,
    age: float = HOUR,
    image_id: str = "ami-new",
    recorded: str | None = HASH,
    instance_type: str = "m5.large",
) -> Instance:
    """A VM of the pool launched ``age`` ago with this record (None: no record)."""
    tags = {} if recorded is None else {CLASS_HASH_TAG: recorded}
    return replace(
        vm(name, age=age),
        image="resolve:ssm:/eks/ami",
        image_id=image_id,
        tags=tags,
        instance_type=instance_type,
    )


def with_launch(seen: Observation, launch: Launch | None = NOW_LAUNCH) -> Observation:
    return replace(seen, launch=launch)


def reasons(decision: decide.Decision) -> list[str]:
    return [e.reason for e in decision.events]


@pytest.mark.parametrize(
    ("changes", "launch", "reason"),
    [
        ({}, NOW_LAUNCH, None),
        ({"recorded": None, "image_id": "ami-old"}, NOW_LAUNCH, None),  # before the record
        ({"image_id": "ami-old"}, NOW_LAUNCH, "ImageDrift"),
        ({"image_id": "ami-old"}, replace(NOW_LAUNCH, image_id=None), None),  # not resolved
        ({"image_id": ""}, NOW_LAUNCH, None),  # the cloud does not say
        ({"recorded": "v1:0000"}, NOW_LAUNCH, "NodeClassDrift"),
        ({"recorded": "v0:0000"}, NOW_LAUNCH, None),  # another hash version: not compared
        ({"instance_type": "c5.large"}, NOW_LAUNCH, "InstanceTypeDrift"),
        ({"instance_type": "m5.xlarge"}, NOW_LAUNCH, None),  # a fallback type of the pool
        # the image first, then the class, then the type
        ({"image_id": "ami-old", "recorded": "v1:0000"}, NOW_LAUNCH, "ImageDrift"),
        ({"recorded": "v1:0000", "instance_type": "c5.large"}, NOW_LAUNCH, "NodeClassDrift"),
    ],
)
def test_what_drifted_and_why(changes: dict[str, Any], launch: Launch, reason: str | None) -> None:
    found = drift_of(launched("a", **changes), launch)
    assert (found.reason if found else None) == reason


def test_the_launch_hash_covers_what_a_running_node_cannot_follow() -> None:
    def hashed(**changes: Any) -> str:
        return class_hash(parse_nodeclass({"spec": {**CLASS, **changes}}).spec)

    assert hashed() == HASH == hashed(), "stable"
    assert hashed(tags={"team": "b"}) != HASH
    assert hashed(userData="#!/bin/bash\necho hi\n") != HASH
    assert hashed(instanceProfile="nodes") != HASH
    assert hashed(rootVolume={"sizeGiB": 50}) != HASH
    # the AMI is compared as resolved, and a subnet added must not roll every node
    assert hashed(amiSsmParameter="/eks/other") == HASH
    assert hashed(subnetIds=["subnet-0123abcd"]) == HASH
    assert class_hash(None) != HASH


def test_a_drifted_node_is_marked_and_gets_its_replacement_first() -> None:
    records = [rec("a"), rec("b")]
    seen = with_launch(
        observed(
            pool(2, records),
            [node("a"), node("b")],
            [launched("a", image_id="ami-old", age=2 * HOUR), launched("b")],
        )
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.add, decision.retire, decision.taint) == (1, (), ())
    assert sorted(states(decision).values()) == ["creating", "running", "running"]
    assert decision.drift_marks == {"n-a": "ImageDrift"}
    assert reasons(decision) == ["DriftDetected", "ScalingUp", "Drifting"]
    assert decision.drifting.startswith("1 node(s) drifted (n-a: ImageDrift)")
    assert "replacing, replacement first: n-a" in decision.drifting


def test_once_the_replacement_is_ready_the_drifted_node_is_tainted_and_retired() -> None:
    records = [rec("a"), rec("c")]
    seen = with_launch(
        observed(
            pool(1, records),
            [node("a", drifted="ImageDrift"), node("c")],
            [launched("a", image_id="ami-old", age=2 * HOUR), launched("c", age=30)],
        )
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.retire, decision.taint, decision.add) == (("a",), ("n-a",), 0)
    assert states(decision) == {"a": "deleting", "c": "running"}
    # marked already (read back from the Node): no second DriftDetected, no mark written
    assert reasons(decision) == ["Drifted"]
    assert decision.drift_marks == {}


def test_a_replacement_not_ready_yet_keeps_the_drifted_node_serving() -> None:
    records = [rec("a"), rec("c")]
    seen = with_launch(
        observed(
            pool(1, records),
            [node("a", drifted="NodeClassDrift"), node("c", ready=False)],
            [launched("a", recorded="v1:0000"), launched("c", age=30)],
        )
    )
    decision = decide.decide(seen, NOW, SETTINGS)
    assert (decision.add, decision.retire, decision.taint) == (0, (), ())


@pytest.mark.parametrize(
    ("budgets", "tainted", "aside", "held"),
    [
        # expired first (c), then drifted oldest first (a, b); d drifted but young
        ([{"nodes": "1"}], False, ["c"], ["n-a", "n-b", "n-d"]),
        ([{"nodes": "2"}], False, ["c", "a"], ["n-b", "n-d"]),
        ([{"nodes": "2"}], True, ["c"], ["n-a", "n-b", "n-d"]),  # e tainted: counted
        ([{"nodes": "0", "reasons": ["Drifted"]}], False, [], ["n-c", "n-a", "n-b", "n-d"]),
        ([{"nodes": "0", "reasons": ["Empty"]}], False, ["c", "a", "b", "d"], []),  # not ours
    ],
)
def test_drift_after_expiry_within_the_budgets_counted_from_the_cluster(
    budgets: list[dict[str, Any]], tainted: bool, aside: list[str], held: list[str]
) -> None:
    names = ["a", "b", "c", "d", "e"]
    records = [rec(n) for n in names]
    nodes = [node(n, tainted=(n == "e" and tainted)) for n in names]
    vms = [
        launched("a", image_id="ami-old", age=2 * HOUR),
        launched("b", instance_type="c5.large", age=1.5 * HOUR),
        launched("c", age=6 * HOUR),  # not drifted, but expired
        launched("d", recorded="v1:0000", age=60.0),
        launched("e", age=60.0),
    ]
    spec = {"disruption": {"expireAfter": "3h", "budgets": budgets}}
    seen = with_launch(observed(pool(5, records, **spec), nodes, vms))
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.add == len(aside)
    assert decision.taint == ()
    assert list(decision.expiry_held) == held
    assert decision.drifting.startswith("3 node(s) drifted (n-a: ImageDrift, n-b: ")
    for name in aside:
        assert f"n-{name}" in (decision.expiring if name == "c" else decision.drifting)


def test_marks_follow_what_drifted_and_are_read_back_when_the_image_is_unknown() -> None:
    records = [rec("a"), rec("b"), rec("c")]
    nodes = [node("a", drifted="ImageDrift"), node("b", drifted="NodeClassDrift"), node("c")]
    vms = [launched("a", image_id="ami-old"), launched("b"), launched("c")]
    seen = observed(pool(3, records), nodes, vms)
    # b's class was edited back: its mark goes; a stays marked
    decision = decide.decide(with_launch(seen), NOW, SETTINGS)
    assert decision.drift_marks == {"n-b": ""}
    # the image cannot be resolved now (after a restart, SSM refusing): a's mark holds
    unknown = decide.decide(with_launch(seen, replace(NOW_LAUNCH, image_id=None)), NOW, SETTINGS)
    assert unknown.drift_marks == {"n-b": ""}
    assert unknown.add == 1
    assert "n-a: ImageDrift" in unknown.drifting
    # the class unreadable: nothing is judged, no mark touched
    blind = decide.decide(with_launch(seen, None), NOW, SETTINGS)
    assert (blind.drift_marks, blind.add, blind.drifting) == ({}, 0, "")


class Parameters:
    """A cloud whose image resolves to a value set by the test; counts the calls."""

    def __init__(self) -> None:
        self.value = "ami-1"
        self.calls = 0
        self.refuse = False

    async def resolve_image(self, image: str) -> str:
        self.calls += 1
        if self.refuse:
            raise InvalidRequest("throttled")
        return self.value


async def test_an_image_is_resolved_once_per_period_and_when_its_class_changes() -> None:
    cloud = Parameters()
    clock = [NOW]
    images = ImageResolver(cloud, 300.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert await images.current("resolve:ssm:/p", "c/1") == "ami-1"
    cloud.value = "ami-2"
    clock[0] += 299
    assert await images.current("resolve:ssm:/p", "c/1") == "ami-1"  # cached
    assert cloud.calls == 1
    assert images.remaining("resolve:ssm:/p") == pytest.approx(1.0)
    assert await images.current("resolve:ssm:/p", "c/2") == "ami-2"  # the class changed
    assert cloud.calls == 2
    cloud.value, cloud.refuse = "ami-3", True
    clock[0] += 300
    assert await images.current("resolve:ssm:/p", "c/2") == "ami-2"  # refused: the last one
    assert cloud.calls == 3
    cloud.refuse = False
    clock[0] += 300
    assert await images.current("resolve:ssm:/p", "c/2") == "ami-3"


async def test_a_vm_launched_after_the_last_answer_tells_the_newer_image() -> None:
    cloud = Parameters()
    images = ImageResolver(cloud, 300.0, clock=lambda: NOW)  # type: ignore[arg-type]
    assert await images.current("resolve:ssm:/p", "c/1") == "ami-1"
    older = replace(launched("a", age=60), image="resolve:ssm:/p", image_id="ami-0")
    newer = replace(launched("b", age=-5), image="resolve:ssm:/p", image_id="ami-2")
    other = replace(launched("c", age=-9), image="ami-9", image_id="ami-9")
    images.seen("resolve:ssm:/p", [older, newer, other])
    assert await images.current("resolve:ssm:/p", "c/1") == "ami-2"
    assert cloud.calls == 1
