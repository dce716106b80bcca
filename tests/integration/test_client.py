"""The async client against a real kube-apiserver: every verb, patch type, error and
watch behaviour the runtime relies on."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from kubeloop._client import Client, PatchType, WatchEvent
from kubeloop._errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    RequestTimeout,
)
from kubeloop._resource import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, PODS, Object, Resource
from kubeloop.envtest import ControlPlane
from kubeloop.testing import ScaleSpec, resource_of, simple_crd

pytestmark = pytest.mark.integration

GROUP = "test.kubeloop.dev"
SPROCKET_CRD = simple_crd(
    GROUP,
    "Sprocket",
    spec={
        "replicas": {"type": "integer", "minimum": 0},
        "color": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    status={
        "replicas": {"type": "integer"},
        "selector": {"type": "string"},
        "phase": {"type": "string"},
    },
    scale=ScaleSpec(label_selector_path=".status.selector"),
)
SPROCKETS = resource_of(SPROCKET_CRD)


@pytest.fixture(scope="module")
def sprocket_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([SPROCKET_CRD])


def sprocket(name: str, ns: str, **spec: Any) -> Object:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Sprocket",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1, **spec},
    }


def configmap(name: str, ns: str, **data: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    }


def managers(obj: Object) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields", [])}


# -- CRUD ------------------------------------------------------------------------------


async def test_crud(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    created = await kube_client.create(CONFIGMAPS, configmap("cm", ns, a="1"))
    assert created["metadata"]["uid"]
    assert managers(created) == {"kubeloop"}

    got = await kube_client.get(CONFIGMAPS, "cm", ns)
    assert got["data"] == {"a": "1"}
    assert got["kind"] == "ConfigMap"

    got["data"]["a"] = "2"
    updated = await kube_client.update(CONFIGMAPS, got)
    assert updated["data"] == {"a": "2"}
    assert updated["metadata"]["resourceVersion"] != got["metadata"]["resourceVersion"]

    with pytest.raises(Conflict) as stale:
        await kube_client.update(CONFIGMAPS, got)  # still carries the old resourceVersion
    assert stale.value.status_code == 409
    with pytest.raises(AlreadyExists):
        await kube_client.create(CONFIGMAPS, configmap("cm", ns))

    await kube_client.delete(CONFIGMAPS, "cm", ns)
    with pytest.raises(NotFound) as missing:
        await kube_client.get(CONFIGMAPS, "cm", ns)
    assert missing.value.status_code == 404
    assert missing.value.reason == "NotFound"


async def test_cluster_scoped_get(kube_client: Client, kube_namespace: str) -> None:
    ns = await kube_client.get(NAMESPACES, kube_namespace)
    assert ns["metadata"]["name"] == kube_namespace


async def test_list_pagination(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    for i in range(7):
        obj = configmap(f"page-{i}", ns)
        obj["metadata"]["labels"] = {"set": "paged"}
        await kube_client.create(CONFIGMAPS, obj)
    await kube_client.create(CONFIGMAPS, configmap("unlabelled", ns))

    first = await kube_client.list(CONFIGMAPS, ns, label_selector="set=paged", limit=3)
    assert len(first["items"]) == 3
    token = first["metadata"]["continue"]
    assert token
    second = await kube_client.list(
        CONFIGMAPS, ns, label_selector="set=paged", limit=3, continue_=token
    )
    assert len(second["items"]) == 3
    assert {i["metadata"]["name"] for i in first["items"]}.isdisjoint(
        i["metadata"]["name"] for i in second["items"]
    )

    items, rv = await kube_client.list_all(CONFIGMAPS, ns, label_selector="set=paged", limit=3)
    assert sorted(i["metadata"]["name"] for i in items) == [f"page-{i}" for i in range(7)]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
    assert int(rv) > 0

    everything, _ = await kube_client.list_all(CONFIGMAPS, ns)
    assert len(everything) >= 8  # plus kube-root-ca.crt if its controller ran
    by_field, _ = await kube_client.list_all(CONFIGMAPS, ns, field_selector="metadata.name=page-4")
    assert [i["metadata"]["name"] for i in by_field] == ["page-4"]


# -- patch and apply -------------------------------------------------------------------


async def test_merge_and_json_patch(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    ns = kube_namespace
    await kube_client.create(SPROCKETS, sprocket("s", ns, color="red", tags=["a", "b"]))

    merged = await kube_client.patch(SPROCKETS, "s", {"spec": {"color": "blue", "tags": ["c"]}}, ns)
    assert merged["spec"] == {"replicas": 1, "color": "blue", "tags": ["c"]}

    patched = await kube_client.patch(
        SPROCKETS,
        "s",
        [
            {"op": "test", "path": "/spec/color", "value": "blue"},
            {"op": "replace", "path": "/spec/replicas", "value": 4},
            {"op": "add", "path": "/spec/tags/-", "value": "d"},
        ],
        ns,
        patch_type=PatchType.JSON,
    )
    assert patched["spec"] == {"replicas": 4, "color": "blue", "tags": ["c", "d"]}

    with pytest.raises(ApiError) as unsupported:  # no strategic merge for custom resources
        await kube_client.patch(SPROCKETS, "s", {"spec": {}}, ns, patch_type=PatchType.STRATEGIC)
    assert unsupported.value.status_code == 415


async def test_strategic_merge_patch(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.invalid/app:1"},
                {"name": "sidecar", "image": "registry.invalid/sidecar:1"},
            ]
        },
    }
    await kube_client.create(PODS, pod)
    change = {"spec": {"containers": [{"name": "app", "image": "registry.invalid/app:2"}]}}

    # a merge patch replaces the whole list, which drops a container: invalid
    with pytest.raises(Invalid):
        await kube_client.patch(PODS, "p", change, ns, patch_type=PatchType.MERGE)
    # a strategic merge patch merges list items by name
    patched = await kube_client.patch(PODS, "p", change, ns, patch_type=PatchType.STRATEGIC)
    images = {c["name"]: c["image"] for c in patched["spec"]["containers"]}
    assert images == {"app": "registry.invalid/app:2", "sidecar": "registry.invalid/sidecar:1"}

    cm = await kube_client.create(CONFIGMAPS, configmap("cm", ns, a="1"))
    strategic = await kube_client.patch(
        CONFIGMAPS, "cm", {"data": {"b": "2"}}, ns, patch_type=PatchType.STRATEGIC
    )
    assert strategic["data"] == {"a": "1", "b": "2"}
    assert strategic["metadata"]["uid"] == cm["metadata"]["uid"]


async def test_server_side_apply(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    ns = kube_namespace
    mine = await kube_client.apply(SPROCKETS, sprocket("s", ns, color="red"), field_manager="alice")
    assert mine["spec"]["color"] == "red"
    assert managers(mine) == {"alice"}

    # the same fields applied by another manager with another value conflict...
    with pytest.raises(Conflict) as conflict:
        await kube_client.apply(SPROCKETS, sprocket("s", ns, color="blue"), field_manager="bob")
    assert any(".spec.color" in c.field for c in conflict.value.causes)

    # ...unless forced, which takes ownership
    forced = await kube_client.apply(
        SPROCKETS, sprocket("s", ns, color="blue"), field_manager="bob", force=True
    )
    assert forced["spec"]["color"] == "blue"
    assert "bob" in managers(forced)

    # applying without apiVersion/kind fills them in; the default manager is the client's
    partial = {"metadata": {"name": "s", "namespace": ns}, "spec": {"tags": ["x"]}}
    tagged = await kube_client.apply(SPROCKETS, partial)
    assert tagged["spec"]["tags"] == ["x"]
    assert "kubeloop" in managers(tagged)

    # the raw patch call with APPLY is the same thing
    raw = await kube_client.patch(
        SPROCKETS,
        "s",
        sprocket("s", ns, color="green"),
        ns,
        patch_type=PatchType.APPLY,
        field_manager="carol",
        force=True,
    )
    assert raw["spec"]["color"] == "green"


# -- delete ---------------------------------------------------------------------------


async def test_delete_preconditions(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    cm = await kube_client.create(CONFIGMAPS, configmap("cm", ns))
    meta = cm["metadata"]

    with pytest.raises(Conflict):
        await kube_client.delete(CONFIGMAPS, "cm", ns, preconditions={"uid": "not-the-uid"})
    with pytest.raises(Conflict):
        await kube_client.delete(CONFIGMAPS, "cm", ns, preconditions={"resourceVersion": "1"})

    await kube_client.delete(
        CONFIGMAPS,
        "cm",
        ns,
        preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
        grace_period_seconds=0,
    )
    with pytest.raises(NotFound):
        await kube_client.get(CONFIGMAPS, "cm", ns)


async def test_delete_propagation_policy(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, configmap("fg", ns))
    # without a garbage collector running, foreground deletion parks the object
    # with its finalizer: proof the policy reached the server
    parked = await kube_client.delete(CONFIGMAPS, "fg", ns, propagation_policy="Foreground")
    assert parked["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in parked["metadata"]["finalizers"]

    await kube_client.create(CONFIGMAPS, configmap("bg", ns))
    await kube_client.delete(CONFIGMAPS, "bg", ns, propagation_policy="Background")
    with pytest.raises(NotFound):
        await kube_client.get(CONFIGMAPS, "bg", ns)

    with pytest.raises(ApiError) as bad:
        await kube_client.delete(CONFIGMAPS, "fg", ns, propagation_policy="Sideways")
    assert bad.value.status_code in (400, 422)


# -- subresources ----------------------------------------------------------------------


async def test_status_subresource(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    ns = kube_namespace
    body = sprocket("s", ns)
    body["status"] = {"phase": "Ignored"}
    created = await kube_client.create(SPROCKETS, body)
    assert "status" not in created  # the main resource ignores status

    created["status"] = {"phase": "Ready", "replicas": 1}
    created["spec"]["color"] = "ignored-by-status"
    written = await kube_client.update_status(SPROCKETS, created)
    assert written["status"] == {"phase": "Ready", "replicas": 1}
    assert "color" not in written["spec"]  # and the status subresource ignores spec

    patched = await kube_client.patch(
        SPROCKETS, "s", {"status": {"phase": "Done"}}, ns, subresource="status"
    )
    assert patched["status"] == {"phase": "Done", "replicas": 1}
    assert (await kube_client.get(SPROCKETS, "s", ns, subresource="status"))["status"]["phase"] == (
        "Done"
    )


async def test_scale_subresource(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    ns = kube_namespace
    await kube_client.create(SPROCKETS, sprocket("s", ns, replicas=2))
    scale = await kube_client.get_scale(SPROCKETS, "s", ns)
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 2

    scale["spec"]["replicas"] = 5
    updated = await kube_client.update_scale(SPROCKETS, scale)
    assert updated["spec"]["replicas"] == 5
    assert (await kube_client.get(SPROCKETS, "s", ns))["spec"]["replicas"] == 5

    patched = await kube_client.patch_scale(SPROCKETS, "s", {"spec": {"replicas": 3}}, ns)
    assert patched["spec"]["replicas"] == 3
    assert (await kube_client.get(SPROCKETS, "s", ns))["spec"]["replicas"] == 3


# -- errors ------------------------------------------------------------------------------


async def test_invalid_names_the_field(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    with pytest.raises(Invalid) as invalid:
        await kube_client.create(SPROCKETS, sprocket("s", kube_namespace, replicas=-1))
    assert invalid.value.status_code == 422
    assert any(c.field == "spec.replicas" for c in invalid.value.causes)

    with pytest.raises(Invalid) as bad_name:
        await kube_client.create(CONFIGMAPS, configmap("Not_A_Name", kube_namespace))
    assert any(c.field == "metadata.name" for c in bad_name.value.causes)


async def test_forbidden(kube_control_plane: ControlPlane, kube_namespace: str) -> None:
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig_for("nobody")) as nobody:
        with pytest.raises(Forbidden) as denied:
            await nobody.get(CONFIGMAPS, "anything", kube_namespace)
        assert denied.value.status_code == 403
        assert "nobody" in denied.value.message
        with pytest.raises(Forbidden):
            await nobody.create(CONFIGMAPS, configmap("cm", kube_namespace))
        with pytest.raises(Forbidden):  # an HTTP error on the watch request itself
            async for _ in nobody.watch(CONFIGMAPS, kube_namespace, resource_version=None):
                pass


# -- watch -------------------------------------------------------------------------------


async def test_watch_from_list_version(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    _, rv = await kube_client.list_all(CONFIGMAPS, ns)
    # changes made after the list, before the watch starts, are still delivered
    await kube_client.create(CONFIGMAPS, configmap("w", ns, v="1"))
    await kube_client.patch(CONFIGMAPS, "w", {"data": {"v": "2"}}, ns)
    await kube_client.delete(CONFIGMAPS, "w", ns)
    elsewhere = kube_control_plane.create_namespace("t")

    events: list[WatchEvent] = []
    async for event in kube_client.watch(
        CONFIGMAPS, ns, resource_version=rv, allow_bookmarks=True, timeout_seconds=5
    ):
        events.append(event)
        if len(events) == 3:
            # The apiserver sends a bookmark 2 s before the deadline, but only if the
            # resource's watch cache has moved past the last event this watcher got.
            # A change this watcher does not see moves it (in a busy cluster
            # something always does).
            await kube_client.create(CONFIGMAPS, configmap("other", elsewhere))
    # the stream ended cleanly at timeoutSeconds

    ours = [(e.type, e.object["data"]["v"]) for e in events if e.type != "BOOKMARK"]
    assert ours == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]
    assert events[-1].type == "BOOKMARK"
    bookmark = events[-1].object
    assert bookmark["kind"] == "ConfigMap"
    assert int(bookmark["metadata"]["resourceVersion"]) > int(
        events[2].object["metadata"]["resourceVersion"]
    )


async def test_watch_without_bookmarks(kube_client: Client, kube_namespace: str) -> None:
    _, rv = await kube_client.list_all(CONFIGMAPS, kube_namespace)
    await kube_client.create(CONFIGMAPS, configmap("w", kube_namespace))
    events = [
        e
        async for e in kube_client.watch(
            CONFIGMAPS,
            kube_namespace,
            resource_version=rv,
            allow_bookmarks=False,
            timeout_seconds=2,
        )
    ]
    assert [e.type for e in events] == ["ADDED"]


async def test_watch_too_old_version_is_gone(
    kube_client: Client, kube_namespace: str, sprocket_crd: None
) -> None:
    # A watch cache remembers history from the list it started with; a custom
    # resource's cache starts when its CRD is installed, long after version 1.
    # The server answers 200 and then an ERROR event carrying a 410 Expired Status.
    with pytest.raises(Gone) as gone:
        async for _ in kube_client.watch(
            SPROCKETS, kube_namespace, resource_version="1", timeout_seconds=5
        ):
            pass
    assert gone.value.status_code == 410
    assert gone.value.reason == "Expired"


async def test_watch_read_timeout(kube_client: Client, kube_namespace: str) -> None:
    _, rv = await kube_client.list_all(CONFIGMAPS, kube_namespace)
    with pytest.raises(RequestTimeout):
        async for _ in kube_client.watch(
            CONFIGMAPS,
            kube_namespace,
            resource_version=rv,
            allow_bookmarks=False,
            timeout_seconds=60,
            read_timeout=1.0,
        ):
            pass


async def test_watch_stopped_early_releases_the_connection(
    kube_client: Client, kube_namespace: str
) -> None:
    _, rv = await kube_client.list_all(CONFIGMAPS, kube_namespace)
    await kube_client.create(CONFIGMAPS, configmap("w", kube_namespace))
    stream = kube_client.watch(CONFIGMAPS, kube_namespace, resource_version=rv, timeout_seconds=60)
    async with contextlib.aclosing(stream) as events:
        async for event in events:
            assert event.type == "ADDED"
            break
    # the client still works afterwards
    assert (await kube_client.get(CONFIGMAPS, "w", kube_namespace))["metadata"]["name"] == "w"


# -- discovery and observer ------------------------------------------------------------


async def test_discovery(kube_client: Client, sprocket_crd: None) -> None:
    assert await kube_client.discover(f"{GROUP}/v1", "Sprocket") == SPROCKETS
    assert await kube_client.discover("v1", "ConfigMap") == CONFIGMAPS
    assert await kube_client.discover("v1", "Namespace") == NAMESPACES
    assert await kube_client.discover("apps/v1", "Deployment") == DEPLOYMENTS
    with pytest.raises(NotFound):
        await kube_client.discover("v1", "Sprocket")
    with pytest.raises(NotFound):
        await kube_client.discover("nope.kubeloop.dev/v1", "Thing")

    version = await kube_client.server_version()
    assert version["gitVersion"].startswith("v1.")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None, int]] = []
        self.writes: list[tuple[str, str | None, str]] = []

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        assert seconds >= 0
        self.calls.append((verb, resource.plural if resource else None, subresource, code))

    def on_write(self, resource: Resource, subresource: str | None, obj: Object) -> None:
        self.writes.append((resource.plural, subresource, obj["metadata"]["resourceVersion"]))


async def test_observer_sees_kubernetes_verbs(
    kube_control_plane: ControlPlane, kube_namespace: str, sprocket_crd: None
) -> None:
    rec = Recorder()
    ns = kube_namespace
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, observer=rec) as client:
        assert client.host.startswith("127.0.0.1:")
        created = await client.create(SPROCKETS, sprocket("s", ns))
        got = await client.get(SPROCKETS, "s", ns)
        await client.update(SPROCKETS, got)
        await client.patch(SPROCKETS, "s", {"spec": {"color": "red"}}, ns)
        await client.apply(SPROCKETS, sprocket("s", ns, color="red"))
        got = await client.get(SPROCKETS, "s", ns)
        await client.update_status(SPROCKETS, {**got, "status": {"phase": "x"}})
        await client.patch_scale(SPROCKETS, "s", {"spec": {"replicas": 3}}, ns)
        _, rv = await client.list_all(SPROCKETS, ns)
        async for _ in client.watch(SPROCKETS, ns, resource_version=rv, timeout_seconds=1):
            pass
        with pytest.raises(NotFound):
            await client.get(SPROCKETS, "missing", ns)
        await client.delete(SPROCKETS, "s", ns)
        await client.discover("v1", "Pod")

    assert rec.calls == [
        ("create", "sprockets", None, 201),
        ("get", "sprockets", None, 200),
        ("update", "sprockets", None, 200),
        ("patch", "sprockets", None, 200),
        ("patch", "sprockets", None, 200),
        ("get", "sprockets", None, 200),
        ("update", "sprockets", "status", 200),
        ("patch", "sprockets", "scale", 200),
        ("list", "sprockets", None, 200),
        ("watch", "sprockets", None, 200),
        ("get", "sprockets", None, 404),
        ("delete", "sprockets", None, 200),
        ("get", None, None, 200),
    ]
    # every write that returned the object itself (not the Scale) reached on_write
    assert [(w[0], w[1]) for w in rec.writes] == [
        ("sprockets", None),
        ("sprockets", None),
        ("sprockets", None),
        ("sprockets", None),
        ("sprockets", "status"),
    ]
    assert rec.writes[0][2] == created["metadata"]["resourceVersion"]
