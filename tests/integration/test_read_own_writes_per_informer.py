"""Read-your-writes holds for the informer a read uses, not just for the kind (issue 23,
bug 3). Two informers of ConfigMaps: a cluster-wide unselected one, and one for one
namespace with a label selector (a ``for_`` with a selector reads from it). The fault
proxy drops the namespaced watch's events, so only the cluster-wide one sees our writes:
before expectations were kept per informer, its event settled the write and a read from
the lagging one returned the old version; a freshly created object matching the
selector was dropped from the live merge."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Client, Object
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import DropEvents, FaultProxy
from tests import factories
from tests.integration.ryw_support import selected_informer

pytestmark = pytest.mark.integration

SELECTOR = "app=x"


def _cm(name: str, v: str) -> Object:
    return factories.configmap(name, labels={"app": "x"}, data={"v": v})


async def test_a_write_seen_by_one_informer_is_still_awaited_on_the_other(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)
        mgr.cache.read_your_writes_timeout = 0.5
        async with running(mgr):
            await client.create(CONFIGMAPS, _cm("a", "1"), ns)
            await mgr.cache.list(CONFIGMAPS)  # the cluster-wide, unselected informer
            selected = await selected_informer(mgr.cache, ns, SELECTOR)
            assert f"{ns}/a" in selected.store
            wide = next(i for i in mgr.cache.informers if i is not selected)
            # from now on the namespaced watch delivers nothing
            proxy.add_rule(DropEvents(), client="op", verb="watch", namespace=ns)
            proxy.cut_watches(client="op")
            await eventually(
                lambda: len(proxy.open_watches("op")) == 2, "both watches reopened", timeout=30
            )

            await client.patch(CONFIGMAPS, "a", {"data": {"v": "2"}}, ns)
            await client.create(CONFIGMAPS, _cm("b", "1"), ns)
            await eventually(lambda: f"{ns}/b" in wide.store, "the cluster-wide informer")

            got = await mgr.cache.get(CONFIGMAPS, "a", ns, label_selector=SELECTOR)
            assert got is not None
            assert got["data"] == {"v": "2"}
            listed = await mgr.cache.list(CONFIGMAPS, ns, label_selector=SELECTOR)
            assert sorted((o["metadata"]["name"], o["data"]["v"]) for o in listed) == [
                ("a", "2"),
                ("b", "1"),
            ]
            # the selected informer really lags: the reads above did not come from it
            assert f"{ns}/b" not in selected.store


async def test_a_write_outside_a_selector_is_not_awaited_on_its_informer(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    """The selected informer is never sent an object its selector leaves out, and its
    watch version moves only with objects inside it: a read from it must not wait for
    our write to one outside (before, it waited the whole timeout and read it live)."""
    proxy, ns = kube_fault_proxy, kube_namespace
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)
        mgr.cache.read_your_writes_timeout = 2.0
        async with running(mgr):
            await client.create(CONFIGMAPS, _cm("a", "1"), ns)
            await selected_informer(mgr.cache, ns, SELECTOR)
            outside = {**_cm("z", "1"), "metadata": {"name": "z", "labels": {"app": "y"}}}
            await client.create(CONFIGMAPS, outside, ns)
            listed = await mgr.cache.list(CONFIGMAPS, ns, label_selector=SELECTOR)
            assert [o["metadata"]["name"] for o in listed] == ["a"]
            assert mgr.cache.live_read_fallbacks == 0
