"""Offerings the cloud refused stay out for 3 minutes, per type (and zone when named)."""

from __future__ import annotations

from nodepool_operator.cloud import (
    CapacityUnavailable,
    InvalidRequest,
    QuotaExceeded,
    TransientCloudError,
)
from nodepool_operator.controllers.nodepool._offerings import (
    UNAVAILABLE_FOR,
    Offering,
    UnavailableOfferings,
    refused_offering,
)
from tests.unit.nodepool_operator.controllers.nodepool.test_create_gate import Clock


def test_an_offering_is_out_for_three_minutes() -> None:
    clock = Clock()
    cache = UnavailableOfferings(clock)
    assert UNAVAILABLE_FOR == 180.0
    cache.mark(Offering("m5.large"))
    assert cache.unavailable("m5.large")
    assert cache.unavailable("m5.large", "us-east-1a"), "no zone named: out in every zone"
    assert not cache.unavailable("c5.xlarge")
    clock.now += 179
    assert cache.current() == [(Offering("m5.large"), 1.0)]
    clock.now += 1
    assert not cache.unavailable("m5.large")
    assert cache.current() == []


def test_a_zone_named_marks_that_zone_only() -> None:
    clock = Clock()
    cache = UnavailableOfferings(clock)
    cache.mark(Offering("m5.large", "us-east-1a"))
    assert cache.unavailable("m5.large", "us-east-1a")
    assert not cache.unavailable("m5.large", "us-east-1b")
    assert not cache.unavailable("m5.large"), "the type as a whole is not out"


def test_a_later_mark_extends_never_shortens() -> None:
    clock = Clock()
    cache = UnavailableOfferings(clock)
    cache.mark(Offering("m5.large"))
    clock.now += 100
    cache.mark(Offering("m5.large"), seconds=10)
    assert cache.current() == [(Offering("m5.large"), 80.0)]
    cache.mark(Offering("m5.large"))
    assert cache.current() == [(Offering("m5.large"), 180.0)]


def test_only_typed_refusals_naming_a_type_mark_an_offering() -> None:
    assert refused_offering(CapacityUnavailable("x", instance_type="m5.large")) == Offering(
        "m5.large"
    )
    assert refused_offering(
        CapacityUnavailable("x", instance_type="m5.large", zone="us-east-1a")
    ) == Offering("m5.large", "us-east-1a")
    assert refused_offering(QuotaExceeded("x", instance_type="m5.large")) == Offering("m5.large")
    assert refused_offering(CapacityUnavailable("no capacity for m5.large")) is None
    assert refused_offering(QuotaExceeded("account quota")) is None
    assert refused_offering(TransientCloudError("m5.large")) is None
    assert refused_offering(InvalidRequest("m5.large", reason="InvalidInstanceType")) is None


def test_a_spot_refusal_marks_the_spot_market_only() -> None:
    cache = UnavailableOfferings(Clock())
    err = CapacityUnavailable("no spot", instance_type="m5.large", capacity_type="spot")
    offering = refused_offering(err)
    assert offering == Offering("m5.large", "", "spot")
    cache.mark(offering)
    assert cache.unavailable("m5.large", capacity_type="spot")
    assert not cache.unavailable("m5.large"), "on-demand is still open"
    assert not cache.unavailable("m5.large", "us-east-1a", "on-demand")
