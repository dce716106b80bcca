"""The benchmarks' clean-up (``bench.throughput.delete_all``) deletes everything even when
the apiserver times out or drops a deletecollection half-way.

At 100,000 objects one deletecollection outlasted the apiserver's request timeout (a 504
with the rest left in place); the clean-up now deletes a page at a time, retries transient
failures, and returns only once a LIST finds nothing left. The faults are injected by the
fault proxy; the oracles are the apiserver's own LIST and the proxy's log.
"""

from __future__ import annotations

import pytest
from bench.throughput import SAMPLES, delete_all, install_crd, populate

from kubeloop import Backoff, Client
from kubeloop.envtest import ControlPlane
from kubeloop.testing.faults import DropResponse, FaultProxy, gateway_timeout

pytestmark = pytest.mark.integration

OBJECTS = 60
PAGE = 25
#: short pauses: the test is about what is retried, not how long it waits
QUICK_RETRY = Backoff(duration=0.05, factor=2.0, steps=4)


async def test_delete_all_pages_retries_and_waits_until_gone(
    kube_control_plane: ControlPlane, kube_fault_proxy: FaultProxy
) -> None:
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, qps=None) as client:
        await install_crd(client)
        namespace = await populate(client, "cleanup", OBJECTS)
        # the first page's call times out at the gateway (the server never sees it); the
        # next one deletes its page but the answer is lost (connection reset)
        kube_fault_proxy.add_rule(
            gateway_timeout(), client="bench", verb="deletecollection", times=1
        )
        kube_fault_proxy.add_rule(DropResponse(), client="bench", verb="deletecollection", times=1)
        kubeconfig = kube_fault_proxy.kubeconfig_for("bench")

        deleted = await delete_all(str(kubeconfig), namespace, page=PAGE, backoff=QUICK_RETRY)

        left, _ = await client.list_all(SAMPLES, namespace)
        assert left == []
        log = kube_fault_proxy.log
        calls = log.entries(client="bench", verb="deletecollection")
        statuses = [e.status for e in calls]
        # 504, then a dropped answer (its page deleted all the same), then pages of at most
        # PAGE until none is left: 60 = 25 (unreported) + 25 + 10
        assert statuses[0] == 504
        assert statuses[2:] == [200, 200]
        assert len(calls) == 4
        # only what the answers reported: the page whose answer was lost is not counted
        assert deleted == OBJECTS - PAGE


async def test_delete_all_of_an_empty_namespace_sends_no_delete(
    kube_control_plane: ControlPlane, kube_fault_proxy: FaultProxy
) -> None:
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, qps=None) as client:
        await install_crd(client)
        namespace = await populate(client, "cleanup-empty", 0)
    kubeconfig = kube_fault_proxy.kubeconfig_for("bench")

    assert await delete_all(str(kubeconfig), namespace, page=PAGE) == 0

    counts = kube_fault_proxy.log.counts("client", "verb")
    assert counts[("bench", "deletecollection")] == 0
    assert counts[("bench", "list")] == 1
