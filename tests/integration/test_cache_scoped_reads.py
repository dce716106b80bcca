"""Reads through a label-scoped informer: a controller scoped with
``for_(..., label_selector=s)`` reads its objects from that same informer, and no
cluster-wide informer is started behind its back.
"""

from __future__ import annotations

import asyncio

import pytest

from kubeloop import CONFIGMAPS, Cache, Client
from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration


def _configmap(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


async def test_reads_with_a_selector_use_the_scoped_informer(
    kube_control_plane: ControlPlane, kube_client: Client
) -> None:
    ns = kube_control_plane.create_namespace("scoped")
    await kube_client.create(CONFIGMAPS, _configmap("in", {"shard": "a"}), ns)
    await kube_client.create(CONFIGMAPS, _configmap("out", {"shard": "b"}), ns)
    cache = Cache(kube_client)
    scoped = cache.informer(CONFIGMAPS, namespace=ns, label_selector="shard=a")
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_for_sync(), timeout=30)

        assert await cache.get(CONFIGMAPS, "in", ns, label_selector="shard=a") is not None
        assert await cache.get(CONFIGMAPS, "out", ns, label_selector="shard=a") is None
        listed = await cache.list(CONFIGMAPS, ns, label_selector="shard=a")
        assert [cm["metadata"]["name"] for cm in listed] == ["in"]
        assert cache.informers == [scoped], "no unscoped informer was started"

        # read-your-writes holds for the scoped informer too
        written = await kube_client.patch(CONFIGMAPS, "in", {"data": {"k": "v"}}, ns)
        cache.note_write(CONFIGMAPS, written)
        latest = await cache.get(CONFIGMAPS, "in", ns, label_selector="shard=a")
        assert latest is not None
        assert latest["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
        assert cache.live_read_fallbacks == 0
    finally:
        await cache.stop()
