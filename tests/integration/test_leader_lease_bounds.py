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
from typing import Any

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


async def test_a_leader_that_sees_another_holder_stops_leading_at_once(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns, name = kube_namespace, "usurped-lease"
    # a long renew deadline: without the fix a would lead on for 20 s
    options = LeaderElectionOptions(
        name=name,
        namespace=ns,
        identity="a",
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=0.2,
        release_on_cancel=False,
    )
    async with candidate(kube_control_plane) as (client_a, reads_a):
        elector = LeaderElector(client_a, options)
        task = asyncio.create_task(elector.run())
        try:
            await asyncio.wait_for(elector.became_leader.wait(), DEADLINE)
            await eventually(lambda: elector.lease_left() > 15.0, "a renewed lease")
            # someone else holds it now (an operator's mistake, a clock gone wrong)
            lease: dict[str, Any] = await kube_client.get(LEASES, name, ns)
            lease["spec"]["holderIdentity"] = "intruder"
            await kube_client.update(LEASES, lease)
            reads = reads_a.gets
            # a has stepped down, or read the Lease twice since the change (the second
            # read certainly started after it) and still leads
            await eventually(
                lambda: elector.lost.is_set() or reads_a.gets >= reads + 2,
                "a to step down or read the lease again",
            )
            assert not elector.is_leader, "a leads on although the lease names another holder"
            assert elector.lease_left() == 0.0, "a's fence still lets writes through"
            assert elector.lost.is_set()
            await asyncio.wait_for(task, DEADLINE)  # run() returns: leading has ended
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        spec = (await kube_client.get(LEASES, name, ns))["spec"]
        assert spec["holderIdentity"] == "intruder", "a did not take the lease back"
