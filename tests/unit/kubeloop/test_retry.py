from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubeloop._backoff import DEFAULT_BACKOFF, DEFAULT_RETRY, Backoff
from kubeloop._errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
)
from kubeloop._retry import retry_on_conflict, retry_transient


class Sleeps:
    """An injected sleep that records requested pauses instead of waiting."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)


def failing(
    *errors: BaseException, result: str = "ok"
) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """An fn that raises ``errors`` in turn, then returns ``result``; and its call log."""
    calls: list[int] = []

    async def fn() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return fn, calls


def conflict() -> Conflict:
    return Conflict(409, "Conflict", "the object has been modified")


NO_JITTER_RETRY = Backoff(duration=0.010, factor=1.0, jitter=0.1, steps=5, random=lambda: 0.0)
NO_JITTER_BACKOFF = Backoff(duration=0.010, factor=5.0, jitter=0.1, steps=4, random=lambda: 0.0)


class TestRetryOnConflict:
    async def test_succeeds_after_two_conflicts(self) -> None:
        fn, calls = failing(conflict(), conflict())
        sleep = Sleeps()
        seen: list[tuple[int, Conflict]] = []
        result = await retry_on_conflict(
            fn, sleep=sleep, on_conflict=lambda attempt, err: seen.append((attempt, err))
        )
        assert result == "ok"
        assert calls == [1, 2, 3]
        assert [attempt for attempt, _ in seen] == [1, 2]
        assert all(isinstance(err, Conflict) for _, err in seen)
        # DEFAULT_RETRY: 10 ms pauses with up to 10 % jitter.
        assert len(sleep.pauses) == 2
        assert all(0.010 <= p <= 0.011 for p in sleep.pauses)

    async def test_gives_up_after_steps_and_reraises_last_conflict(self) -> None:
        errors = [conflict() for _ in range(6)]
        fn, calls = failing(*errors)
        sleep = Sleeps()
        seen: list[int] = []
        with pytest.raises(Conflict) as info:
            await retry_on_conflict(
                fn, backoff=NO_JITTER_RETRY, sleep=sleep, on_conflict=lambda a, e: seen.append(a)
            )
        assert info.value is errors[4]
        assert len(calls) == DEFAULT_RETRY.steps == 5
        assert seen == [1, 2, 3, 4, 5]
        assert sleep.pauses == [0.010] * 4

    @pytest.mark.parametrize(
        "error",
        [
            Invalid(422, "Invalid", "spec.targetNodes: must be >= 0"),
            Forbidden(403, "Forbidden", "cannot update nodepools/status"),
            NotFound(404, "NotFound", "nodepools.example.com pool not found"),
            AlreadyExists(409, "AlreadyExists", "pool already exists"),
            ServerError(500, "InternalError", "etcd leader changed"),
            ValueError("bug in fn"),
        ],
    )
    async def test_other_errors_are_not_retried(self, error: Exception) -> None:
        fn, calls = failing(error)
        sleep = Sleeps()
        with pytest.raises(type(error)) as info:
            await retry_on_conflict(fn, sleep=sleep)
        assert info.value is error
        assert calls == [1]
        assert sleep.pauses == []

    async def test_reapplies_only_its_change_on_latest_object(self) -> None:
        # The seed's NodePool story: the autoscaler bumps spec.targetNodes while
        # the NodePool controller writes status from a copy read earlier.
        server: dict[str, Any] = {
            "metadata": {"name": "pool", "resourceVersion": "1"},
            "spec": {"targetNodes": 1},
            "status": {"scaleOperation": "active"},
        }

        async def update(body: dict[str, Any]) -> dict[str, Any]:
            if body["metadata"]["resourceVersion"] != server["metadata"]["resourceVersion"]:
                raise conflict()
            server.update(copy.deepcopy(body))
            server["metadata"]["resourceVersion"] = str(
                int(body["metadata"]["resourceVersion"]) + 1
            )
            return copy.deepcopy(server)

        stale = copy.deepcopy(server)
        await update({**copy.deepcopy(server), "spec": {"targetNodes": 2}})  # the autoscaler

        first_try = True

        async def mark_inactive() -> dict[str, Any]:
            nonlocal first_try
            pool = stale if first_try else copy.deepcopy(server)  # re-read after a conflict
            first_try = False
            pool = copy.deepcopy(pool)
            pool["status"]["scaleOperation"] = "inactive"
            return await update(pool)

        result = await retry_on_conflict(mark_inactive, sleep=Sleeps())
        assert result["spec"]["targetNodes"] == 2  # the other writer's change survived
        assert result["status"]["scaleOperation"] == "inactive"
        assert result["metadata"]["resourceVersion"] == "3"

    async def test_uses_asyncio_sleep_by_default(self) -> None:
        fn, calls = failing(conflict())
        tiny = Backoff(duration=0.0, steps=2)
        assert await retry_on_conflict(fn, backoff=tiny) == "ok"
        assert calls == [1, 2]


class TestRetryTransient:
    async def test_honours_retry_after(self) -> None:
        fn, calls = failing(
            TooManyRequests(429, "TooManyRequests", "slow down", retry_after=2.0),
            ServerError(503, "ServiceUnavailable", "later", retry_after=7.0),
        )
        sleep = Sleeps()
        assert await retry_transient(fn, backoff=NO_JITTER_BACKOFF, sleep=sleep) == "ok"
        assert calls == [1, 2, 3]
        # what the server asked for, plus at most 100 ms of jitter (retry_after_pause)
        assert 2.0 <= sleep.pauses[0] < 2.1
        assert 7.0 <= sleep.pauses[1] < 7.1

    async def test_retry_after_never_shortens_the_backoff(self) -> None:
        fn, _ = failing(TooManyRequests(429, "TooManyRequests", "", retry_after=0.0))
        sleep = Sleeps()
        await retry_transient(fn, backoff=NO_JITTER_BACKOFF, sleep=sleep)
        assert sleep.pauses == [0.010]

    async def test_backs_off_exponentially_then_gives_up(self) -> None:
        errors = [ServerError(500, "InternalError", str(i)) for i in range(5)]
        fn, calls = failing(*errors)
        sleep = Sleeps()
        with pytest.raises(ServerError) as info:
            await retry_transient(fn, backoff=NO_JITTER_BACKOFF, sleep=sleep)
        assert info.value is errors[3]
        assert len(calls) == DEFAULT_BACKOFF.steps == 4
        assert sleep.pauses == pytest.approx([0.010, 0.050, 0.250])

    async def test_default_backoff_has_jitter_bounds(self) -> None:
        fn, _ = failing(TransportError("connection reset"), TimeoutError())
        sleep = Sleeps()
        assert await retry_transient(fn, sleep=sleep) == "ok"
        assert 0.010 <= sleep.pauses[0] <= 0.011
        assert 0.050 <= sleep.pauses[1] <= 0.055

    @pytest.mark.parametrize(
        "error",
        [
            Invalid(422, "Invalid", "spec.targetNodes: Invalid value"),
            Forbidden(403, "Forbidden", "quota exceeded"),
            ApiError(418, "Teapot", "unknown status"),
            conflict(),
        ],
    )
    async def test_terminal_and_conflict_propagate_at_once(self, error: Exception) -> None:
        fn, calls = failing(error)
        sleep = Sleeps()
        with pytest.raises(type(error)) as info:
            await retry_transient(fn, sleep=sleep)
        assert info.value is error
        assert calls == [1]
        assert sleep.pauses == []

    async def test_cancellation_is_not_retried(self) -> None:
        fn, calls = failing(asyncio.CancelledError())
        sleep = Sleeps()
        with pytest.raises(asyncio.CancelledError):
            await retry_transient(fn, sleep=sleep)
        assert calls == [1]
        assert sleep.pauses == []


async def test_composes_transient_inside_conflict() -> None:
    # A typical write: transient failures retried per request, conflicts per re-read.
    inner, inner_calls = failing(ServerError(503, "ServiceUnavailable", ""), conflict(), result="x")
    sleep = Sleeps()

    async def write() -> str:
        return await retry_transient(inner, backoff=NO_JITTER_BACKOFF, sleep=sleep)

    assert await retry_on_conflict(write, backoff=NO_JITTER_RETRY, sleep=sleep) == "x"
    assert inner_calls == [1, 2, 3]
    assert sleep.pauses == [0.010, 0.010]
