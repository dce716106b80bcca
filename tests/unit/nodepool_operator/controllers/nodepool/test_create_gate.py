"""Refused creates are held back per pool and spec generation, not retried on every pass."""

from __future__ import annotations

import math

from nodepool_operator.cloud import (
    CapacityUnavailable,
    InvalidRequest,
    QuotaExceeded,
    TransientCloudError,
)
from nodepool_operator.controllers.nodepool._create_gate import (
    DEFAULT_QUOTA_WAIT,
    CreateGate,
    class_version,
)
from nodepool_operator.controllers.nodepool._pool_status import cloud_failure


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quota_holds_until_retry_after() -> None:
    clock = Clock()
    gate = CreateGate(clock)
    failure = cloud_failure(QuotaExceeded("full", retry_after=30))
    assert gate.refused("uid", 1, failure) == 30
    assert gate.holding("uid", 1) is failure
    assert gate.holding("other-uid", 1) is None
    assert gate.remaining("uid", 1) == 30
    clock.now += 29
    assert gate.holding("uid", 1) is failure
    clock.now += 1
    assert gate.holding("uid", 1) is None
    assert gate.remaining("uid", 1) is None


def test_quota_without_a_suggestion_holds_the_default() -> None:
    failure = cloud_failure(QuotaExceeded("full", retry_after=0))
    assert CreateGate(Clock()).refused("uid", 1, failure) == DEFAULT_QUOTA_WAIT


def test_an_invalid_request_holds_until_the_spec_changes() -> None:
    gate = CreateGate(Clock())
    assert gate.refused("uid", 3, cloud_failure(InvalidRequest("unknown type"))) == math.inf
    assert gate.holding("uid", 3) is not None
    assert gate.remaining("uid", 3) == math.inf
    assert gate.remaining("uid", 4) is None, "a new generation gets a fresh try"
    assert gate.holding("uid", 3) is None, "and the old one is over"


def test_the_clouds_retry_after_governs_the_next_create() -> None:
    clock = Clock()
    gate = CreateGate(clock)
    assert gate.refused("uid", 1, cloud_failure(CapacityUnavailable("none"))) == 30.0
    assert gate.refused("uid", 1, cloud_failure(CapacityUnavailable("none", retry_after=7))) == 7
    assert gate.holding("uid", 1) is not None
    clock.now += 7
    assert gate.holding("uid", 1) is None
    assert gate.refused("uid", 1, cloud_failure(TransientCloudError("503", retry_after=2))) == 2


def test_errors_without_a_retry_after_are_left_to_the_backoff() -> None:
    gate = CreateGate(Clock())
    gate.refused("uid", 1, cloud_failure(QuotaExceeded("full")))
    assert gate.refused("uid", 1, cloud_failure(TransientCloudError("503"))) is None
    assert gate.holding("uid", 1) is None


def test_forget() -> None:
    gate = CreateGate(Clock())
    gate.refused("uid", 1, cloud_failure(QuotaExceeded("full")))
    gate.forget("uid")
    assert gate.holding("uid", 1) is None


def test_an_invalid_node_class_holds_until_the_class_changes() -> None:
    gate = CreateGate(Clock())
    bad_ami = cloud_failure(InvalidRequest("ami-0 not found", reason="InvalidAMI"))
    assert gate.refused("uid", 3, bad_ami, node_class="c1/1") == math.inf
    assert gate.holding("uid", 3, node_class="c1/1") is bad_ami
    assert gate.holding("uid", 3, node_class="c1/2") is None, "the class was edited"
    assert gate.holding("uid", 3, node_class="c1/1") is None, "and the old hold is over"
    gate.refused("uid", 3, bad_ami, node_class="absent")
    assert gate.holding("uid", 3, node_class="c2/1") is None, "the missing class was made"


def test_a_refused_instance_profile_is_asked_again_after_its_wait() -> None:
    clock = Clock()
    gate = CreateGate(clock)
    err = InvalidRequest("profile p", reason="InvalidInstanceProfile", retry_after=60.0)
    assert gate.refused("uid", 1, cloud_failure(err), node_class="c/1") == 60.0
    clock.now += 59
    assert gate.holding("uid", 1, node_class="c/1") is not None
    clock.now += 1
    assert gate.holding("uid", 1, node_class="c/1") is None


def test_class_version() -> None:
    assert class_version(None) == "absent"
    made = {"metadata": {"name": "c", "uid": "u1", "generation": 2}}
    assert class_version(made) == "u1/2"
