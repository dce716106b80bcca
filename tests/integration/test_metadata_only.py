"""Metadata-only watches and reads, per-kind transforms and field selectors (issue 23,
Deliver 3), against the real kube-apiserver through the fault proxy, which records
each request's query and ``Accept`` header."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import pytest

from kubeloop import (
    CONFIGMAPS,
    SECRETS,
    Cache,
    Client,
    Event,
    Object,
    Request,
    Result,
)
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import FaultProxy

pytestmark = pytest.mark.integration

AS_LIST = "as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
AS_ONE = "as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def secret(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}


def child(name: str, owner: Object, **labels: str) -> Object:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {"app": "demo", **labels},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "data": {"payload": "x" * 100},
    }


async def test_owns_metadata_only_sees_names_labels_and_owners_but_no_data(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    ns, proxy = kube_namespace, kube_fault_proxy
    owner = await kube_client.create(SECRETS, secret("owner"), ns)
    for i in range(3):
        await kube_client.create(CONFIGMAPS, child(f"c{i}", owner, idx=str(i)), ns)

    child_events: list[Object] = []
    full_events: list[Object] = []
    reads: dict[str, list[Object]] = {}

    def record_child(event: Event) -> bool:
        child_events.append(event.obj)
        return True

    def record_full(event: Event) -> bool:
        full_events.append(event.obj)
        return True

    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)

        async def reconcile(req: Request) -> Result:
            reads[req.name] = await mgr.cache.list(CONFIGMAPS, ns, metadata_only=True)
            return Result()

        async def reconcile_full(req: Request) -> Result:
            return Result()

        (
            mgr.controller("meta")
            .for_(SECRETS, namespace=ns)
            .owns(CONFIGMAPS, metadata_only=True, predicates=[record_child])
            .complete(reconcile)
        )
        # another controller of the same manager wants whole ConfigMaps: it gets them
        (
            mgr.controller("full")
            .watches(CONFIGMAPS, lambda o: [], namespace=ns, predicates=[record_full])
            .complete(reconcile_full)
        )
        async with running(mgr):
            await eventually(lambda: len(reads.get("owner", [])) == 3, "the owner's reconcile")
            await eventually(lambda: len(full_events) >= 3, "the full watch's events")
            # a cache read of one object, metadata only, and a full one beside it
            one = await mgr.cache.get(CONFIGMAPS, "c1", ns, metadata_only=True)
            whole = await mgr.cache.get(CONFIGMAPS, "c1", ns)
            # our own write is read back from the metadata-only informer at once
            made = await client.create(CONFIGMAPS, child("c9", owner), ns)
            mgr.cache.note_write(CONFIGMAPS, made)
            after = await mgr.cache.list(CONFIGMAPS, ns, metadata_only=True)
            # the event handler found the owner from the partial child's ownerReferences
            await eventually(lambda: len(reads.get("owner", [])) == 4, "the reconcile for c9")

    assert len(child_events) >= 3
    for obj in [*child_events, *reads["owner"]]:
        assert obj["kind"] == "PartialObjectMetadata", obj
        assert obj["apiVersion"] == "meta.k8s.io/v1"
        assert "data" not in obj
        assert obj["metadata"]["labels"]["app"] == "demo"
        assert obj["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    assert sorted(o["metadata"]["name"] for o in reads["owner"]) == ["c0", "c1", "c2", "c9"]
    assert "c9" in [o["metadata"]["name"] for o in after]
    assert one is not None
    assert "data" not in one
    assert one["kind"] == "PartialObjectMetadata"
    assert one["metadata"]["labels"] == {"app": "demo", "idx": "1"}
    assert whole is not None
    assert whole["kind"] == "ConfigMap"
    assert whole["data"] == {"payload": "x" * 100}
    for obj in full_events:
        assert obj["kind"] == "ConfigMap", obj
        assert "payload" in obj["data"], obj

    # two informers of one kind, told apart by the option, each listed and watched once
    cm = [
        e
        for e in proxy.log.entries(client="op")
        if e.resource == "configmaps" and e.verb in ("list", "watch")
    ]
    meta_lists = [e for e in cm if e.verb == "list" and AS_LIST in e.accept]
    meta_watches = [e for e in cm if e.verb == "watch" and AS_ONE in e.accept]
    full = [e for e in cm if "PartialObjectMetadata" not in e.accept]
    assert len(meta_lists) == 1, [(e.verb, e.accept) for e in cm]
    assert len(meta_watches) >= 1
    assert {e.verb for e in full} == {"list", "watch"}
    assert all(e.accept == "application/json" for e in full)
    assert sorted((i.resource.plural, i.metadata_only) for i in mgr.cache.informers) == [
        ("configmaps", False),
        ("configmaps", True),
        ("secrets", False),
    ]


async def test_a_metadata_only_read_starts_its_own_informer(
    kube_fault_proxy: FaultProxy,
    kube_client: Client,
    kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns, proxy = kube_namespace, kube_fault_proxy
    owner = await kube_client.create(SECRETS, secret("owner"), ns)
    await kube_client.create(CONFIGMAPS, child("a", owner, tier="web"), ns)
    await kube_client.create(CONFIGMAPS, child("b", owner, tier="db"), ns)
    async with Client(proxy.client_config("reader")) as client:
        cache = Cache(client)
        try:
            web = await cache.list(CONFIGMAPS, ns, label_selector="tier=web", metadata_only=True)
            full = await cache.list(CONFIGMAPS, ns)
            live = await client.get(CONFIGMAPS, "b", ns, metadata_only=True)
        finally:
            await cache.stop()
    assert [o["metadata"]["name"] for o in web] == ["a"]
    assert web[0]["kind"] == "PartialObjectMetadata"
    assert "data" not in web[0]
    assert sorted(o["metadata"]["name"] for o in full) == ["a", "b"]
    assert all(o["data"] == {"payload": "x" * 100} for o in full)
    # the full read found the kind watched as metadata only, and said what it costs
    warned = [r.getMessage() for r in caplog.records if r.name == "kubeloop.cache"]
    assert any("starting a full informer" in m and "metadata_only=True" in m for m in warned)
    assert live["kind"] == "PartialObjectMetadata"
    assert "data" not in live
    gets = proxy.log.entries(client="reader", verb="get")
    assert [AS_ONE in e.accept for e in gets] == [True]
    lists = proxy.log.entries(client="reader", verb="list")
    assert sorted(AS_LIST in e.accept for e in lists) == [False, True]


async def test_field_selector_on_owns_is_sent_and_filters(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    ns, proxy = kube_namespace, kube_fault_proxy
    owner = await kube_client.create(SECRETS, secret("owner"), ns)
    seen: list[str] = []

    def record(event: Event) -> bool:
        seen.append(event.obj["metadata"]["name"])
        return True

    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)

        async def reconcile(req: Request) -> Result:
            return Result()

        (
            mgr.controller("fields")
            .for_(SECRETS, namespace=ns, field_selector="metadata.name=owner")
            .owns(CONFIGMAPS, field_selector="metadata.name!=skip", predicates=[record])
            .complete(reconcile)
        )
        async with running(mgr):
            await kube_client.create(SECRETS, secret("other"), ns)
            await kube_client.create(CONFIGMAPS, child("skip", owner), ns)
            await kube_client.create(CONFIGMAPS, child("keep", owner), ns)
            await eventually(lambda: "keep" in seen, "the kept child's event")
            secrets = mgr.cache.informers[0].store.list(ns)
    assert "skip" not in seen
    assert [s["metadata"]["name"] for s in secrets] == ["owner"]
    for resource, selector in (
        ("configmaps", "metadata.name!=skip"),
        ("secrets", "metadata.name=owner"),
    ):
        entries = [
            e
            for e in proxy.log.entries(client="op")
            if e.resource == resource and e.verb in ("list", "watch")
        ]
        assert {e.verb for e in entries} == {"list", "watch"}
        sent = [parse_qs(e.query).get("fieldSelector") for e in entries]
        assert all(s == [selector] for s in sent), sent


async def test_per_kind_transforms_beside_the_cache_wide_one(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    owner = await kube_client.create(SECRETS, secret("owner"), ns)
    await kube_client.create(CONFIGMAPS, child("a", owner), ns)

    def drop_data(obj: Object) -> Object:
        obj.pop("data", None)
        obj["metadata"].setdefault("annotations", {})["transformed"] = "yes"
        return obj

    seen: dict[str, Any] = {}
    mgr = new_manager(kube_client, transforms={CONFIGMAPS: drop_data})
    mgr.cache.set_transform(SECRETS, None)  # secrets: stored untouched, managedFields kept

    async def reconcile(req: Request) -> Result:
        seen["cm"] = await mgr.cache.get(CONFIGMAPS, "a", ns)
        seen["meta"] = await mgr.cache.get(CONFIGMAPS, "a", ns, metadata_only=True)
        seen["secret"] = await mgr.cache.get(SECRETS, req.name, ns)
        return Result()

    mgr.controller("t").for_(SECRETS, namespace=ns).owns(CONFIGMAPS).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: "secret" in seen, "a reconcile")
        # the kind has informers now: too late to change how they store it
        with pytest.raises(ValueError, match="configmaps"):
            mgr.cache.set_transform(CONFIGMAPS, None)
    cm, meta, sec = seen["cm"], seen["meta"], seen["secret"]
    assert "data" not in cm
    assert cm["metadata"]["annotations"] == {"transformed": "yes"}
    # the metadata-only informer of the kind gets the kind's transform too
    assert meta["kind"] == "PartialObjectMetadata"
    assert meta["metadata"]["annotations"] == {"transformed": "yes"}
    assert sec["metadata"].get("managedFields"), "the per-kind None keeps managedFields"
    # a kind without its own transform keeps the cache-wide default
    cache = Cache(kube_client, transforms={SECRETS: None})
    try:
        plain = await cache.get(CONFIGMAPS, "a", ns)
    finally:
        await cache.stop()
    assert plain is not None
    assert "managedFields" not in plain["metadata"]
    assert plain["data"] == {"payload": "x" * 100}


async def test_an_unsupported_field_selector_is_refused_naming_it(
    kube_client: Client, kube_namespace: str
) -> None:
    cache = Cache(kube_client)
    inf = cache.informer(CONFIGMAPS, namespace=kube_namespace, field_selector="spec.nope=1")
    cache.start()
    try:
        await inf.reflector.wait_synced_or_failed()
    finally:
        await cache.stop()
    assert not inf.has_synced
    assert inf.reflector.last_failure_verb == "list"
    why = inf.reflector.last_error or ""
    assert "refuses list on configmaps" in why, why
    assert "spec.nope" in why, why
    assert "field_selector" in why, why


async def test_for_and_watches_metadata_only(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    ns, proxy = kube_namespace, kube_fault_proxy
    owner = await kube_client.create(SECRETS, secret("owner"), ns)
    await kube_client.create(CONFIGMAPS, child("a", owner), ns)
    mapped: list[Object] = []
    reconciled: dict[str, Object | None] = {}

    def to_owner(obj: Object) -> list[Request]:
        mapped.append(obj)
        return [Request("owner", ns)]

    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)

        async def reconcile(req: Request) -> Result:
            reconciled[req.name] = await mgr.cache.get(SECRETS, req.name, ns, metadata_only=True)
            return Result()

        (
            mgr.controller("m")
            .for_(SECRETS, namespace=ns, metadata_only=True)
            .watches(CONFIGMAPS, to_owner, metadata_only=True)
            .complete(reconcile)
        )
        async with running(mgr):
            await eventually(lambda: "owner" in reconciled and bool(mapped), "a reconcile")
    got = reconciled["owner"]
    assert got is not None
    assert got["kind"] == "PartialObjectMetadata"
    assert got["metadata"]["uid"] == owner["metadata"]["uid"]
    assert mapped[0]["kind"] == "PartialObjectMetadata"
    assert "data" not in mapped[0]
    # one informer per kind, both metadata-only: the reconcile's read started no other
    assert sorted((i.resource.plural, i.metadata_only) for i in mgr.cache.informers) == [
        ("configmaps", True),
        ("secrets", True),
    ]
    watches = proxy.log.entries(client="op", verb="watch")
    assert {e.resource for e in watches} == {"configmaps", "secrets"}
    assert all(AS_ONE in e.accept for e in watches)
