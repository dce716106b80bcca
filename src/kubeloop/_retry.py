"""Short, bounded retry loops around one API write.

Two loops, for two different failures:

* :func:`retry_on_conflict` retries only 409 Conflict. A conflict means our copy
  was stale, so ``fn`` must re-read the object and re-apply *only its own
  change* on every call; resending the same body would fail the same way.
* :func:`retry_transient` retries only what :func:`~kubeloop._errors.classify`
  calls BACKOFF (throttling, 5xx, timeouts, connection errors), honouring the
  server's Retry-After.

Everything else (validation, RBAC, quota, not found) propagates on the first
try: retrying a permanent error only adds load. Both loops are bounded by their
:class:`~kubeloop._backoff.Backoff`; when it runs out the last error is raised,
and the controller's workqueue takes over with its own, longer backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubeloop._backoff import DEFAULT_BACKOFF, DEFAULT_RETRY, Backoff, retry_after_pause
from kubeloop._errors import ApiError, Conflict, ErrorClass, classify

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]
"""How a loop pauses; tests inject a recorder instead of :func:`asyncio.sleep`."""


async def retry_on_conflict(
    fn: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff = DEFAULT_RETRY,
    on_conflict: Callable[[int, Conflict], None] | None = None,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Await ``fn()``, calling it again after each :class:`Conflict`, at most
    ``backoff.steps`` times in all; then re-raise the last Conflict.

    ``fn`` must GET the latest object and apply its change to that, so each try
    carries a fresh resourceVersion::

        async def mark_inactive() -> Object:
            pool = await client.get(NODEPOOLS, name, namespace)
            pool.setdefault("status", {})["scaleOperation"] = "inactive"
            return await client.update_status(NODEPOOLS, pool)

        await retry_on_conflict(mark_inactive)

    ``on_conflict(attempt, err)`` is called for every conflict (``attempt`` counts
    from 1), e.g. to count them. Any other exception propagates at once.
    """
    pauses = backoff.delays()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except Conflict as err:
            if on_conflict is not None:
                on_conflict(attempt, err)
            pause = next(pauses, None)
            if pause is None:
                raise
        await sleep(pause)


async def retry_transient(
    fn: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Await ``fn()``, calling it again after transient failures, at most
    ``backoff.steps`` times in all; then re-raise the last error.

    A failure is retried only if :func:`classify` says BACKOFF. When the server
    sent Retry-After (``ApiError.retry_after``, usually with 429 or 503) the pause
    is at least that long (capped, via :func:`~kubeloop._backoff.retry_after_pause`;
    note the client itself already retried such a request up to 10 times).
    Terminal errors and conflicts propagate at once: a conflict needs a re-read,
    which only ``fn``'s author can do (see :func:`retry_on_conflict`).
    Cancellation is never retried.
    """
    pauses = backoff.delays()
    while True:
        try:
            return await fn()
        # Exception, not BaseException: CancelledError must end the loop.
        except Exception as err:
            if classify(err) is not ErrorClass.BACKOFF:
                raise
            pause = next(pauses, None)
            if pause is None:
                raise
            if isinstance(err, ApiError):
                pause = retry_after_pause(err.retry_after, pause)
        await sleep(pause)
