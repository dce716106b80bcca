"""WorkQueue behaviour: de-duplication, exclusive processing, delays, rate limits, shutdown.

Time is a fake clock wherever possible; the few real timers use delays of a few
milliseconds, and no test asserts on how long anything took.
"""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubeloop._backoff import ItemExponentialBackoff, RateLimiter
from kubeloop._metrics import Registry, RuntimeMetrics
from kubeloop._reconcile import Request
from kubeloop._workqueue import QueueShutDown, WorkQueue

# Generous bound on waits that should finish almost at once; only guards against hangs.
HANG = 5.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RecordingMetrics:
    def __init__(self) -> None:
        self.adds = 0
        self.depths: list[int] = []
        self.latencies: list[float] = []
        self.durations: list[float] = []
        self.retries = 0
        self.probe: Callable[[], tuple[float, float]] | None = None

    def added(self) -> None:
        self.adds += 1

    def depth(self, n: int) -> None:
        self.depths.append(n)

    def queue_latency(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def work_duration(self, seconds: float) -> None:
        self.durations.append(seconds)

    def retried(self) -> None:
        self.retries += 1

    def watch_unfinished(self, probe: Callable[[], tuple[float, float]]) -> None:
        self.probe = probe


def make_queue(
    clock: FakeClock | None = None, rate_limiter: RateLimiter[str] | None = None
) -> tuple[WorkQueue[str], RecordingMetrics]:
    metrics = RecordingMetrics()
    queue: WorkQueue[str] = WorkQueue(
        "test", rate_limiter=rate_limiter, metrics=metrics, clock=clock or FakeClock()
    )
    return queue, metrics


async def get_now(queue: WorkQueue[str]) -> str:
    return await asyncio.wait_for(queue.get(), HANG)


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(5):
        await asyncio.sleep(0)


# -- de-duplication and exclusive processing ------------------------------------------


async def test_add_deduplicates_waiting_items_and_keeps_fifo_order() -> None:
    queue, metrics = make_queue()
    for item in ("a", "b", "a", "c", "b", "a"):
        queue.add(item)
    assert len(queue) == 3
    assert queue.depth == 3
    assert metrics.adds == 3
    assert [await get_now(queue) for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0


async def test_requests_are_valid_keys() -> None:
    queue: WorkQueue[Request] = WorkQueue(metrics=RecordingMetrics())
    queue.add(Request("x", "ns"))
    queue.add(Request("x", "ns"))
    queue.add(Request("x", "other"))
    assert len(queue) == 2
    assert await asyncio.wait_for(queue.get(), HANG) == Request("x", "ns")


async def test_item_in_progress_is_not_handed_out_again() -> None:
    queue, _ = make_queue()
    queue.add("a")
    assert await get_now(queue) == "a"
    queue.add("a")
    queue.add("b")
    assert len(queue) == 1  # only b is ready; a is dirty
    assert queue.depth == 2
    assert await get_now(queue) == "b"
    # a is still held: a getter now must wait.
    waiting = asyncio.create_task(queue.get())
    await settle()
    assert not waiting.done()
    queue.done("a")
    assert await asyncio.wait_for(waiting, HANG) == "a"


async def test_dirty_item_runs_again_exactly_once_after_done() -> None:
    queue, metrics = make_queue()
    queue.add("a")
    await get_now(queue)
    for _ in range(5):
        queue.add("a")
    assert metrics.adds == 2  # the first add, then one dirty mark
    queue.done("a")
    assert len(queue) == 1
    assert await get_now(queue) == "a"
    queue.done("a")
    assert len(queue) == 0
    assert queue.depth == 0
    assert queue.num_processing == 0


async def test_done_for_an_item_not_held_is_a_no_op() -> None:
    queue, metrics = make_queue()
    queue.done("never")
    assert metrics.durations == []
    assert len(queue) == 0


async def test_ten_workers_never_process_one_key_concurrently() -> None:
    queue: WorkQueue[int] = WorkQueue(metrics=RecordingMetrics())
    rng = random.Random(7)
    active: set[int] = set()
    overlaps: list[int] = []
    processed: list[int] = []
    peak = 0

    async def worker() -> None:
        nonlocal peak
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            peak = max(peak, len(active))
            processed.append(key)
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
                if rng.random() < 0.3:
                    queue.add(key)  # an event for the object being reconciled
            active.discard(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(10)]
    for _ in range(2000):
        queue.add(rng.randrange(5))
        if rng.random() < 0.5:
            await asyncio.sleep(0)
    await asyncio.wait_for(queue.wait_idle(), HANG)
    queue.shutdown()
    await asyncio.wait_for(asyncio.gather(*workers), HANG)

    assert overlaps == []
    assert peak > 1  # the workers really did run side by side
    assert set(processed) == set(range(5))
    assert queue.num_processing == 0
    assert queue.depth == 0


# -- delayed adds ---------------------------------------------------------------------


async def test_add_after_releases_in_ready_order() -> None:
    clock = FakeClock()
    queue, metrics = make_queue(clock)
    queue.add_after("a", 3)
    queue.add_after("b", 1)
    queue.add_after("c", 2)
    assert len(queue) == 0
    assert queue.num_delayed == 3
    assert metrics.retries == 3  # client-go counts every delayed add as a retry
    clock.now += 1.5
    assert await get_now(queue) == "b"
    assert queue.num_delayed == 2
    clock.now += 10
    assert [await get_now(queue), await get_now(queue)] == ["c", "a"]
    assert queue.num_delayed == 0
    queue.shutdown()


async def test_add_after_earliest_time_wins() -> None:
    clock = FakeClock()
    queue, _ = make_queue(clock)
    queue.add_after("later-then-sooner", 10)
    queue.add_after("later-then-sooner", 2)
    queue.add_after("sooner-then-later", 2)
    queue.add_after("sooner-then-later", 10)
    assert queue.num_delayed == 2
    clock.now += 2
    assert {await get_now(queue), await get_now(queue)} == {
        "later-then-sooner",
        "sooner-then-later",
    }
    assert queue.num_delayed == 0
    # The superseded heap entries do not come back later.
    clock.now += 100
    queue.add("marker")
    assert await get_now(queue) == "marker"
    assert len(queue) == 0
    queue.shutdown()


async def test_add_after_without_delay_adds_now() -> None:
    queue, _ = make_queue()
    queue.add_after("a", 0)
    queue.add_after("b", -1)
    assert len(queue) == 2
    assert queue.num_delayed == 0


async def test_delayed_item_already_queued_is_not_duplicated() -> None:
    clock = FakeClock()
    queue, _ = make_queue(clock)
    queue.add("a")
    queue.add_after("a", 1)
    clock.now += 1
    assert await get_now(queue) == "a"
    assert len(queue) == 0
    queue.shutdown()


async def test_many_reschedules_keep_the_heap_bounded() -> None:
    clock = FakeClock()
    queue, _ = make_queue(clock)
    for i in range(1000):
        queue.add_after("a", 1000 - i)
    assert queue.num_delayed == 1
    assert len(queue._delayed) < 200
    clock.now += 1
    assert await get_now(queue) == "a"
    queue.shutdown()


async def test_real_timer_wakes_a_waiting_getter() -> None:
    queue: WorkQueue[str] = WorkQueue(metrics=RecordingMetrics())
    waiting = asyncio.create_task(queue.get())
    await settle()
    queue.add_after("slow", 0.010)
    queue.add_after("fast", 0.002)
    assert await asyncio.wait_for(waiting, HANG) == "fast"
    assert await asyncio.wait_for(queue.get(), HANG) == "slow"
    assert queue.num_delayed == 0


# -- rate limiting --------------------------------------------------------------------


async def test_add_rate_limited_backs_off_and_forget_resets() -> None:
    clock = FakeClock()
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff(base=1.0, cap=8.0)
    queue, metrics = make_queue(clock, rate_limiter=limiter)
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 1
    assert len(queue) == 0
    clock.now += 1
    assert await get_now(queue) == "a"
    queue.done("a")

    queue.add_rate_limited("a")  # second failure: 2 s
    assert queue.num_requeues("a") == 2
    clock.now += 1.5
    queue.add("probe")
    assert await get_now(queue) == "probe"  # a is not due yet
    clock.now += 0.5
    assert await get_now(queue) == "a"
    queue.done("a")

    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert metrics.retries == 2
    queue.shutdown()


async def test_default_rate_limiter_is_used() -> None:
    clock = FakeClock()
    queue, _ = make_queue(clock)
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 2
    clock.now += 0.005
    assert await get_now(queue) == "a"
    queue.shutdown()


# -- shutdown and drain -----------------------------------------------------------


async def test_shutdown_hands_out_what_is_queued_then_raises() -> None:
    queue, _ = make_queue()
    queue.add("a")
    queue.add("b")
    assert await get_now(queue) == "a"
    queue.shutdown()
    assert queue.shutting_down
    queue.add("c")
    queue.add_after("d", 0)
    queue.add_rate_limited("e")
    assert queue.num_requeues("e") == 0
    assert await get_now(queue) == "b"
    with pytest.raises(QueueShutDown):
        await get_now(queue)
    queue.done("a")
    queue.done("b")
    assert queue.num_processing == 0


async def test_shutdown_wakes_waiting_getters() -> None:
    queue, _ = make_queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), HANG)
    assert all(isinstance(r, QueueShutDown) for r in results)


async def test_shutdown_drops_delayed_items() -> None:
    clock = FakeClock()
    queue, _ = make_queue(clock)
    queue.add_after("a", 1)
    queue.shutdown()
    assert queue.num_delayed == 0
    clock.now += 10
    with pytest.raises(QueueShutDown):
        await get_now(queue)


async def test_item_dirty_at_shutdown_is_still_requeued_by_done() -> None:
    queue, _ = make_queue()
    queue.add("a")
    await get_now(queue)
    queue.add("a")
    queue.shutdown()
    queue.done("a")
    assert await get_now(queue) == "a"


async def test_shutdown_drop_queued_stops_handing_out_work() -> None:
    queue, metrics = make_queue()
    for item in ("a", "b", "c"):
        queue.add(item)
    assert await get_now(queue) == "a"
    queue.add("a")  # dirty while held
    queue.shutdown(drop_queued=True)
    assert len(queue) == 0
    assert queue.depth == 0
    assert metrics.depths[-1] == 0
    with pytest.raises(QueueShutDown):
        await get_now(queue)
    idle = asyncio.create_task(queue.wait_idle())
    await settle()
    assert not idle.done()  # a is still in progress
    queue.done("a")
    await asyncio.wait_for(idle, HANG)
    assert len(queue) == 0  # the dirty mark was dropped too


async def test_shutdown_with_drain_waits_for_queued_and_in_flight_work() -> None:
    queue, _ = make_queue()
    for item in ("a", "b", "c"):
        queue.add(item)
    finished: list[str] = []

    async def worker() -> None:
        while True:
            try:
                item = await queue.get()
            except QueueShutDown:
                return
            await asyncio.sleep(0)
            finished.append(item)
            queue.done(item)

    task = asyncio.create_task(worker())
    await asyncio.wait_for(queue.shutdown_with_drain(), HANG)
    assert finished == ["a", "b", "c"]
    await asyncio.wait_for(task, HANG)


async def test_drain_can_be_bounded_by_a_timeout() -> None:
    queue, _ = make_queue()
    queue.add("stuck")
    await get_now(queue)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.005):
            await queue.shutdown_with_drain()
    assert queue.shutting_down
    assert queue._idle_waiters == []


async def test_wait_idle() -> None:
    queue, _ = make_queue()
    await asyncio.wait_for(queue.wait_idle(), HANG)  # empty: returns at once
    queue.add("a")
    idle = asyncio.create_task(queue.wait_idle())
    await settle()
    assert not idle.done()
    await get_now(queue)
    queue.add("a")
    queue.done("a")  # re-queued: still not idle
    await settle()
    assert not idle.done()
    await get_now(queue)
    queue.done("a")
    await asyncio.wait_for(idle, HANG)


# -- cancellation -----------------------------------------------------------------


async def test_cancelled_getter_does_not_lose_the_item() -> None:
    queue, _ = make_queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes the first getter...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, HANG) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert queue.num_processing == 1


async def test_cancelled_waiting_getter_is_forgotten() -> None:
    queue, _ = make_queue()
    getter = asyncio.create_task(queue.get())
    await settle()
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert len(queue._getters) == 0
    queue.add("a")
    assert await get_now(queue) == "a"


# -- metrics ----------------------------------------------------------------------


async def test_metrics_measure_queue_and_work_time_on_the_clock() -> None:
    clock = FakeClock()
    queue, metrics = make_queue(clock)
    queue.add("a")
    clock.now += 2
    queue.add("b")
    clock.now += 1
    await get_now(queue)
    await get_now(queue)
    assert metrics.latencies == [3.0, 1.0]
    assert metrics.probe is not None
    clock.now += 4
    assert metrics.probe() == (8.0, 4.0)  # a and b each held for 4 s
    queue.done("a")
    assert metrics.durations == [4.0]
    assert metrics.probe() == (4.0, 4.0)
    queue.done("b")
    assert metrics.probe() == (0.0, 0.0)
    assert metrics.depths == [1, 2, 1, 0]


def exposed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, parsed by prometheus_client's own parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_prometheus_series_for_a_named_queue() -> None:
    runtime = RuntimeMetrics(Registry())
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("pools", metrics=runtime.workqueue("pools"), clock=clock)
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 5)
    await asyncio.wait_for(queue.get(), HANG)
    clock.now += 2
    samples = exposed(runtime.registry.render())
    labels = (("controller", "pools"), ("name", "pools"))
    assert samples["workqueue_adds_total", labels] == 2
    assert samples["workqueue_depth", labels] == 1
    assert samples["workqueue_retries_total", labels] == 1
    assert samples["workqueue_unfinished_work_seconds", labels] == 2
    assert samples["workqueue_longest_running_processor_seconds", labels] == 2
    assert samples["workqueue_queue_duration_seconds_count", labels] == 1
    queue.shutdown()


async def test_runtime_metrics_can_be_passed_directly() -> None:
    runtime = RuntimeMetrics(Registry())
    queue: WorkQueue[str] = WorkQueue("pools", metrics=runtime)
    queue.add("a")
    samples = exposed(runtime.registry.render())
    assert samples["workqueue_adds_total", (("controller", "pools"), ("name", "pools"))] == 1


async def test_unnamed_queue_reports_nowhere_by_default() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")  # no metrics object to fail on
    assert await asyncio.wait_for(queue.get(), HANG) == "a"


async def test_registry_does_not_keep_the_queue_alive() -> None:
    metrics = RecordingMetrics()
    queue: WorkQueue[str] = WorkQueue("gone", metrics=metrics)
    del queue
    gc.collect()
    assert metrics.probe is not None
    assert metrics.probe() == (0.0, 0.0)
