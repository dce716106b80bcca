"""A reconciler that is not `async` is refused at `.complete()`, naming it, instead of
failing at its first reconcile, once per object, retried forever. And TerminalError
carries the reason that its Event and its Ready=False condition show."""

from __future__ import annotations

import functools
from collections.abc import Awaitable

import pytest

from kubeloop import CONFIGMAPS, Client, ClusterConfig, Request, Result, TerminalError
from kubeloop.testing import new_manager


def builder() -> object:
    mgr = new_manager(Client(ClusterConfig("https://h"), qps=None))
    return mgr.controller("greeting").for_(CONFIGMAPS, namespace="a")


def sync_reconcile(req: Request) -> Result:
    return Result()


async def async_reconcile(req: Request, extra: int = 0) -> Result:
    return Result()


class SyncCallable:
    def __call__(self, req: Request) -> Result:
        return Result()


class AsyncCallable:
    async def __call__(self, req: Request) -> Result:
        return Result()


def wrapper(req: Request) -> Awaitable[Result]:
    return async_reconcile(req, 1)


def test_a_sync_function_is_refused_by_name() -> None:
    with pytest.raises(
        TypeError,
        match=r"controller greeting: the reconciler sync_reconcile is a"
        r" plain function; it must be `async def sync_reconcile",
    ):
        builder().complete(sync_reconcile)  # type: ignore[attr-defined]


def test_a_sync_callable_object_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"SyncCallable.__call__ is a plain function"):
        builder().complete(SyncCallable())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "reconciler",
    [
        async_reconcile,
        functools.partial(async_reconcile, extra=2),
        AsyncCallable(),
        lambda req: async_reconcile(req, 3),
        wrapper,
    ],
    ids=["async-def", "partial", "async-call", "lambda", "annotated-wrapper"],
)
def test_async_reconcilers_are_accepted(reconciler: object) -> None:
    controller = builder().complete(reconciler)  # type: ignore[attr-defined]
    assert controller.name == "greeting"


def test_terminal_error_reason() -> None:
    assert TerminalError("boom").reason == "ReconcileFailed"
    assert TerminalError("odd size", reason="InvalidSpec").reason == "InvalidSpec"
    assert str(TerminalError("odd size", reason="InvalidSpec")) == "odd size"
    with pytest.raises(ValueError, match="CamelCase"):
        TerminalError("x", reason="not a reason")
