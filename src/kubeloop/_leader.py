"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

A candidate takes the lease when it is free or its holder has not renewed for
``lease_duration`` (measured on our own clock from when we last saw the record
change, so clock skew between machines does not matter). The leader renews
every ``retry_period``; if it cannot renew for ``renew_deadline`` it gives up
leadership. On shutdown it releases the lease so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubeloop._errors import AlreadyExists, Conflict, KubeloopError, NotFound
from kubeloop._resource import LEASES, Object

if TYPE_CHECKING:
    from kubeloop._client import Client

log = logging.getLogger("kubeloop.leader")


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

    async def run(self) -> None:
        """Acquire, then renew until the lease is lost (sets :attr:`lost`) or cancelled."""
        opts = self.options
        try:
            while not self.is_leader:
                if await self._try_acquire_or_renew():
                    self._set_leader(True)
                    break
                await asyncio.sleep(opts.retry_period)
            while True:
                await asyncio.sleep(opts.retry_period)
                if await self._try_acquire_or_renew():
                    continue
                if time.monotonic() - self._last_renew > opts.renew_deadline:
                    log.error("leader lease lost", extra={"lease": opts.name})
                    self._set_leader(False)
                    self.lost.set()
                    return
        except asyncio.CancelledError:
            if self.is_leader and opts.release_on_cancel:
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
            "leaseDurationSeconds": int(self.options.lease_duration),
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
            self._last_renew = time.monotonic()
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
        self._last_renew = time.monotonic()
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
