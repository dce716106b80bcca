"""Rate limiters for the workqueue, and the backoff math for short retry loops.

The limiters mirror client-go's ``util/workqueue/default_rate_limiters.go``: a
limiter answers "how long should this item wait before its next try?". The
:class:`Backoff` schedule mirrors ``apimachinery``'s ``wait.Backoff`` as used by
``retry.RetryOnConflict``.
"""

from __future__ import annotations

import random as _random
import sys
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

Clock = Callable[[], float]

_T_contra = TypeVar("_T_contra", bound=Hashable, contravariant=True)
_T = TypeVar("_T", bound=Hashable)


class RateLimiter(Protocol[_T_contra]):
    """Decides how long an item waits before it is queued again."""

    def when(self, item: _T_contra) -> float:
        """Record one more try of ``item`` and return its delay in seconds."""
        ...

    def forget(self, item: _T_contra) -> None:
        """Stop tracking ``item``: its next failure starts from the base delay again."""
        ...

    def retries(self, item: _T_contra) -> int:
        """How many times ``item`` has been delayed since it was last forgotten."""
        ...


class ItemExponentialBackoff(RateLimiter[_T]):
    """Per-item exponential delay: ``base * 2**failures``, at most ``cap``.

    Args:
        base: the first delay in seconds. Default 0.005 (client-go's 5 ms).
        cap: the largest delay in seconds. Default 1000.0 (client-go's 1000 s).
    """

    __slots__ = ("_base", "_cap", "_failures", "_max_exp")

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"need 0 < base <= cap, got base={base} cap={cap}")
        self._base = base
        self._cap = cap
        self._failures: dict[_T, int] = {}
        # Past this exponent the delay is the cap; checking first avoids float overflow.
        exp = 0
        while base * 2.0**exp < cap:
            exp += 1
        self._max_exp = exp

    def when(self, item: _T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= self._max_exp:
            return self._cap
        return min(self._base * 2.0**exp, self._cap)

    def forget(self, item: _T) -> None:
        self._failures.pop(item, None)

    def retries(self, item: _T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket shared by every item (golang.org/x/time/rate semantics).

    Each :meth:`when` reserves one token; once the bucket is empty the delay is the
    time until the reserved token will have been refilled, so a burst of failures is
    spread out at ``qps``.

    Args:
        qps: tokens refilled per second. Default 10 (client-go's controller default).
        burst: bucket size, i.e. how many tries may go at once. Default 100.
        clock: monotonic seconds. Default :func:`time.monotonic`.
    """

    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(self, qps: float = 10, burst: int = 100, *, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self._qps = float(qps)
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: object) -> float:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        # Tokens may go negative: that is the queue of reservations already handed out.
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def cancel(self) -> None:
        """Give back the token of a :meth:`when` whose caller gave up before using it
        (x/time/rate's ``Reservation.Cancel``), so it does not delay those behind it."""
        self._tokens = min(self._burst, self._tokens + 1.0)

    def forget(self, item: object) -> None:
        """Nothing to forget: the bucket is not per item."""

    def retries(self, item: object) -> int:
        return 0


class MaxOf(RateLimiter[_T]):
    """The longest delay any of ``limiters`` asks for; every limiter sees every call."""

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: RateLimiter[_T]) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one limiter")
        self._limiters = limiters

    def when(self, item: _T) -> float:
        # A list, not a generator: every limiter must record the try, not just the first.
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: _T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def retries(self, item: _T) -> int:
        return max(limiter.retries(item) for limiter in self._limiters)


def default_controller_rate_limiter(*, clock: Clock = time.monotonic) -> MaxOf[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: per-item 5 ms → 1000 s, and 10 qps / 100 burst.

    This is what controller-runtime uses for the classic (non-priority) queue.
    """
    per_item: ItemExponentialBackoff[Hashable] = ItemExponentialBackoff(0.005, 1000.0)
    return MaxOf(per_item, BucketRateLimiter(10, 100, clock=clock))


@dataclass(frozen=True, slots=True)
class Backoff:
    """A bounded retry schedule, like apimachinery's ``wait.Backoff``.

    Args:
        duration: the first pause in seconds. Default 0.010.
        factor: each pause is the previous one times this; 1.0 keeps it constant.
            Default 1.0.
        jitter: each pause is stretched by up to this fraction:
            ``pause * (1 + random() * jitter)``; 0 disables it. Default 0.0.
        steps: the number of attempts, so there are ``steps - 1`` pauses. Default 1.
        cap: the pause stops growing here (before jitter); 0 means no cap. Default 0.0.
        random: a source of floats in [0, 1); inject a constant in tests.
            Default :func:`random.random`.
    """

    duration: float = 0.010
    factor: float = 1.0
    jitter: float = 0.0
    steps: int = 1
    cap: float = 0.0
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.duration < 0 or self.factor < 0 or self.jitter < 0 or self.cap < 0:
            raise ValueError(f"negative value in {self!r}")

    def delays(self) -> Iterator[float]:
        """The pauses between ``steps`` attempts, in seconds (``steps - 1`` of them).

        Typical use — when the iterator runs out, the last attempt's error stands::

            pauses = backoff.delays()
            while True:
                try:
                    return await attempt()
                except Conflict:
                    pause = next(pauses, None)
                    if pause is None:
                        raise
                    await asyncio.sleep(pause)
        """
        pause = min(self.duration, self.cap) if self.cap > 0 else self.duration
        for _ in range(self.steps - 1):
            yield pause * (1.0 + self.random() * self.jitter) if self.jitter > 0 else pause
            pause = min(pause * self.factor, self.cap) if self.cap > 0 else pause * self.factor


DEFAULT_RETRY = Backoff(duration=0.010, factor=1.0, jitter=0.1, steps=5)
"""client-go's ``retry.DefaultRetry``: 5 attempts, 10 ms apart (+10 % jitter)."""

DEFAULT_BACKOFF = Backoff(duration=0.010, factor=5.0, jitter=0.1, steps=4)
"""client-go's ``retry.DefaultBackoff``: 4 attempts, pauses of 10, 50, 250 ms (+10 % jitter)."""


#: Never sleep longer than this on one Retry-After: callers have their own deadlines,
#: and a server asking for minutes is better answered by the workqueue's backoff.
MAX_RETRY_AFTER = 10.0


def retry_after_pause(
    retry_after: float | None, floor: float = 0.0, *, random: Callable[[], float] = _random.random
) -> float:
    """The one place a server's ``Retry-After`` becomes a pause (the client's
    throttling retries and :func:`~kubeloop.retry_transient` both use it).

    At least ``floor`` (the caller's own backoff step, already jittered); at least
    ``retry_after`` capped at :data:`MAX_RETRY_AFTER`, plus up to 100 ms of jitter
    when that is the longer one, so throttled clients do not come back in lock step.
    """
    if retry_after is None:
        return floor
    asked = min(retry_after, MAX_RETRY_AFTER)
    return floor if floor >= asked else asked + random() * 0.1


class ListWatchBackoff:
    """The pause before a reflector lists or watches again, as client-go's reflector
    backoff manager (``NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)``).

    Every failed list or watch, every relist (410 Gone) and every watch that ended
    early without a single line asks :meth:`next`: ``initial``, then doubling up to
    ``cap``, each stretched by up to ``jitter`` (client-go: 1.0, i.e. up to 2x).
    After ``reset_after`` seconds without a call the schedule starts again from
    ``initial``, so one blip an hour never waits 30 s. This is what keeps a
    failing apiserver from a relist storm: N informers x an immediate LIST each.

    Args:
        initial: the first pause in seconds. Default 0.8.
        cap: the largest pause before jitter. Default 30.0.
        reset_after: quiet seconds after which the schedule restarts. Default 120.
        jitter: fraction each pause may be stretched by. Default 1.0.
        clock, random: injectable for tests.
    """

    __slots__ = ("_clock", "_last", "_pauses", "_reset", "_schedule")

    #: A watch shorter than this that delivered nothing ended "early" (client-go: 1 s).
    EARLY_WATCH = 1.0

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        *,
        reset_after: float = 120.0,
        jitter: float = 1.0,
        clock: Clock = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if initial <= 0 or cap < initial:
            raise ValueError(f"need 0 < initial <= cap, got initial={initial} cap={cap}")
        # The same schedule as every other retry loop, endless, with "a quiet spell
        # starts it over" as the only state of its own.
        self._schedule = Backoff(
            duration=initial, factor=2.0, jitter=jitter, steps=sys.maxsize, cap=cap, random=random
        )
        self._pauses = self._schedule.delays()
        self._reset = reset_after
        self._clock = clock
        self._last: float | None = None

    def next(self) -> float:
        """Record one more failure (or relist) and return the pause before the next try."""
        now = self._clock()
        if self._last is not None and now - self._last > self._reset:
            self._pauses = self._schedule.delays()
        self._last = now
        return next(self._pauses)

    @classmethod
    def ended_early(cls, seconds: float, lines: int) -> bool:
        """Whether a watch that lasted ``seconds`` and received ``lines`` lines (events
        or bookmarks) ended too soon to resume at once: it is how a server that
        accepts watches and drops them at once is told from a watch that expired."""
        return lines == 0 and seconds < cls.EARLY_WATCH
