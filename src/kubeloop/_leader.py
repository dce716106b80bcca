"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

A candidate takes the lease when it is free or its holder has not renewed for
``lease_duration`` (measured on our own clock from when we last saw the record
change, so clock skew between machines does not matter). The leader renews
every ``retry_period``; if it cannot renew for ``renew_deadline`` it gives up
leadership; if it reads the Lease and finds another holder, it steps down at once
(the record is the truth, and the write fence closes with it). On shutdown it
releases the lease so a standby takes over at once.

Every round of API calls is bounded by ``renew_deadline`` (client-go runs its
renewals under a context with that timeout): an apiserver that hangs, or a
network that swallows packets, cannot keep a leader leading, because the round
is cancelled and the deadline passes. The leader's own view of its lease is
:meth:`LeaderElector.lease_valid`: true until ``renew_deadline`` after the start
of the last round that renewed it. A standby cannot take over before
``lease_duration`` has passed since it saw that renewal, which is later, so a
writer that checks ``lease_valid`` before each write never overlaps the next
leader, even if its process was frozen (SIGSTOP, a VM pause) and thaws late.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubeloop._errors import AlreadyExists, Conflict, KubeloopError, NotFound
from kubeloop._resource import LEASES, Object

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.leader")

#: client-go's ``JitterFactor``: renew_deadline must exceed this many retry periods.
_JITTER = 1.2


@dataclass
class LeaderElectionOptions:
    """Timings default to controller-runtime's (15 s / 10 s / 2 s)."""

    name: str
    namespace: str = "default"
    #: This candidate's identity (default: hostname_pid, set by the manager).
    identity: str = ""
    #: How long a lease is valid without renewal (default 15 s).
    lease_duration: float = 15.0
    #: A leader that cannot renew for this long steps down (default 10 s).
    renew_deadline: float = 10.0
    #: How often to try to acquire or renew (default 2 s).
    retry_period: float = 2.0
    #: Release the lease on shutdown so a standby need not wait it out (default True).
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        # client-go's checks: the no-overlap argument needs renew_deadline < lease_duration
        # (a leader gives up before a standby may take over), and a deadline that leaves
        # room for more than one attempt
        if self.retry_period <= 0:
            raise ValueError(f"retry_period must be > 0, got {self.retry_period}")
        if self.renew_deadline <= _JITTER * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}) must be greater than "
                f"{_JITTER} x retry_period ({self.retry_period})"
            )
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"lease_duration ({self.lease_duration}) must be greater than "
                f"renew_deadline ({self.renew_deadline})"
            )


def published_lease_seconds(lease_duration: float) -> int:
    """``leaseDurationSeconds`` for a lease of ``lease_duration`` seconds: rounded up.

    The field is an integer, and a standby waits what the record says. Rounding down
    would let it take over before our own view of the lease (``renew_deadline``, less
    than ``lease_duration``) has run out: a 2.99 s lease published as 2 s overlaps a
    2.9 s renew deadline. Rounding up only makes the standby wait longer (less than a
    second), so the fence's margin (``lease_duration - renew_deadline``) is kept whole;
    keeping our own deadline on the precise value is then safe. At least 1: 0 means
    "unset" to readers."""
    return max(1, math.ceil(lease_duration))


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: Client,
        options: LeaderElectionOptions,
        *,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.on_change = on_change
        self.is_leader = False
        self.became_leader = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    def lease_valid(self) -> bool:
        """Whether we hold the lease by our own clock: leader, and less than
        ``renew_deadline`` since the start of the round that last renewed it."""
        return self.lease_left() > 0.0

    def lease_left(self) -> float:
        """Seconds we still hold the lease by our own clock (0 when not leader).

        The write fence bounds every leader-only request by it: a write still in
        flight when it runs out is abandoned, so it cannot land after a standby has
        taken over (which takes ``lease_duration - renew_deadline`` longer)."""
        if not self.is_leader:
            return 0.0
        return max(0.0, self._last_renew + self.options.renew_deadline - time.monotonic())

    async def _round(self, deadline: float) -> bool:
        """One acquire-or-renew attempt, cancelled at ``deadline`` (monotonic)."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(max(0.0, deadline - started)):
                ok = await self._try_acquire_or_renew()
        except TimeoutError:
            log.warning(
                "lease round timed out",
                extra={"lease": self.options.name, "identity": self.options.identity},
            )
            return False
        if ok:
            # the lease counts from before the request was sent: the record on the server
            # is at least that fresh, so our view never outlasts the standby's
            self._last_renew = started
        return ok

    async def run(self) -> None:
        """Acquire, then renew until the lease is lost (sets :attr:`lost`) or cancelled."""
        opts = self.options
        try:
            while not self.is_leader:
                if await self._round(time.monotonic() + opts.renew_deadline):
                    self._set_leader(True)
                    break
                await asyncio.sleep(opts.retry_period)
            while True:
                await asyncio.sleep(opts.retry_period)
                deadline = self._last_renew + opts.renew_deadline
                if time.monotonic() < deadline and await self._round(deadline):
                    continue
                if not self.is_leader:  # the round saw another holder
                    self.lost.set()
                    return
                if time.monotonic() >= deadline:
                    log.error(
                        "leader lease lost: not renewed within the renew deadline",
                        extra={"lease": opts.name, "identity": opts.identity},
                    )
                    self._set_leader(False)
                    self.lost.set()
                    return
        except asyncio.CancelledError:
            if self.is_leader and opts.release_on_cancel and self.lease_valid():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(opts.renew_deadline):
                        await asyncio.shield(self.release())
            raise

    def _set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        if leading:
            self.became_leader.set()
            log.info(
                "became leader",
                extra={"lease": self.options.name, "identity": self.options.identity},
            )
        if self.on_change:
            self.on_change(leading)

    def _spec(self, transitions: int, acquire: str | None) -> dict[str, Any]:
        now = _now()
        return {
            "holderIdentity": self.options.identity,
            "leaseDurationSeconds": published_lease_seconds(self.options.lease_duration),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        opts = self.options
        try:
            lease: Object = await self.client.get(LEASES, opts.name, opts.namespace)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": opts.name, "namespace": opts.namespace},
                "spec": self._spec(0, None),
            }
            try:
                await self.client.create(LEASES, body, opts.namespace)
            except (AlreadyExists, KubeloopError) as err:
                log.debug("lease create lost: %s", err)
                return False
            return True
        except KubeloopError as err:
            log.warning("cannot read lease: %s", err)
            return False
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), time.monotonic()
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or opts.lease_duration)
        expired = time.monotonic() > self._observed_at + duration
        if holder and holder != opts.identity and not expired:
            if self.is_leader:
                # somebody else holds it now (by the record, which is the truth): stop
                # at once, which closes the write fence, rather than write on until
                # our renew deadline
                log.error(
                    "leader lease taken by another holder; stepping down",
                    extra={"lease": opts.name, "identity": opts.identity, "holder": holder},
                )
                self._set_leader(False)
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != opts.identity:
            transitions += 1
            acquire = None
        else:
            acquire = spec.get("acquireTime")
        lease["spec"] = self._spec(transitions, acquire)
        try:
            updated = await self.client.update(LEASES, lease)
        except (Conflict, KubeloopError) as err:
            log.debug("lease update lost: %s", err)
            return False
        self._observed, self._observed_at = dict(updated.get("spec") or {}), time.monotonic()
        return True

    async def release(self) -> None:
        """Give the lease up: clear the holder so a standby acquires it at once."""
        opts = self.options
        try:
            lease = await self.client.get(LEASES, opts.name, opts.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != opts.identity:
                return
            lease["spec"] = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": _now(),
            }
            await self.client.update(LEASES, lease)
            log.info("released leader lease", extra={"lease": opts.name})
        except KubeloopError as err:
            log.warning("could not release lease: %s", err)
        finally:
            self.is_leader = False
