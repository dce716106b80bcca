"""The AppConfig example (examples/configmap_child) one reconcile at a time, in process:
every branch of its reconcile as the writes it sends, read from a fixed snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import KubeloopError, ManagerOptions, Result
from kubeloop.testing import Snapshot, Write, reconcile_once
from tests import factories
from tests.faults import appconfig

NO_SERVERS = ManagerOptions(
    metrics_bind_address=None, health_probe_bind_address=None, handle_signals=False
)


def app(data: dict[str, str], *, generation: int = 2, uid: str = "uid-web") -> dict[str, Any]:
    return {
        "apiVersion": "examples.kubeloop.dev/v1",
        "kind": "AppConfig",
        "metadata": factories.metadata("web", "default", uid=uid, generation=generation),
        "spec": {"data": data},
    }


def child(data: dict[str, str], owner_uid: str | None = "uid-web") -> dict[str, Any]:
    owner = (
        None
        if owner_uid is None
        else factories.owner_reference(
            "AppConfig", "web", api_version="examples.kubeloop.dev/v1", uid=owner_uid,
            controller=True,
        )
    )  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": factories.metadata(
            "web", "default", owner=owner, uid="cm-uid", labels={appconfig.CHILD_LABEL: "web"}
        ),
        "data": data,
    }


async def reconcile(*objects: dict[str, Any]) -> tuple[Result, list[Write]]:
    snapshot = Snapshot(objects, resources=[appconfig.APPCONFIGS])
    mgr = appconfig.build_manager(snapshot.client, "default", NO_SERVERS)
    return await reconcile_once(mgr, factories.request(app({})))  # the AppConfig's key


def in_sync(**condition: str) -> dict[str, Any]:
    """The status the reconcile writes for generation 2 with one key."""
    ready = {
        "type": "Ready",
        "status": "True",
        "observedGeneration": 2,
        "reason": "ConfigMapInSync",
        "message": "ConfigMap web holds 1 keys",
        **condition,
    }
    return {"observedGeneration": 2, "configMap": "web", "keys": 1, "conditions": [ready]}


def status_of(write: Write) -> dict[str, Any]:
    status: dict[str, Any] = write.body["status"]
    for condition in status["conditions"]:
        condition.pop("lastTransitionTime")
    return status


async def test_a_new_appconfig_gets_its_configmap_then_its_status() -> None:
    result, writes = await reconcile(app({"greeting": "hello"}))

    assert result == Result()
    assert [str(w) for w in writes] == [
        "create ConfigMap default/web",
        "update AppConfig/status default/web",
    ]
    assert writes[0].body == appconfig.child_of(app({"greeting": "hello"}))
    assert status_of(writes[1]) == in_sync()


async def test_a_changed_spec_updates_the_configmap_it_owns() -> None:
    _, writes = await reconcile(app({"a": "1", "b": "2"}), child({"a": "0"}))

    assert [str(w) for w in writes] == [
        "update ConfigMap default/web",
        "update AppConfig/status default/web",
    ]
    assert writes[0].body["data"] == {"a": "1", "b": "2"}
    assert writes[0].body["metadata"]["uid"] == "cm-uid"  # the very object read, updated
    assert status_of(writes[1])["keys"] == 2


async def test_a_configmap_of_a_previous_appconfig_is_deleted_never_adopted() -> None:
    result, writes = await reconcile(app({"a": "1"}), child({"a": "1"}, owner_uid="old-uid"))

    assert result == Result(requeue=True)  # the next reconcile creates the new one
    assert [str(w) for w in writes] == ["delete ConfigMap default/web"]
    assert writes[0].body["preconditions"] == {"uid": "cm-uid", "resourceVersion": "1"}


async def test_a_deleted_appconfig_takes_its_configmap() -> None:
    result, writes = await reconcile(child({"a": "1"}))

    assert result == Result()
    assert [str(w) for w in writes] == ["delete ConfigMap default/web"]


async def test_a_configmap_someone_else_owns_is_an_error_naming_it() -> None:
    with pytest.raises(KubeloopError, match="ConfigMap default/web is not ours"):
        await reconcile(app({"a": "1"}), child({"a": "1"}, owner_uid=None))


async def test_an_appconfig_in_sync_writes_nothing() -> None:
    done = app({"a": "1"})
    done["status"] = in_sync(lastTransitionTime="2026-01-01T00:00:00Z")
    assert await reconcile(done, child({"a": "1"})) == (Result(), [])
