"""kubeloop's object helpers against the real apiserver: what each one sent is read
back from the apiserver (resourceVersions, managedFields, ownerReferences)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import (
    CONFIGMAPS,
    Client,
    NotFound,
    OperationResult,
    add_finalizer,
    apply_child,
    create_or_patch,
    create_or_update,
    remove_finalizer,
)

pytestmark = pytest.mark.integration

F = "example.com/cleanup"


def set_data(**data: str) -> Any:
    def mutate(obj: dict[str, Any]) -> None:
        obj.setdefault("data", {}).update(data)

    return mutate


async def test_create_or_update_creates_updates_and_sends_nothing_when_unchanged(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    op, created = await create_or_update(kube_client, CONFIGMAPS, "c", ns, set_data(a="1"))
    assert op is OperationResult.CREATED
    op, same = await create_or_update(kube_client, CONFIGMAPS, "c", ns, set_data(a="1"))
    assert op is OperationResult.NONE
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    op, updated = await create_or_update(kube_client, CONFIGMAPS, "c", ns, set_data(b="2"))
    assert op is OperationResult.UPDATED
    live = await kube_client.get(CONFIGMAPS, "c", ns)
    assert live["data"] == {"a": "1", "b": "2"}
    assert live["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


async def test_create_or_update_reapplies_only_its_change_after_a_conflict(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"x": "0"}}, ns)
    calls = 0

    def mutate(obj: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        obj["data"]["mine"] = "yes"

    # a second writer changes the object between our read and our write, once
    original_update = kube_client.update

    async def racing_update(res: Any, obj: Any, **kw: Any) -> Any:
        if calls == 1:
            other = await kube_client.get(CONFIGMAPS, "c", ns)
            other["data"]["theirs"] = "yes"
            await original_update(CONFIGMAPS, other)
        return await original_update(res, obj, **kw)

    kube_client.update = racing_update  # type: ignore[method-assign]
    try:
        op, _ = await create_or_update(kube_client, CONFIGMAPS, "c", ns, mutate)
    finally:
        kube_client.update = original_update  # type: ignore[method-assign]
    assert op is OperationResult.UPDATED
    assert calls == 2  # re-read and re-applied after the 409
    live = await kube_client.get(CONFIGMAPS, "c", ns)
    assert live["data"] == {"x": "0", "mine": "yes", "theirs": "yes"}  # nothing lost


async def test_create_or_patch_sends_only_what_changed(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    op, _ = await create_or_patch(kube_client, CONFIGMAPS, "p", ns, set_data(a="1"))
    assert op is OperationResult.CREATED
    stale = await kube_client.get(CONFIGMAPS, "p", ns)
    other = dict(stale, data={"a": "1", "other": "x"})
    await kube_client.update(CONFIGMAPS, other)

    # the patch carries no resourceVersion: the other writer's key survives
    def mutate(obj: dict[str, Any]) -> None:
        obj["data"]["b"] = "2"
        obj.setdefault("status", {})["ignored"] = True

    op, _ = await create_or_patch(kube_client, CONFIGMAPS, "p", ns, mutate)
    assert op is OperationResult.PATCHED
    live = await kube_client.get(CONFIGMAPS, "p", ns)
    assert live["data"] == {"a": "1", "other": "x", "b": "2"}
    op, _ = await create_or_patch(kube_client, CONFIGMAPS, "p", ns, set_data(b="2"))
    assert op is OperationResult.NONE


async def test_finalizers_never_clobber_another_writers(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    obj = await kube_client.create(CONFIGMAPS, {"metadata": {"name": "f"}}, ns)
    # someone else adds a finalizer after our read: our guarded patch re-reads, keeps it
    theirs = dict(obj, metadata=dict(obj["metadata"], finalizers=["other.io/keep"]))
    await kube_client.update(CONFIGMAPS, theirs)
    with_ours = await add_finalizer(kube_client, CONFIGMAPS, obj, F)
    assert with_ours["metadata"]["finalizers"] == ["other.io/keep", F]
    assert await add_finalizer(kube_client, CONFIGMAPS, with_ours, F) is with_ours
    await kube_client.delete(CONFIGMAPS, "f", ns)
    left = await remove_finalizer(kube_client, CONFIGMAPS, with_ours, F)
    assert left is not None
    assert left["metadata"]["finalizers"] == ["other.io/keep"]
    live = await kube_client.get(CONFIGMAPS, "f", ns)
    assert live["metadata"]["finalizers"] == ["other.io/keep"]
    assert live["metadata"].get("deletionTimestamp")
    # removing the last finalizer lets the object go
    await remove_finalizer(kube_client, CONFIGMAPS, live, "other.io/keep")
    with pytest.raises(NotFound):
        await kube_client.get(CONFIGMAPS, "f", ns)
    # and a finalizer on an object that is gone is nothing to remove
    assert await remove_finalizer(kube_client, CONFIGMAPS, live, "other.io/keep") is None


async def test_apply_child_sets_the_controller_and_owns_only_its_fields(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    parent = await kube_client.create(CONFIGMAPS, {"metadata": {"name": "parent"}}, ns)
    child = {"metadata": {"name": "child"}, "data": {"from-parent": "1"}}
    applied = await apply_child(kube_client, CONFIGMAPS, child, parent, field_manager="pc")
    assert applied["metadata"]["namespace"] == ns
    [ref] = applied["metadata"]["ownerReferences"]
    assert ref["uid"] == parent["metadata"]["uid"]
    assert ref["controller"] is True
    managers = {m["manager"]: m["operation"] for m in applied["metadata"]["managedFields"]}
    assert managers == {"pc": "Apply"}
    # another manager's key is left alone by the next apply
    await kube_client.patch(
        CONFIGMAPS, "child", {"data": {"theirs": "x"}}, ns, field_manager="someone-else"
    )
    again = await apply_child(kube_client, CONFIGMAPS, child, parent, field_manager="pc")
    assert again["data"] == {"from-parent": "1", "theirs": "x"}
