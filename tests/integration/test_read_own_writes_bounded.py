"""A read after many of our writes that the watch has not delivered waits for them
together, at most ``read_your_writes_timeout`` in all, then reads them live (issue 23,
bug 3: the wait was serial, the timeout once per pending object, so a list after 8
lagging writes took 8 timeouts). The fault proxy drops the operator's MODIFIED events,
so the 8 patches never arrive by watch; what is asserted is how many waits ran out of time
(the cache's count): one for the read, where the serial wait ran out once per write."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Client, Object
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import DropEvents, FaultProxy
from tests import factories

pytestmark = pytest.mark.integration

N = 8
TIMEOUT = 1.0


def _cm(name: str) -> Object:
    return factories.configmap(name)


async def test_a_read_waits_once_for_all_its_lagging_writes(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    proxy.add_rule(DropEvents(types=("MODIFIED",)), client="op", verb="watch")
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)
        mgr.cache.read_your_writes_timeout = TIMEOUT
        async with running(mgr):
            await mgr.cache.list(CONFIGMAPS, ns)
            (inf,) = mgr.cache.informers
            names = [f"cm-{i}" for i in range(N)]
            for name in names:
                await client.create(CONFIGMAPS, _cm(name), ns)
            await eventually(lambda: len(inf.store) == N, "the creates, by watch")
            for name in names:
                await client.patch(CONFIGMAPS, name, {"data": {"v": "2"}}, ns)
            objs = await mgr.cache.list(CONFIGMAPS, ns)
            assert sorted((o["metadata"]["name"], o.get("data")) for o in objs) == [
                (name, {"v": "2"}) for name in names
            ]
            assert mgr.cache.live_read_fallbacks == N
            # one wait ran out for the whole read; the serial wait ran out once per write
            assert mgr.cache.expired_read_waits == 1
