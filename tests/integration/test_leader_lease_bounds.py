"""Issue 23, bug 8, the leader's side: the lease length it publishes, and what it does
when it sees another holder.

- ``leaseDurationSeconds`` is an integer: the configured length is published rounded
  up, never down. A standby waits what the record says, and the leader's own fence
  (``renew_deadline``, shorter than the configured length) must run out first; with
  ``int()`` a 2.99 s lease was published as 2 s and the standby took over while the
  old leader still held it by its own clock.
- A leader that reads the Lease and finds another holder stops leading at once (its
  fence closes: ``lease_left() == 0``), instead of writing on until its renew deadline.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kubeloop import LEASES, Client, LeaderElectionOptions, LeaderElector
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually
from tests.integration.test_leader import candidate

pytestmark = pytest.mark.integration

DEADLINE = 30.0


async def test_the_lease_is_published_rounded_up_and_outlasts_the_old_leaders_fence(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns, name = kube_namespace, "rounded-lease"

    # renew_deadline close under a fractional lease_duration: int() would publish 2 s
    def options(identity: str) -> LeaderElectionOptions:
        return LeaderElectionOptions(
            name=name,
            namespace=ns,
            identity=identity,
            lease_duration=2.99,
            renew_deadline=2.9,
            retry_period=0.2,
            release_on_cancel=False,  # a leader that dies without a goodbye
        )

    left_at_takeover: list[float] = []
    async with (
        candidate(kube_control_plane) as (client_a, _),
        candidate(kube_control_plane) as (client_b, reads_b),
    ):
        elector_a = LeaderElector(client_a, options("a"))
        elector_b = LeaderElector(
            client_b,
            options("b"),
            # the moment b leads: does a still hold the lease by its own clock?
            on_change=lambda leading: left_at_takeover.append(elector_a.lease_left()),
        )
        task_a = asyncio.create_task(elector_a.run())
        task_b: asyncio.Task[None] | None = None
        try:
            await asyncio.wait_for(elector_a.became_leader.wait(), DEADLINE)
            published = (await kube_client.get(LEASES, name, ns))["spec"]
            task_b = asyncio.create_task(elector_b.run())
            await eventually(lambda: reads_b.gets >= 2, "b to try for the lease")
            task_a.cancel()  # killed: a's fence runs out renew_deadline after its last renewal
            with contextlib.suppress(asyncio.CancelledError):
                await task_a
            await asyncio.wait_for(elector_b.became_leader.wait(), DEADLINE)
        finally:
            for task in (task_a, task_b):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    assert left_at_takeover == [0.0], "b took over while a still held the lease by its clock"
    assert published["leaseDurationSeconds"] == 3, "2.99 s is published as 3, not 2"
