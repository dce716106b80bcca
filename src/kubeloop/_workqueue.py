"""The controller workqueue: client-go's rate-limited, delaying, de-duplicating queue.

Guarantees, as in client-go's ``util/workqueue``:

* an item waiting in the queue is held once, however often it is added;
* an item a worker holds (between :meth:`WorkQueue.get` and :meth:`WorkQueue.done`)
  is never handed to a second worker; adding it meanwhile marks it dirty, and
  ``done`` queues it again, once;
* delayed adds share one heap and one timer; the earliest requested time wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from kubeloop._backoff import Clock, RateLimiter, default_controller_rate_limiter
from kubeloop._errors import KubeloopError
from kubeloop._metrics import RUNTIME_METRICS, RuntimeMetrics

T = TypeVar("T", bound=Hashable)

# Rebuild the delay heap when superseded entries outnumber live ones by this much.
_HEAP_SLACK = 64


class QueueShutDown(KubeloopError):
    """:meth:`WorkQueue.get` on a queue that is shut down and has nothing left to hand out."""


class QueueMetrics(Protocol):
    """Where a queue reports; :class:`kubeloop._metrics.WorkQueueMetrics` is the Prometheus one."""

    def added(self) -> None:
        """An item was accepted (``workqueue_adds_total``)."""

    def depth(self, n: int) -> None:
        """Items now waiting for a worker (``workqueue_depth``)."""

    def queue_latency(self, seconds: float) -> None:
        """An item waited this long between add and get (``workqueue_queue_duration_seconds``)."""

    def work_duration(self, seconds: float) -> None:
        """A worker held an item this long, get to done (``workqueue_work_duration_seconds``)."""

    def retried(self) -> None:
        """A delayed re-add was requested (``workqueue_retries_total``), as client-go counts."""

    def watch_unfinished(self, probe: Callable[[], tuple[float, float]]) -> None:
        """Keep ``probe``, which returns (seconds of unfinished work, longest running item).

        For ``workqueue_unfinished_work_seconds`` and
        ``workqueue_longest_running_processor_seconds``, read whenever they are needed.
        """


class _NoMetrics:
    def added(self) -> None:
        pass

    def depth(self, n: int) -> None:
        pass

    def queue_latency(self, seconds: float) -> None:
        pass

    def work_duration(self, seconds: float) -> None:
        pass

    def retried(self) -> None:
        pass

    def watch_unfinished(self, probe: Callable[[], tuple[float, float]]) -> None:
        pass


class WorkQueue(Generic[T]):
    """An asyncio workqueue of hashable keys (e.g. :class:`kubeloop._reconcile.Request`).

    Workers loop on ``item = await q.get()`` … ``q.done(item)``. All methods must be
    called from the event loop that owns the queue; none of them block.

    Args:
        name: the controller name; labels the ``workqueue_*`` metrics. Default ``""``.
        rate_limiter: decides :meth:`add_rate_limited` delays. Default
            :func:`~kubeloop._backoff.default_controller_rate_limiter` (per item
            5 ms → 1000 s, overall 10 qps with a burst of 100).
        metrics: where to report: any :class:`QueueMetrics`, or a
            :class:`~kubeloop._metrics.RuntimeMetrics` whose ``workqueue_*`` series of
            ``name`` are used. Default: those of :data:`~kubeloop._metrics.RUNTIME_METRICS`
            if ``name`` is set, else nowhere.
        clock: monotonic seconds, for delays and metrics. Default :func:`time.monotonic`.
            The delay timer sleeps on the loop's clock, so with a fake clock call
            :meth:`get` after advancing it: due items are promoted on every ``get``.
    """

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter[T] | None = None,
        metrics: QueueMetrics | RuntimeMetrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.name = name
        self._clock = clock
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=clock)
        )
        if metrics is None:
            metrics = RUNTIME_METRICS if name else _NoMetrics()
        if isinstance(metrics, RuntimeMetrics):
            metrics = metrics.workqueue(name)
        self._metrics: QueueMetrics = metrics

        self._queue: deque[T] = deque()  # ready for a worker, in FIFO order
        self._dirty: dict[T, float] = {}  # needs processing -> when it was added
        self._processing: dict[T, float] = {}  # held by a worker -> since when
        self._delayed: list[tuple[float, int, T]] = []  # heap of (ready at, seq, item)
        self._pending: dict[T, tuple[float, int]] = {}  # the live heap entry per item
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False

        # A weak reference, so a registry that outlives the queue does not keep it alive.
        ref = weakref.ref(self)

        def probe() -> tuple[float, float]:
            queue = ref()
            return queue._unfinished_work() if queue is not None else (0.0, 0.0)

        metrics.watch_unfinished(probe)

    # -- state ---------------------------------------------------------------------

    def __len__(self) -> int:
        """Items ready for a worker now (not counting delayed or in-progress ones)."""
        return len(self._queue)

    @property
    def depth(self) -> int:
        """Items waiting to be processed, including ones re-added while in progress."""
        return len(self._dirty)

    @property
    def num_processing(self) -> int:
        """Items currently held by workers."""
        return len(self._processing)

    @property
    def num_delayed(self) -> int:
        """Items scheduled by :meth:`add_after` and not yet due."""
        return len(self._pending)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # -- adding --------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is already waiting; ignored after shutdown."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty[item] = self._clock()
        self._metrics.added()
        self._metrics.depth(len(self._dirty))
        if item in self._processing:
            return  # done() queues it again; a second worker must not get it now
        self._queue.append(item)
        self._wake_getter()

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed; ignored after shutdown.

        If ``item`` is already scheduled, the earlier of the two times wins.
        """
        if self._shutting_down:
            return
        self._metrics.retried()
        if delay <= 0:
            self.add(item)
            return
        ready = self._clock() + delay
        current = self._pending.get(item)
        if current is not None and current[0] <= ready:
            return
        seq = next(self._seq)
        self._pending[item] = (ready, seq)
        # The superseded entry stays in the heap; it is recognised as stale when popped.
        heapq.heappush(self._delayed, (ready, seq, item))
        if len(self._delayed) > 2 * len(self._pending) + _HEAP_SLACK:
            self._delayed = [(r, s, i) for i, (r, s) in self._pending.items()]
            heapq.heapify(self._delayed)
        self._arm_timer(ready)

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it (its next backoff step)."""
        if self._shutting_down:
            return
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s backoff (after a success); does not remove it from the queue."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited re-adds ``item`` has had since it was last forgotten."""
        return self._rate_limiter.retries(item)

    # -- processing ----------------------------------------------------------------

    async def get(self) -> T:
        """Wait for an item and hold it until :meth:`done`.

        Raises:
            QueueShutDown: the queue is shut down and nothing is left to hand out.
        """
        self._promote_due()
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(f"workqueue {self.name!r} is shut down")
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.cancelled():
                    # _wake_getter may have discarded it already.
                    with contextlib.suppress(ValueError):
                        self._getters.remove(waiter)
                else:
                    self._wake_getter()  # we were woken but will not take the item: pass it on
                raise
        item = self._queue.popleft()
        now = self._clock()
        added = self._dirty.pop(item)
        self._processing[item] = now
        self._metrics.depth(len(self._dirty))
        self._metrics.queue_latency(now - added)
        return item

    def done(self, item: T) -> None:
        """Release ``item``; if it was added again meanwhile, it is queued now.

        Calling it for an item not held is a no-op, as in client-go.
        """
        started = self._processing.pop(item, None)
        if started is None:
            return
        self._metrics.work_duration(self._clock() - started)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_getter()
        else:
            self._notify_if_idle()

    # -- stopping ------------------------------------------------------------------

    def shutdown(self, *, drop_queued: bool = False) -> None:
        """Accept no more items and drop delayed ones.

        Items already queued are still handed out, then :meth:`get` raises
        :class:`QueueShutDown`. Workers holding items finish and call :meth:`done`.

        Args:
            drop_queued: also discard items waiting for a worker, so ``get`` raises
                at once and only in-progress items remain. Default False.
        """
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._delayed.clear()
        self._pending.clear()
        if drop_queued:
            self._queue.clear()
            self._dirty.clear()
            self._metrics.depth(0)
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._notify_if_idle()

    async def shutdown_with_drain(self) -> None:
        """:meth:`shutdown`, then wait until every queued and in-progress item is done.

        Workers must keep calling ``get`` until it raises. Bound the wait with
        :func:`asyncio.timeout` for a graceful-shutdown period; cancelling it leaves
        the queue shut down.
        """
        self.shutdown()
        await self.wait_idle()

    async def wait_idle(self) -> None:
        """Wait until nothing is queued and nothing is in progress (delayed items aside)."""
        if self._is_idle():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter.cancelled():
                with contextlib.suppress(ValueError):
                    self._idle_waiters.remove(waiter)

    # -- internals -----------------------------------------------------------------

    def _is_idle(self) -> bool:
        return not self._queue and not self._processing

    def _notify_if_idle(self) -> None:
        if self._idle_waiters and self._is_idle():
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _wake_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _drop_stale_heads(self) -> None:
        heap = self._delayed
        while heap and self._pending.get(heap[0][2]) != heap[0][:2]:
            heapq.heappop(heap)

    def _promote_due(self) -> None:
        """Move delayed items whose time has come into the queue."""
        now = self._clock()
        heap = self._delayed
        while True:
            self._drop_stale_heads()
            if not heap or heap[0][0] > now:
                return
            _, _, item = heapq.heappop(heap)
            del self._pending[item]
            self.add(item)

    def _arm_timer(self, ready: float) -> None:
        """Make sure the timer fires no later than ``ready`` (on the queue's clock)."""
        if self._timer is not None:
            if self._timer_at <= ready:
                return
            self._timer.cancel()
        self._timer_at = ready
        delay = max(0.0, ready - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._promote_due()
        if self._delayed:  # _promote_due left a live head that is not yet due
            self._arm_timer(self._delayed[0][0])

    def _unfinished_work(self) -> tuple[float, float]:
        now = self._clock()
        total = longest = 0.0
        for started in self._processing.values():
            running = now - started
            total += running
            longest = max(longest, running)
        return total, longest
