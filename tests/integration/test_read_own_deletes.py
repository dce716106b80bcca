"""A cache read right after our own delete does not show the object (issue 23, bug 3).

The operator's watch loses DELETED events at the fault proxy, so its informer keeps the
object: before deletes were registered as expectations, a list right after our delete
still returned it (the over-delete client-go's expectations exist to prevent). Now the
read waits for the informer to see the delete, bounded, then reads the lagging keys live."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Client, Object
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import DropEvents, FaultProxy
from tests import factories

pytestmark = pytest.mark.integration


def _cm(name: str) -> Object:
    return factories.configmap(name)


async def test_a_read_after_our_delete_does_not_show_the_object(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    proxy.add_rule(DropEvents(types=("DELETED",)), client="op", verb="watch")
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)
        mgr.cache.read_your_writes_timeout = 0.5
        async with running(mgr):
            assert await mgr.cache.list(CONFIGMAPS, ns) == []  # starts and syncs it
            (inf,) = mgr.cache.informers
            for name in ("a", "b"):
                await client.create(CONFIGMAPS, _cm(name), ns)
            await eventually(lambda: f"{ns}/a" in inf.store and f"{ns}/b" in inf.store, "both")
            await client.delete(CONFIGMAPS, "a", ns)
            names = [o["metadata"]["name"] for o in await mgr.cache.list(CONFIGMAPS, ns)]
            assert names == ["b"]
            assert await mgr.cache.get(CONFIGMAPS, "a", ns) is None
            # the informer itself never saw the delete: the read, not the watch, hid it
            assert f"{ns}/a" in inf.store
            # a recreate after our delete is read at its new incarnation
            new = await client.create(CONFIGMAPS, {**_cm("a"), "data": {"v": "2"}}, ns)
            got = await mgr.cache.get(CONFIGMAPS, "a", ns)
            assert got is not None
            assert got["metadata"]["uid"] == new["metadata"]["uid"]
