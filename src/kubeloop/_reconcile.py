"""The plain values where a controller and a reconciler meet."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubeloop._resource import HashedOnce


@dataclass(frozen=True, order=True, slots=True)
class Request(HashedOnce):
    """Which object to reconcile: only its key, never a snapshot of it.

    A reconciler reads the current state itself, so several events for one
    object collapse into one reconcile.
    """

    name: str
    namespace: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.name, self.namespace)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (Request, (self.name, self.namespace))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What the reconciler wants next.

    ``Result()``: done, nothing until the next event. ``Result(requeue_after=30)``:
    run again in 30 s (and forget any failure backoff). ``Result(requeue=True)``:
    run again after the per-item backoff.
    """

    requeue: bool = False
    requeue_after: float | None = None


Reconciler = Callable[[Request], Awaitable[Result | None]]
