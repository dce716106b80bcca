"""Async helpers for tests of controllers: wait for a condition, run a Manager."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from kubeloop._client import Client
from kubeloop._manager import Manager, ManagerOptions
from kubeloop._metrics import Registry

#: Seconds :func:`eventually` and :func:`running` wait by default.
DEFAULT_TIMEOUT = 30.0


async def eventually(
    check: Callable[[], bool | Awaitable[bool]],
    what: str,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float | None = None,
) -> None:
    """Wait until ``check()`` holds; raise :class:`AssertionError` naming ``what`` once
    ``timeout`` seconds have passed.

    ``check`` is a plain predicate or an async one (an ``async def``, or a lambda calling
    one). It is tried at once and then every ``interval`` seconds: by default 0.02 s for
    a plain predicate and 0.1 s for an async one, which usually asks the API server.

    >>> await eventually(lambda: "done" in log, "the first reconcile")  # doctest: +SKIP
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            held = bool(await outcome)
            pause = 0.1 if interval is None else interval
        else:
            held = bool(outcome)
            pause = 0.02 if interval is None else interval
        if held:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(pause)


def new_manager(client: Client, **options: Any) -> Manager:
    """A :class:`~kubeloop.Manager` for a test: unless ``options`` (fields of
    :class:`~kubeloop.ManagerOptions`) say otherwise, it serves no metrics and no probes,
    handles no signals and has a metrics :class:`~kubeloop.Registry` of its own, so
    several can run in one process."""
    opts: dict[str, Any] = {
        "metrics_bind_address": None,
        "health_probe_bind_address": None,
        "handle_signals": False,
        "registry": Registry(),
        **options,
    }
    return Manager(client, ManagerOptions(**opts))


@contextlib.asynccontextmanager
async def running(
    mgr: Manager, *, stop_timeout: float = DEFAULT_TIMEOUT
) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``mgr`` in a background task for the body of the ``async with``; on exit stop
    it and wait (at most ``stop_timeout`` seconds) for it to return, so what it raised
    surfaces in the test.

    >>> async with running(new_manager(client)) as task:  # doctest: +SKIP
    ...     await eventually(lambda: reconciled, "a reconcile")
    """
    task = asyncio.create_task(mgr.run())
    try:
        yield task
    finally:
        mgr.stop()
        async with asyncio.timeout(stop_timeout):
            await task
