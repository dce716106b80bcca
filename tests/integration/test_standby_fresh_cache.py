"""A standby that wins the lease does not start its workers on a cache that cannot be
shown fresh (issue 23, bug 8). Its watch hangs at the fault proxy (connected, nothing
delivered), the old leader's last change never reaches it; when the lease expires and
it takes over, its first reconcile must see that change, not the version it cached
before the watch went silent."""

from __future__ import annotations

import datetime as dt

import pytest

from kubeloop import CONFIGMAPS, LEASES, Client, Object, Request, Result
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import FaultProxy, Hang

pytestmark = pytest.mark.integration

DEADLINE = 60.0


async def test_a_standby_that_wins_the_lease_reconciles_on_a_fresh_cache(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    proxy, ns, lease_name = kube_fault_proxy, kube_namespace, "fresh-cache"
    cm: Object = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    await kube_client.create(CONFIGMAPS, {**cm, "data": {"v": "1"}}, ns)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease_name},
        # the old leader: it renews no more, so the lease expires 6 s after it is seen
        "spec": {"holderIdentity": "old-leader", "leaseDurationSeconds": 6, "renewTime": now},
    }
    await kube_client.create(LEASES, lease, ns)
    seen: list[str] = []
    async with Client(proxy.client_config("standby")) as client:
        mgr = new_manager(
            client,
            leader_election=True,
            leader_election_id=lease_name,
            leader_election_namespace=ns,
            identity="standby",
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.2,
            leader_cache_max_silence=1.0,
        )

        async def reconcile(req: Request) -> Result:
            obj = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
            seen.append((obj or {}).get("data", {}).get("v", "gone"))
            return Result()

        mgr.controller("fresh").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
        async with running(mgr):
            await eventually(
                lambda: len(mgr.cache.informers) == 1 and mgr.cache.informers[0].has_synced,
                "the standby's cache",
                DEADLINE,
            )
            [informer] = mgr.cache.informers
            # the watch goes silent: cut, and every new one hangs unanswered
            proxy.add_rule(Hang(), client="standby", verb="watch")
            proxy.cut_watches(client="standby")
            await eventually(lambda: informer.reflector.stalled_for() > 0, "a silent watch")
            # the old leader's last change, which the silent watch never delivers
            await kube_client.patch(CONFIGMAPS, "x", {"data": {"v": "2"}}, ns)
            assert mgr.elector is not None
            await eventually(lambda: seen != [], "the new leader's first reconcile", DEADLINE)
            assert mgr.elector.is_leader
    assert seen[0] == "2", f"the first reconcile read v={seen[0]}: the cache was stale"
