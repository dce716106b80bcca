"""Reads through a label-scoped informer: a controller scoped with
``for_(..., label_selector=s)`` reads its objects from that same informer, and no
cluster-wide informer is started behind its back.
"""

from __future__ import annotations

import asyncio
import logging

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


async def test_list_reads_our_own_writes_and_a_namespaced_list_of_a_cluster_informer(
    kube_control_plane: ControlPlane, kube_client: Client
) -> None:
    ns, other = kube_control_plane.create_namespace("ryw"), kube_control_plane.create_namespace("o")
    await kube_client.create(CONFIGMAPS, _configmap("elsewhere", {}), other)
    cache = Cache(kube_client)
    cache.informer(CONFIGMAPS)  # cluster-wide
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_for_sync(), timeout=30)
        for i in range(20):
            made = await kube_client.create(CONFIGMAPS, _configmap(f"c{i}", {}), ns)
            cache.note_write(CONFIGMAPS, made)
            listed = await cache.list(CONFIGMAPS, ns)  # at once: the watch may lag
            names = {cm["metadata"]["name"] for cm in listed}
            assert names == {f"c{j}" for j in range(i + 1)}, "our create is listed"
            assert all(cm["metadata"]["namespace"] == ns for cm in listed)
            changed = await kube_client.patch(CONFIGMAPS, f"c{i}", {"data": {"n": str(i)}}, ns)
            cache.note_write(CONFIGMAPS, changed)
            listed = await cache.list(CONFIGMAPS, ns)
            mine = next(cm for cm in listed if cm["metadata"]["name"] == f"c{i}")
            assert mine["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
            mine["data"]["n"] = "scribbled"  # a copy: the next read is unaffected
        again = await cache.list(CONFIGMAPS, ns)
        assert {cm["data"]["n"] for cm in again} == {str(i) for i in range(20)}
        assert [cm["metadata"]["name"] for cm in await cache.list(CONFIGMAPS, other)] == [
            "elsewhere"
        ]
        assert len(cache.informers) == 1, "namespaced reads used the cluster-wide informer"
        assert cache.live_read_fallbacks == 0
    finally:
        await cache.stop()


async def test_a_read_without_an_informer_starts_one_for_its_namespace_only(
    kube_control_plane: ControlPlane, kube_client: Client
) -> None:
    ns = kube_control_plane.create_namespace("lazy")
    await kube_client.create(CONFIGMAPS, _configmap("x", {}), ns)
    cache = Cache(kube_client)
    try:
        got = await cache.get(CONFIGMAPS, "x", ns)
        assert got is not None
        assert [(i.resource, i.reflector.namespace) for i in cache.informers] == [
            (CONFIGMAPS, ns)
        ], "not a cluster-wide informer"
    finally:
        await cache.stop()


async def test_a_selector_less_read_of_a_watched_kind_warns_that_it_starts_a_second_informer(
    kube_control_plane: ControlPlane, kube_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    ns = kube_control_plane.create_namespace("second")
    await kube_client.create(CONFIGMAPS, _configmap("in", {"shard": "a"}), ns)
    cache = Cache(kube_client)
    cache.informer(CONFIGMAPS, namespace=ns, label_selector="shard=a")
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_for_sync(), timeout=30)
        with caplog.at_level(logging.INFO, logger="kubeloop"):
            assert await cache.get(CONFIGMAPS, "in", ns) is not None
        [record] = [r for r in caplog.records if "informer for a read" in r.getMessage()]
        assert record.levelno == logging.WARNING
        assert "second informer" in record.getMessage()
        assert record.__dict__["watched_selectors"] == ["shard=a"]
        assert len(cache.informers) == 2
    finally:
        await cache.stop()
