"""Rate limiters and retry schedules: the numbers client-go would produce."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from kubeloop._backoff import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRY,
    Backoff,
    BucketRateLimiter,
    ItemExponentialBackoff,
    MaxOf,
    default_controller_rate_limiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_item_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff()
    delays = [limiter.when("a") for _ in range(25)]
    assert delays[:5] == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    for earlier, later in itertools.pairwise(delays):
        assert later == pytest.approx(min(earlier * 2, 1000.0))
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0
    assert limiter.retries("a") == 25


def test_item_exponential_never_overflows() -> None:
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff(base=1.0, cap=5.0)
    for _ in range(5000):
        limiter.when("a")
    assert limiter.when("a") == 5.0


def test_item_exponential_is_per_item_and_reset_by_forget() -> None:
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff(base=1.0, cap=100.0)
    assert [limiter.when("a") for _ in range(3)] == [1.0, 2.0, 4.0]
    assert limiter.when("b") == 1.0
    limiter.forget("a")
    assert limiter.retries("a") == 0
    assert limiter.when("a") == 1.0
    assert limiter.retries("b") == 1
    limiter.forget("never-seen")  # harmless


def test_item_exponential_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError, match="base"):
        ItemExponentialBackoff(base=0)
    with pytest.raises(ValueError, match="base"):
        ItemExponentialBackoff(base=2.0, cap=1.0)


def test_bucket_allows_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=1, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    # Reservations queue up behind each other.
    assert bucket.when(3) == pytest.approx(1.0)
    assert bucket.when(4) == pytest.approx(2.0)
    clock.now += 2.0
    assert bucket.when(5) == pytest.approx(1.0)
    # A long idle period refills the bucket, but never beyond the burst.
    clock.now += 3600
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when(3) == pytest.approx(1.0)
    assert bucket.retries(3) == 0
    bucket.forget(3)


def test_bucket_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="qps"):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError, match="burst"):
        BucketRateLimiter(burst=0)


def test_max_of_takes_longest_and_every_limiter_records() -> None:
    a: ItemExponentialBackoff[str] = ItemExponentialBackoff(base=1.0, cap=100.0)
    b: ItemExponentialBackoff[str] = ItemExponentialBackoff(base=3.0, cap=4.0)
    limiter = MaxOf(a, b)
    assert [limiter.when("x") for _ in range(4)] == [3.0, 4.0, 4.0, 8.0]
    assert a.retries("x") == b.retries("x") == limiter.retries("x") == 4
    limiter.forget("x")
    assert a.retries("x") == b.retries("x") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOf[str]()


def test_default_controller_rate_limiter_is_per_item_and_overall() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    # 100 distinct items fit in the burst: each gets its per-item first step.
    assert [limiter.when(i) for i in range(100)] == pytest.approx([0.005] * 100)
    # The 101st waits for the bucket at 10 qps.
    assert limiter.when(100) == pytest.approx(0.1)
    # Per item backoff still applies.
    clock.now += 3600
    assert limiter.when(0) == pytest.approx(0.010)
    assert limiter.retries(0) == 2


def test_default_retry_matches_client_go() -> None:
    retry = dataclasses.replace(DEFAULT_RETRY, random=lambda: 0.0)
    assert list(retry.delays()) == pytest.approx([0.010] * 4)  # 5 attempts
    most = dataclasses.replace(DEFAULT_RETRY, random=lambda: 1.0)
    assert list(most.delays()) == pytest.approx([0.011] * 4)


def test_default_backoff_matches_client_go() -> None:
    backoff = dataclasses.replace(DEFAULT_BACKOFF, random=lambda: 0.0)
    assert list(backoff.delays()) == pytest.approx([0.010, 0.050, 0.250])  # 4 attempts


def test_jitter_is_duration_times_one_plus_random_times_jitter() -> None:
    backoff = Backoff(duration=2.0, factor=1.0, jitter=0.5, steps=3, random=lambda: 0.5)
    assert list(backoff.delays()) == pytest.approx([2.5, 2.5])


def test_jitter_uses_real_randomness_within_bounds() -> None:
    delays = list(Backoff(duration=1.0, jitter=0.1, steps=50).delays())
    assert len(delays) == 49
    assert all(1.0 <= d <= 1.1 for d in delays)


def test_cap_stops_growth() -> None:
    backoff = Backoff(duration=1.0, factor=2.0, steps=6, cap=5.0)
    assert list(backoff.delays()) == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_single_step_has_no_pause_and_bad_values_are_rejected() -> None:
    assert list(Backoff(steps=1).delays()) == []
    with pytest.raises(ValueError, match="steps"):
        Backoff(steps=0)
    with pytest.raises(ValueError, match="negative"):
        Backoff(duration=-1.0)


def test_delays_restart_for_each_iteration() -> None:
    backoff = Backoff(duration=1.0, factor=3.0, steps=3)
    assert list(backoff.delays()) == list(backoff.delays()) == [1.0, 3.0]


def test_retry_after_pause_is_the_longer_of_floor_and_server_capped() -> None:
    from kubeloop._backoff import MAX_RETRY_AFTER, retry_after_pause

    zero = lambda: 0.0  # noqa: E731
    assert retry_after_pause(None, 0.25, random=zero) == 0.25
    assert retry_after_pause(2.0, 0.25, random=zero) == 2.0
    assert retry_after_pause(0.1, 0.25, random=zero) == 0.25
    assert retry_after_pause(3600.0, random=zero) == MAX_RETRY_AFTER
    assert retry_after_pause(2.0, random=lambda: 0.999) == pytest.approx(2.0999)


def test_list_watch_backoff_doubles_caps_and_resets_after_quiet() -> None:
    from kubeloop._backoff import ListWatchBackoff

    clock = FakeClock()
    backoff = ListWatchBackoff(clock=clock, random=lambda: 0.0)
    pauses = []
    for _ in range(8):
        pauses.append(backoff.next())
        clock.now += 1
    assert pauses == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    clock.now += 121
    assert backoff.next() == 0.8, "two quiet minutes start the schedule again"
    jittered = ListWatchBackoff(clock=clock, random=lambda: 0.5)
    assert jittered.next() == pytest.approx(1.2)


def test_a_watch_ended_early_only_when_short_and_silent() -> None:
    from kubeloop._backoff import ListWatchBackoff

    assert ListWatchBackoff.ended_early(0.2, 0)
    assert not ListWatchBackoff.ended_early(0.2, 1)
    assert not ListWatchBackoff.ended_early(300.0, 0)
