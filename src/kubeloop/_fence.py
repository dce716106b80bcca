"""The write fence: a leader that may have lost its lease sends no writes.

Leader election alone cannot stop a paused or partitioned leader from writing:
when its process thaws, the reconcile it was in the middle of runs on before the
elector gets a chance to notice that the lease is gone, and its next write lands
after the new leader's first. The fence closes that gap. It wraps the client's
transport, the last step before bytes leave the process (after any client-side
rate-limit wait), and refuses a write made on behalf of a leader-only controller
unless the elector's own clock says the lease is still held
(:meth:`~kubeloop._leader.LeaderElector.lease_valid`).

Which writes are fenced is decided by the ``kubeloop.controller`` context
variable, which every reconcile sets (and which tasks it starts inherit): the
elector's own Lease updates, Events and controllers that run without leader
election pass through.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from kubeloop import _log
from kubeloop._errors import KubeloopError
from kubeloop._transport import Response, StreamResponse, Transport


class NotLeader(KubeloopError):
    """A write was refused: this process no longer (by its own clock) holds the lease."""


class FencedTransport:
    """A :class:`~kubeloop._transport.Transport` that refuses fenced writes.

    Args:
        inner: the transport that does the I/O.
        fenced: whether a write for this controller name must hold the lease.

    Set :attr:`holds_lease` to the elector's ``lease_valid``; until then every fenced
    write is refused (no lease, no leader-only writes).
    """

    def __init__(self, inner: Transport, fenced: Callable[[str], bool]) -> None:
        self.inner = inner
        self._fenced = fenced
        self.holds_lease: Callable[[], bool] | None = None
        #: Writes refused so far (for logs and tests; the oracle is the apiserver).
        self.refused = 0

    def _check(self, method: str, path: str) -> None:
        if method == "GET":
            return
        controller = _log.CONTROLLER.get()
        if not controller or not self._fenced(controller):
            return
        if self.holds_lease is not None and self.holds_lease():
            return
        self.refused += 1
        raise NotLeader(
            f"refusing {method} {path} for controller {controller}: "
            "the leader lease is not held (lost, expired or never acquired)"
        )

    # keyword arguments pass through untouched, so the fence keeps working whatever
    # options the transport grows
    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self._check(method, path)
        return await self.inner.request(method, path, **kwargs)

    def stream(
        self, method: str, path: str, **kwargs: Any
    ) -> AbstractAsyncContextManager[StreamResponse]:
        self._check(method, path)
        return self.inner.stream(method, path, **kwargs)

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # anything else the wrapped transport offers (counters, options) stays reachable
        return getattr(self.inner, name)
