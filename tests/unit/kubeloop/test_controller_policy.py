"""The requeue policy and worker supervision of one Controller, without an API server.

Requests are enqueued by hand and the reconciler records the order it ran them
in; assertions are about that order and about counters, never about time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from kubeloop import (
    Controller,
    ControllerOptions,
    Forbidden,
    Registry,
    Request,
    Result,
    RuntimeMetrics,
)
from kubeloop.testing import eventually

Reconcile = Callable[[Request], Awaitable[Result | None]]


@contextlib.asynccontextmanager
async def workers(
    reconcile: Reconcile, options: ControllerOptions | None = None
) -> AsyncIterator[Controller]:
    ctl = Controller(
        "policy",
        reconcile,
        sources=[],
        options=options or ControllerOptions(loop_detection=None),
        metrics=RuntimeMetrics(Registry()),
    )
    await ctl.start_workers()
    try:
        yield ctl
    finally:
        await ctl.shutdown(grace=5)


def value(ctl: Controller, family: str, **labels: str) -> float:
    metric = ctl.metrics.registry.get(family)
    assert metric is not None
    return float(metric.labels(controller="policy", **labels).value)  # type: ignore[union-attr]


async def _cancelled_elsewhere() -> None:
    """What a reconciler sees when it awaits a task that someone else cancelled."""
    other = asyncio.get_running_loop().create_future()
    other.cancel()
    await other


@pytest.mark.parametrize(
    "crash",
    [_cancelled_elsewhere, KeyboardInterrupt, SystemExit, GeneratorExit, ValueError],
    ids=["stray-cancel", "KeyboardInterrupt", "SystemExit", "GeneratorExit", "ValueError"],
)
async def test_a_crashing_reconciler_never_kills_its_worker(crash: object) -> None:
    ran: list[str] = []

    async def reconcile(req: Request) -> Result:
        ran.append(req.name)
        if req.name == "bad" and ran.count("bad") == 1:
            if isinstance(crash, type):
                raise crash("boom")
            await crash()  # type: ignore[operator]
        return Result()

    async with workers(reconcile) as ctl:
        ctl.enqueue(Request("bad", "ns"))
        await eventually(lambda: ran.count("bad") == 2, "the crashed request to be retried")
        ctl.enqueue(Request("next", "ns"))
        await eventually(lambda: "next" in ran, "the single worker to take new work")
        assert ctl.dead_workers() is None
    assert ran == ["bad", "bad", "next"]
    # a crash (not an API error) is what controller-runtime calls a panic
    assert value(ctl, "controller_runtime_reconcile_panics_total") == 1
    assert value(ctl, "controller_runtime_reconcile_errors_total") == 1


async def test_api_errors_and_timeouts_are_errors_but_not_panics() -> None:
    ran: list[str] = []

    async def reconcile(req: Request) -> Result:
        ran.append(req.name)
        if len(ran) == 1:
            raise Forbidden(403, "Forbidden", "not yet")
        if len(ran) == 2:
            raise TimeoutError("the cloud did not answer")  # the reconciler's own timeout
        return Result()

    async with workers(
        reconcile, ControllerOptions(loop_detection=None, reconcile_timeout=30)
    ) as ctl:
        ctl.enqueue(Request("x", "ns"))
        await eventually(lambda: len(ran) == 3, "two failures, then success")
    assert value(ctl, "controller_runtime_reconcile_errors_total") == 2
    assert value(ctl, "controller_runtime_reconcile_panics_total") == 0
    assert value(ctl, "controller_runtime_reconcile_timeouts_total") == 0


async def test_our_reconcile_timeout_is_counted_and_retried() -> None:
    ran: list[int] = []

    async def reconcile(req: Request) -> Result:
        ran.append(1)
        if len(ran) == 1:
            await asyncio.sleep(3600)
        return Result()

    options = ControllerOptions(loop_detection=None, reconcile_timeout=0.05)
    async with workers(reconcile, options) as ctl:
        ctl.enqueue(Request("slow", "ns"))
        await eventually(lambda: len(ran) == 2, "the timed-out reconcile to be retried")
    assert value(ctl, "controller_runtime_reconcile_timeouts_total") == 1
    assert value(ctl, "controller_runtime_reconcile_panics_total") == 0


@pytest.mark.parametrize("after", [0, -1.0])
async def test_requeue_after_zero_or_negative_is_no_requeue(after: float) -> None:
    ran: list[str] = []

    async def reconcile(req: Request) -> Result:
        ran.append(req.name)
        return Result(requeue_after=after) if req.name == "a" else Result()

    async with workers(reconcile) as ctl:
        ctl.enqueue(Request("a", "ns"))
        ctl.enqueue(Request("b", "ns"))
        await eventually(lambda: "b" in ran, "b to run")
        ctl.enqueue(Request("c", "ns"))
        await eventually(lambda: "c" in ran, "c to run")
        assert ctl.queue.num_delayed == 0
    # a requeue would have put "a" back in the queue before "c" was added
    assert ran == ["a", "b", "c"]
    assert value(ctl, "controller_runtime_reconcile_total", result="success") == 3


async def test_requeue_true_with_zero_requeue_after_backs_off() -> None:
    ran: list[int] = []

    async def reconcile(req: Request) -> Result:
        ran.append(1)
        return Result(requeue=len(ran) < 3, requeue_after=0)

    async with workers(reconcile) as ctl:
        ctl.enqueue(Request("a", "ns"))
        await eventually(lambda: len(ran) == 3, "two rate-limited requeues")
    assert value(ctl, "controller_runtime_reconcile_total", result="requeue") == 2


async def test_a_dead_worker_is_reported_for_healthz() -> None:
    async def reconcile(req: Request) -> Result:
        return Result()

    async with workers(reconcile, ControllerOptions(max_concurrent_reconciles=2)) as ctl:
        assert ctl.dead_workers() is None
        victim = ctl._workers[0]  # only a cancel from outside can end a worker
        victim.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await victim
        report = ctl.dead_workers()
    assert report is not None
    assert report.startswith("1 of 2 workers dead")
    assert "policy worker 0: cancelled" in report


async def test_shutdown_without_grace_cancels_reconciles_and_settles_the_books() -> None:
    events: list[str] = []

    async def reconcile(req: Request) -> Result:
        events.append("started")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return Result()

    ctl = Controller(
        "policy",
        reconcile,
        sources=[],
        options=ControllerOptions(loop_detection=None),
        metrics=RuntimeMetrics(Registry()),
    )
    await ctl.start_workers()
    ctl.enqueue(Request("stuck", "ns"))
    await eventually(lambda: events == ["started"], "the reconcile to start")
    await asyncio.wait_for(ctl.shutdown(grace=0), 30)
    assert events == ["started", "cancelled"]
    assert value(ctl, "controller_runtime_active_workers") == 0
    assert value(ctl, "controller_runtime_reconcile_total", result="error") == 1
