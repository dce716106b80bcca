"""Reads with a label selector are served from the kind's one informer, filtered in
memory (issue 23, bug 6): every distinct ``(namespace, label_selector)`` read used to
open a LIST+WATCH of its own for the life of the process. Counted at the fault proxy,
and each answer compared with a live LIST of the same selector."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Cache, Client
from kubeloop.testing.faults import FaultProxy

pytestmark = pytest.mark.integration

SELECTORS = [
    "tier=web",
    "tier==db",
    "tier!=web",
    "tier in (web,db)",
    "tier notin (web)",
    "shard",
    "!shard",
    "tier=web,shard in (a)",
    "shard=b,tier notin (db)",
    "size>3",
    "size<2",
]


def configmap(i: int) -> dict[str, object]:
    labels = {"tier": ("web", "db", "cache")[i % 3], "size": str(i % 5)}
    if i % 2:
        labels["shard"] = "ab"[i % 4 // 2]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"c{i}", "labels": labels},
    }


def names(objs: list[dict[str, object]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)  # type: ignore[index]


async def test_selector_reads_share_one_watch_and_match_a_live_list(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    ns, proxy = kube_namespace, kube_fault_proxy
    for i in range(24):
        await kube_client.create(CONFIGMAPS, configmap(i), ns)
    async with Client(proxy.client_config("reader")) as client:
        cache = Cache(client)
        try:
            for sel in SELECTORS:
                cached = await cache.list(CONFIGMAPS, ns, label_selector=sel)
                live, _ = await kube_client.list_all(CONFIGMAPS, ns, label_selector=sel)
                assert names(cached) == names(live), sel
                for i in (0, 1, 5):  # get answers as the selector says
                    got = await cache.get(CONFIGMAPS, f"c{i}", ns, label_selector=sel)
                    assert (got is not None) == (f"c{i}" in names(live)), (sel, i)
            # our own create, read at once through a selector it matches
            made = await client.create(CONFIGMAPS, configmap(30), ns)
            cache.note_write(CONFIGMAPS, made)
            assert "c30" in names(await cache.list(CONFIGMAPS, ns, label_selector="tier=web"))
            assert "c30" not in names(await cache.list(CONFIGMAPS, ns, label_selector="tier=db"))
        finally:
            await cache.stop()
    watches = proxy.log.entries(client="reader", verb="watch")
    lists = [e for e in proxy.log.entries(client="reader", verb="list")]
    assert len(watches) == 1, f"{len(watches)} watches for {len(SELECTORS)} selectors"
    assert len(lists) == 1
    assert len(cache.informers) == 1
    assert cache.informers[0].reflector.label_selector is None


async def test_a_malformed_selector_is_refused_naming_it(
    kube_client: Client, kube_namespace: str
) -> None:
    cache = Cache(kube_client)
    try:
        with pytest.raises(ValueError, match="size>big"):
            await cache.list(CONFIGMAPS, kube_namespace, label_selector="size>big")
    finally:
        await cache.stop()
