"""The write fence against the real kube-apiserver behind the fault proxy: a leader-only
write still in flight when the lease runs out is abandoned and never lands, however late
the network delivers it (the proxy's ``hold`` partition delivers held requests when it
heals, as a queue that drains late; ``test_faults_proxy`` shows an unfenced write
committed late that way)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

from kubeloop import CONFIGMAPS, Client, NotFound, NotLeader, Object, _log
from kubeloop._fence import FencedTransport
from kubeloop.testing import eventually
from kubeloop.testing.faults import FaultProxy

pytestmark = pytest.mark.integration

DEADLINE = 60.0


def cm(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


@contextlib.asynccontextmanager
async def fenced_client(
    proxy: FaultProxy, name: str, lease_left: Callable[[], float]
) -> AsyncIterator[tuple[Client, FencedTransport]]:
    async with Client(proxy.client_config(name)) as client:
        fence = FencedTransport(client._transport, lambda controller: controller == "leader-only")
        fence.lease_left = lease_left
        client._transport = fence
        token = _log.CONTROLLER.set("leader-only")
        try:
            yield client, fence
        finally:
            _log.CONTROLLER.reset(token)


async def test_a_fenced_write_held_past_the_lease_is_abandoned_and_never_lands(
    kube_fault_proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    expires = time.monotonic() + 1.5
    async with fenced_client(proxy, "old", lambda: expires - time.monotonic()) as (old, fence):
        cut = proxy.partition("old", mode="hold")
        with pytest.raises(NotLeader, match="ran out while it was in flight"):
            await asyncio.wait_for(old.create(CONFIGMAPS, cm("from-old"), ns), DEADLINE)
        # the standby takes over and writes; only then does the network deliver
        async with Client(proxy.client_config("new")) as new:
            await new.create(CONFIGMAPS, cm("from-new"), ns)
        proxy.heal(cut)
        # after the lease, nothing is even sent
        with pytest.raises(NotLeader, match="lease is not held"):
            await old.create(CONFIGMAPS, cm("after"), ns)
    [held] = proxy.log.entries(client="old")
    await eventually(lambda: held.finished is not None, "the held request to end")
    assert (held.ended, held.status) == ("client", 0)  # given up, never forwarded
    assert (fence.abandoned, fence.refused) == (1, 1)
    for name in ("from-old", "after"):
        with pytest.raises(NotFound):
            await kube_client.get(CONFIGMAPS, name, ns)
    assert [(e.client, e.name) for e in proxy.log.writes()] == [("new", "from-new")]


async def test_a_fenced_write_tells_the_apiserver_its_deadline(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    async with fenced_client(proxy, "leader", lambda: 7.25) as (leader, _):
        await leader.create(CONFIGMAPS, cm("bounded"), ns)
        await leader.get(CONFIGMAPS, "bounded", ns)  # reads are not fenced
    create, get = proxy.log.entries(client="leader")
    assert (create.verb, create.status) == ("create", 201)
    # what is left of the 7.25 s when the request leaves, after session and credentials
    query, _, millis = create.query.rpartition("&timeout=")
    assert query == "fieldManager=kubeloop-leader-only"
    assert millis.endswith("ms")
    assert 6000 < int(millis[:-2]) <= 7250
    assert (get.verb, get.status, get.query) == ("get", 200, "")
