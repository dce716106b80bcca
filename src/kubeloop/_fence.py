"""The write fence: a leader that may have lost its lease sends no writes.

Leader election alone cannot stop a paused or partitioned leader from writing:
when its process thaws, the reconcile it was in the middle of runs on before the
elector gets a chance to notice that the lease is gone, and its next write lands
after the new leader's first. The fence closes that gap. It wraps the client's
transport, the last step before bytes leave the process (after any client-side
rate-limit wait), and refuses a write made on behalf of a leader-only controller
unless the elector's own clock says the lease is still held
(:meth:`~kubeloop._leader.LeaderElector.lease_left`).

A check at the moment of sending is not enough: a write sent a moment before the
lease runs out can sit in a slow network, a proxy's queue or a starved API server
and commit after the standby's first write. So a fenced write is also bounded by
the time the lease has left, on both ends: the client gives up then (the
connection closes, and neither a proxy nor the API server, which cancels a
request whose client has gone, goes on with it), and the request carries
``?timeout=`` so the API server abandons it by then even if it arrived in time
but is stuck (a slow etcd, a long admission chain). The standby waits
``lease_duration - renew_deadline`` longer than that; the margin is what a write
already handed to etcd has to commit in.

Which writes are fenced is decided by the ``kubeloop.controller`` context
variable, which every reconcile sets (and which tasks it starts inherit): the
elector's own Lease updates, Events and controllers that run without leader
election pass through.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from kubeloop import _log
from kubeloop._errors import KubeloopError, RequestTimeout
from kubeloop._transport import Response, StreamResponse, Transport


class NotLeader(KubeloopError):
    """A write was refused: this process no longer (by its own clock) holds the lease."""


class FencedTransport:
    """A :class:`~kubeloop._transport.Transport` that refuses fenced writes and bounds
    the ones it lets through by the lease.

    Args:
        inner: the transport that does the I/O.
        fenced: whether a write for this controller name must hold the lease.

    Set :attr:`lease_left` to the elector's ``lease_left``; until then every fenced
    write is refused (no lease, no leader-only writes).
    """

    def __init__(self, inner: Transport, fenced: Callable[[str], bool]) -> None:
        self.inner = inner
        self._fenced = fenced
        #: Seconds the lease is still held by our clock (<= 0: not held).
        self.lease_left: Callable[[], float] | None = None
        #: Writes refused so far (for logs and tests; the oracle is the apiserver).
        self.refused = 0
        #: Fenced writes abandoned because the lease ran out while they were in flight.
        self.abandoned = 0

    def _left(self, method: str, path: str) -> float | None:
        """None when the request is not fenced; else the seconds it may take."""
        if method == "GET":
            return None
        controller = _log.CONTROLLER.get()
        if not controller or not self._fenced(controller):
            return None
        left = self.lease_left() if self.lease_left is not None else 0.0
        if left > 0.0:
            return left
        self.refused += 1
        raise NotLeader(
            f"refusing {method} {path} for controller {controller}: "
            "the leader lease is not held (lost, expired or never acquired)"
        )

    # keyword arguments pass through untouched, so the fence keeps working whatever
    # options the transport grows
    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        left = self._left(method, path)
        if left is None:
            return await self.inner.request(method, path, **kwargs)
        own = kwargs.get("timeout")
        bound = left if own is None else min(own, left)
        params = dict(kwargs.get("params") or {})
        # whole milliseconds, rounded down: the server must give up no later than we do
        params["timeout"] = f"{max(1, math.floor(bound * 1000))}ms"
        kwargs["params"] = params
        kwargs["timeout"] = bound
        # absolute, from now: the transport counts the time it spends on the session
        # and the credentials against it (and shortens ?timeout= to what is left)
        kwargs["deadline"] = time.monotonic() + bound
        try:
            return await self.inner.request(method, path, **kwargs)
        except RequestTimeout as err:
            if own is not None and own <= left:
                raise  # the caller's own deadline, not the lease's
            self.abandoned += 1
            raise NotLeader(
                f"abandoned {method} {path}: the leader lease ran out while it was in flight"
            ) from err

    def stream(
        self, method: str, path: str, **kwargs: Any
    ) -> AbstractAsyncContextManager[StreamResponse]:
        # streams are watches (GETs); a fenced non-GET stream has no bound to carry
        self._left(method, path)
        return self.inner.stream(method, path, **kwargs)

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # anything else the wrapped transport offers (counters, options) stays reachable
        return getattr(self.inner, name)
