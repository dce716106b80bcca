"""kubeloop.testing's in-process reconcile: a snapshot read through the real client and
cache, every write recorded and not applied; shown on the tutorial's Greeting operator."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kubeloop import (
    CONFIGMAPS,
    PODS,
    AlreadyExists,
    Client,
    ClusterConfig,
    ManagerOptions,
    NotFound,
    PatchType,
    Request,
    Resource,
    Result,
    TooManyRequests,
)
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from tests import factories

TUTORIAL = Path(__file__).resolve().parents[4] / "examples" / "tutorial" / "greeting_operator.py"
NO_SERVERS = ManagerOptions(
    metrics_bind_address=None, health_probe_bind_address=None, handle_signals=False
)


def _tutorial() -> ModuleType:
    spec = importlib.util.spec_from_file_location("greeting_operator", TUTORIAL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


greeting_operator = _tutorial()
GREETINGS = greeting_operator.GREETINGS


def greeting(name: str = "hello", *, enabled: bool = True, generation: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "tutorial.kubeloop.dev/v1",
        "kind": "Greeting",
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "spec": {"message": "Hello", "enabled": enabled},
    }


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return factories.configmap(name, namespace="default", labels=labels, data={"message": "old"})


def pod(name: str, node: str, phase: str = "Running") -> dict[str, Any]:
    obj = factories.pod(name, namespace="default", node=node, phase=phase)
    obj["metadata"]["resourceVersion"] = "7"
    return obj


async def reconcile_greeting(
    objects: list[dict[str, Any]], name: str = "hello"
) -> tuple[Result, list[Write]]:
    snapshot = Snapshot(objects, resources=[GREETINGS])
    mgr = greeting_operator.build(snapshot.client, "default", NO_SERVERS)
    return await reconcile_once(mgr, Request(name, "default"))


def without_transition_times(status: dict[str, Any]) -> dict[str, Any]:
    for condition in status.get("conditions", []):
        assert condition.pop("lastTransitionTime")  # set, to now: not a fixed value
    return status


# -- the tutorial's operator, one reconcile at a time -----------------------------------


async def test_an_enabled_greeting_applies_its_configmap_then_writes_status() -> None:
    result, writes = await reconcile_greeting([greeting()])

    assert result == Result()
    assert [str(w) for w in writes] == [
        "apply ConfigMap default/greeting-hello",
        "update Greeting/status default/hello",
    ]
    apply, status = writes
    assert apply.field_manager == "greeting-operator"
    assert apply.body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "greeting-hello",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "tutorial.kubeloop.dev/v1",
                    "kind": "Greeting",
                    "name": "hello",
                    "uid": "uid-hello",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {"message": "Hello"},
    }
    # the field manager a running manager gives this controller's own writes
    assert status.field_manager == "kubeloop-greeting"
    assert without_transition_times(status.body["status"]) == {
        "observedGeneration": 3,
        "configMap": "greeting-hello",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 3,
                "reason": "ConfigMapApplied",
                "message": "ConfigMap greeting-hello holds the message",
            }
        ],
    }


async def test_a_disabled_greeting_deletes_its_configmap() -> None:
    _, writes = await reconcile_greeting([greeting(enabled=False), configmap("greeting-hello")])

    assert [str(w) for w in writes] == [
        "delete ConfigMap default/greeting-hello",
        "update Greeting/status default/hello",
    ]
    assert without_transition_times(writes[1].body["status"]) == {
        "observedGeneration": 3,
        "configMap": "",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "observedGeneration": 3,
                "reason": "Disabled",
                "message": "spec.enabled is false",
            }
        ],
    }
    assert (writes[0].field_manager, writes[1].field_manager) == (None, "kubeloop-greeting")


async def test_a_disabled_greeting_without_a_configmap_still_writes_status() -> None:
    # the snapshot answers the delete 404 and ignore_not_found takes it: nothing fails
    _, writes = await reconcile_greeting([greeting(enabled=False)])

    assert [w.verb for w in writes] == ["delete", "update"]


async def test_a_greeting_already_reconciled_writes_no_status() -> None:
    done = greeting(generation=1)
    done["status"] = {
        "observedGeneration": 1,
        "configMap": "greeting-hello",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "ConfigMapApplied",
                "message": "ConfigMap greeting-hello holds the message",
            }
        ],
    }
    _, writes = await reconcile_greeting([done])

    # the apply is sent every time (the server decides it is a no-op); the status is not
    assert [str(w) for w in writes] == ["apply ConfigMap default/greeting-hello"]


async def test_a_deleted_greeting_writes_nothing() -> None:
    result, writes = await reconcile_greeting([configmap("greeting-hello")])

    assert (result, writes) == (Result(), [])


# -- the snapshot itself -------------------------------------------------------------------


async def test_reads_answer_from_the_snapshot_through_the_client() -> None:
    snapshot = Snapshot(
        [pod("a", "n1"), pod("b", "n2", "Pending"), configmap("x", app="web"), configmap("y")]
    )
    client = snapshot.client

    assert (await client.get(PODS, "a", "default"))["spec"]["nodeName"] == "n1"
    with pytest.raises(NotFound):
        await client.get(PODS, "c", "default")

    async def names(
        res: Resource, namespace: str | None = None, *, labels: str = "", fields: str = ""
    ) -> list[str]:
        objs, rv = await client.list_all(
            res, namespace, label_selector=labels or None, field_selector=fields or None
        )
        assert rv == "7"  # the newest version in the snapshot
        return [o["metadata"]["name"] for o in objs]

    assert await names(PODS, "default") == ["a", "b"]
    assert await names(PODS, "default", fields="spec.nodeName=n2") == ["b"]
    assert await names(PODS, fields="status.phase!=Pending") == ["a"]
    assert await names(CONFIGMAPS, "default", labels="app=web") == ["x"]
    assert await names(CONFIGMAPS, "other") == []
    meta = await client.list(CONFIGMAPS, "default", metadata_only=True)
    assert meta["kind"] == "PartialObjectMetadataList"
    assert [set(i) for i in meta["items"]] == [{"apiVersion", "kind", "metadata"}] * 2
    assert snapshot.writes == []


async def test_the_scale_subresource_reads_replicas_where_the_kind_keeps_them() -> None:
    deployments = Resource("apps", "v1", "deployments", "Deployment")
    pools = Resource("example.dev", "v1", "pools", "Pool", namespaced=False)
    pool = {"apiVersion": "example.dev/v1", "kind": "Pool", "metadata": {"name": "big"}}
    snapshot = Snapshot(
        [
            factories.deployment("web", replicas=3, namespace="default"),
            {**pool, "spec": {"targetNodes": 2}},
        ],
        resources=[deployments, pools],
        scale_paths={pools: "spec.targetNodes"},
    )
    client = snapshot.client
    web = await client.get_scale(deployments, "web", "default")
    assert (web["kind"], web["metadata"]["name"], web["spec"]) == ("Scale", "web", {"replicas": 3})
    big = await client.get_scale(pools, "big")
    assert big["spec"] == {"replicas": 2}
    big["spec"]["replicas"] = 4
    await client.update_scale(pools, big)
    [write] = snapshot.writes
    assert (str(write), write.body["spec"]) == ("update Pool/scale big", {"replicas": 4})
    assert (await client.get_scale(pools, "big"))["spec"] == {"replicas": 2}  # not applied


async def test_writes_are_recorded_with_their_bodies_and_never_applied() -> None:
    snapshot = Snapshot([pod("a", "n1"), configmap("x")])
    client = snapshot.client

    made = await client.create(CONFIGMAPS, configmap("new"))
    patched = await client.patch(PODS, "a", {"metadata": {"labels": {"l": "1"}}}, "default")
    await client.patch(
        PODS, "a", [{"op": "remove", "path": "/spec"}], "default", patch_type=PatchType.JSON
    )
    await client.update_status(PODS, pod("a", "n1", "Failed"))
    await client.evict("a", "default")
    await client.delete(CONFIGMAPS, "x", "default")

    assert [str(w) for w in snapshot.writes] == [
        "create ConfigMap default/new",
        "patch Pod default/a",
        "patch Pod default/a",
        "update Pod/status default/a",
        "evict Pod/eviction default/a",
        "delete ConfigMap default/x",
    ]
    assert made["metadata"]["name"] == "new"
    # the answer to a merge patch shows the patch over the snapshot's object ...
    assert patched["metadata"]["labels"] == {"l": "1"}
    assert patched["metadata"]["resourceVersion"] == "7"
    assert snapshot.writes[1].patch_type == PatchType.MERGE.value
    assert snapshot.writes[2].body == [{"op": "remove", "path": "/spec"}]
    assert snapshot.writes[4].body["metadata"] == {"name": "a", "namespace": "default"}
    # ... and reads still return the snapshot: nothing was applied
    assert "labels" not in (await client.get(PODS, "a", "default"))["metadata"]
    assert (await client.get(CONFIGMAPS, "x", "default"))["data"] == {"message": "old"}
    with pytest.raises(NotFound):
        await client.get(CONFIGMAPS, "new", "default")


async def test_writes_to_what_the_snapshot_lacks_are_answered_as_the_apiserver_would() -> None:
    snapshot = Snapshot([configmap("x")])
    client = snapshot.client

    with pytest.raises(NotFound):
        await client.delete(CONFIGMAPS, "gone", "default")
    with pytest.raises(NotFound):
        await client.update(CONFIGMAPS, configmap("gone"))
    with pytest.raises(NotFound):
        await client.evict("gone", "default")
    with pytest.raises(AlreadyExists):
        await client.create(CONFIGMAPS, configmap("x"))
    # every attempt is still recorded: the reconcile sent it
    assert [w.verb for w in snapshot.writes] == ["delete", "update", "evict", "create"]


async def test_an_eviction_the_test_refuses_is_answered_429_once_and_recorded() -> None:
    snapshot = Snapshot([pod("a", "n1"), pod("b", "n1")], refuse_evictions=["default/a"])
    client = snapshot.client

    with pytest.raises(TooManyRequests, match="disruption budget") as refused:
        await client.evict("a", "default")
    await client.evict("b", "default")

    # not retried by the client (a PDB's "not now" is the caller's to judge), and sent
    assert [str(w) for w in snapshot.writes] == [
        "evict Pod/eviction default/a",
        "evict Pod/eviction default/b",
    ]
    assert refused.value.status_code == 429


def test_an_object_of_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"Greeting 'hello'.*Snapshot\(resources="):
        Snapshot([greeting()])
    with pytest.raises(ValueError, match=r"ConfigMap 'x': metadata\.namespace is required"):
        Snapshot([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}])


async def test_reconcile_once_needs_a_snapshot_manager_and_one_controller() -> None:
    snapshot = Snapshot([])
    mgr = new_manager(snapshot.client)

    async def noop(_: Request) -> Result:
        return Result()

    mgr.controller("a").for_(CONFIGMAPS).complete(noop)
    mgr.controller("b").for_(PODS).complete(noop)
    with pytest.raises(ValueError, match=r"controllers \['a', 'b'\]: pass controller="):
        await reconcile_once(mgr, Request("x", "default"))
    with pytest.raises(ValueError, match="no controller named 'c'"):
        await reconcile_once(mgr, Request("x", "default"), controller="c")
    plain = new_manager(Client(ClusterConfig(server="https://127.0.0.1:1")))
    with pytest.raises(TypeError, match="built on a Snapshot's client"):
        await reconcile_once(plain, Request("x", "default"))


async def test_events_the_reconcile_records_are_writes_too() -> None:
    snapshot = Snapshot([configmap("x")])
    mgr = new_manager(snapshot.client, name="example.dev/recorder")

    async def reconcile(req: Request) -> Result:
        cm = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        assert cm is not None
        mgr.recorder.normal(cm, "Seen", "read from the cache")
        return Result(requeue_after=30)

    mgr.controller("events").for_(CONFIGMAPS).complete(reconcile)
    result, writes = await reconcile_once(mgr, Request("x", "default"))

    assert result == Result(requeue_after=30)
    assert [(w.verb, w.kind) for w in writes] == [("create", "Event")]
    with pytest.raises(RuntimeError, match="already ran a reconcile_once: build another"):
        await reconcile_once(mgr, Request("x", "default"))
    assert writes[0].body["reason"] == "Seen"
    assert writes[0].body["regarding"]["name"] == "x"


async def test_a_failing_reconcile_raises_and_its_writes_stay_on_the_snapshot() -> None:
    snapshot = Snapshot([configmap("x")])
    mgr = new_manager(snapshot.client)

    async def reconcile(req: Request) -> Result:
        cm = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        assert cm is not None
        await mgr.client.delete(CONFIGMAPS, req.name, req.namespace)
        mgr.recorder.warning(cm, "CloudRefused", "the cloud said no")
        raise RuntimeError("the cloud said no")

    mgr.controller("fails").for_(CONFIGMAPS).complete(reconcile)
    with pytest.raises(RuntimeError, match="the cloud said no"):
        await reconcile_once(mgr, Request("x", "default"))
    # the Warning it recorded before raising is flushed too: often what a test of a
    # failing reconcile wants to see
    assert [str(w) for w in snapshot.writes][:1] == ["delete ConfigMap default/x"]
    assert [(w.verb, w.kind) for w in snapshot.writes[1:]] == [("create", "Event")]
    assert snapshot.writes[1].body["reason"] == "CloudRefused"
