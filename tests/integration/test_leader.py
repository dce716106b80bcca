"""Leader election between two candidates against the real kube-apiserver.

Two Managers (separate clients, one lease) run the same controller: only the
leader reconciles, and a stopped leader hands over at once. A leader that dies
without releasing the lease is replaced only once the lease has expired. The
assertions are about who did what, and in which order, never about seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kubeloop import (
    CONFIGMAPS,
    LEASES,
    Client,
    LeaderElectionOptions,
    LeaderElector,
    Manager,
    Object,
    Request,
    Resource,
    Result,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager

pytestmark = pytest.mark.integration

DEADLINE = 30.0
#: Short lease timings, in controller-runtime's proportions (15 s / 10 s / 2 s).
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


class LeaseReads:
    """A RequestObserver counting one client's reads of Leases (its election attempts)."""

    def __init__(self) -> None:
        self.gets = 0

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        if verb == "get" and resource == LEASES:
            self.gets += 1


def configmap(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


@contextlib.asynccontextmanager
async def candidate(kube_control_plane: ControlPlane) -> AsyncIterator[tuple[Client, LeaseReads]]:
    """A client of its own for one candidate, and a count of its lease reads."""
    reads = LeaseReads()
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, observer=reads) as client:
        yield client, reads


async def lease_spec(client: Client, name: str, ns: str) -> dict[str, Any]:
    lease = await client.get(LEASES, name, ns)
    spec: dict[str, Any] = lease["spec"]
    return spec


async def test_only_the_leader_reconciles_and_a_stopped_leader_hands_over(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    lease_name = "ctl-leader"
    log: list[tuple[str, str]] = []  # (who, what): reconciles and milestones, in order

    def candidate_manager(client: Client, identity: str) -> Manager:
        mgr = new_manager(
            client,
            name="leader-test",
            leader_election=True,
            leader_election_id=lease_name,
            leader_election_namespace=ns,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            identity=identity,
            health_probe_bind_address="127.0.0.1:0",
        )

        async def reconcile(req: Request) -> Result:
            log.append((identity, req.name))
            return Result()

        mgr.controller("configmaps").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
        # wiring that touches the cache up front (e.g. adding an index), as the operator's
        # Autoscaler does: on a standby the informer is started and synced (warm-up), but
        # no worker runs
        mgr.cache.informer(CONFIGMAPS, namespace=ns).add_index(
            "name", lambda o: [o["metadata"]["name"]]
        )
        return mgr

    def reconciled_by(who: str) -> set[str]:
        return {what for w, what in log if w == who}

    await kube_client.create(CONFIGMAPS, configmap("before"), ns)
    async with (
        candidate(kube_control_plane) as (client_a, _),
        candidate(kube_control_plane) as (client_b, reads_b),
    ):
        mgr_a, mgr_b = candidate_manager(client_a, "a"), candidate_manager(client_b, "b")
        run_a = asyncio.create_task(mgr_a.run())
        run_b: asyncio.Task[None] | None = None
        try:
            await eventually(lambda: "before" in reconciled_by("a"), "a to lead and reconcile")
            run_b = asyncio.create_task(mgr_b.run())
            await kube_client.create(CONFIGMAPS, configmap("while-a-leads"), ns)
            await eventually(lambda: "while-a-leads" in reconciled_by("a"), "a to reconcile news")
            # b is a live candidate: it keeps reading the lease and is refused each time
            await eventually(lambda: reads_b.gets >= 3, "b to try for the lease a few times")
            assert reconciled_by("b") == set()
            assert mgr_b.elector is not None
            assert not mgr_b.elector.is_leader
            # a standby is ready (its warm caches have synced), or a rolling update of a
            # two-replica Deployment would never finish
            async with (
                aiohttp.ClientSession() as http,
                http.get(mgr_b.endpoints.url("probes") + "/readyz") as resp,
            ):
                assert resp.status == 200, await resp.text()
            held = await lease_spec(kube_client, lease_name, ns)
            assert held["holderIdentity"] == "a"

            mgr_a.stop()
            await asyncio.wait_for(run_a, DEADLINE)
            log.append(("a", "<stopped>"))
            # a graceful stop gives the lease up (b may have taken it already)
            released = await lease_spec(kube_client, lease_name, ns)
            assert released["holderIdentity"] in ("", "b")
            await kube_client.create(CONFIGMAPS, configmap("after-a-stopped"), ns)
            await eventually(
                lambda: {"before", "while-a-leads", "after-a-stopped"} <= reconciled_by("b"),
                "b to take over and reconcile everything",
            )
            taken = await lease_spec(kube_client, lease_name, ns)
        finally:
            for mgr, task in ((mgr_a, run_a), (mgr_b, run_b)):
                mgr.stop()
                if task is not None:
                    await asyncio.wait_for(task, DEADLINE)

    assert taken["holderIdentity"] == "b"
    assert taken["leaseTransitions"] == held["leaseTransitions"] + 1
    # strictly one leader at a time: all of a's work, a's stop, then b's work
    whos = [who for who, _ in log]
    stopped = log.index(("a", "<stopped>"))
    assert set(whos[:stopped]) == {"a"}
    assert set(whos[stopped + 1 :]) == {"b"}


async def test_a_leader_killed_without_release_is_replaced_after_the_lease_expires(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    lease_name = "killed-leader"
    log: list[str] = []

    def options(identity: str) -> LeaderElectionOptions:
        return LeaderElectionOptions(
            name=lease_name,
            namespace=ns,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            release_on_cancel=False,  # as if the process were killed: no goodbye
        )

    async with (
        candidate(kube_control_plane) as (client_a, _),
        candidate(kube_control_plane) as (client_b, reads_b),
    ):
        elector_a = LeaderElector(
            client_a, options("a"), on_change=lambda leading: log.append(f"a leading={leading}")
        )
        elector_b = LeaderElector(
            client_b, options("b"), on_change=lambda leading: log.append(f"b leading={leading}")
        )
        task_a = asyncio.create_task(elector_a.run())
        task_b: asyncio.Task[None] | None = None
        try:
            await asyncio.wait_for(elector_a.became_leader.wait(), DEADLINE)
            task_b = asyncio.create_task(elector_b.run())
            await eventually(lambda: reads_b.gets >= 3, "b to try for the lease a few times")
            assert not elector_b.is_leader
            held = await lease_spec(kube_client, lease_name, ns)

            task_a.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task_a
            log.append("a killed")
            reads_at_kill = reads_b.gets
            # nobody released it: the lease still names a
            orphaned = await lease_spec(kube_client, lease_name, ns)
            assert orphaned["holderIdentity"] == "a"

            await asyncio.wait_for(elector_b.became_leader.wait(), DEADLINE)
            reads_to_take_over = reads_b.gets - reads_at_kill
            taken = await lease_spec(kube_client, lease_name, ns)
        finally:
            for task in (task_a, task_b):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    assert log == ["a leading=True", "a killed", "b leading=True"]
    # b waited the lease out (several refused attempts after the kill), not a release
    assert reads_to_take_over >= 3
    assert held["holderIdentity"] == "a"
    assert taken["holderIdentity"] == "b"
    assert taken["leaseTransitions"] == held["leaseTransitions"] + 1
    assert taken["acquireTime"] != held["acquireTime"]
