"""A cache restricted to one namespace reads that namespace when the caller names none
(issue 23, bug 8): ``list`` always did, ``get`` looked the object up under its bare
name and so always answered None."""

from __future__ import annotations

import asyncio

import pytest

from kubeloop import CONFIGMAPS, Cache, Client
from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration


async def test_get_without_a_namespace_on_a_one_namespace_cache_finds_the_object(
    kube_control_plane: ControlPlane, kube_client: Client
) -> None:
    ns = kube_control_plane.create_namespace("onens")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "here"}}
    made = await kube_client.create(CONFIGMAPS, body, ns)
    cache = Cache(kube_client, namespaces=[ns])
    cache.informer(CONFIGMAPS)  # the namespace's informer: the only one it may have
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_for_sync(), timeout=30)
        got = await cache.get(CONFIGMAPS, "here")
        assert got is not None, "get(kind, name) reads the manager's one namespace"
        assert got["metadata"]["namespace"] == ns
        assert await cache.get(CONFIGMAPS, "absent") is None
        # read-your-writes keys the object the same way
        changed = await kube_client.patch(CONFIGMAPS, "here", {"data": {"k": "v"}}, ns)
        cache.note_write(CONFIGMAPS, changed)
        latest = await cache.get(CONFIGMAPS, "here")
        assert latest is not None
        assert latest["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
        assert made["metadata"]["uid"] == latest["metadata"]["uid"]
        assert len(cache.informers) == 1
    finally:
        await cache.stop()
