"""What every operator does to the objects it manages: finalizers, owner references,
create-or-update, server-side apply of children (controller-runtime's ``controllerutil``).

Each write here changes only what it is about, so another writer's change between our
read and our write is never undone:

* finalizers go through JSON patches guarded by a ``test`` op, never a whole-list
  replace (a merge patch would drop a finalizer someone else just added); a failed
  ``test`` is a lost race, re-read and retried on the conflict backoff;
* :func:`create_or_update` re-reads and re-runs the caller's ``mutate`` on a 409
  (the one :func:`~kubeloop.retry_on_conflict` loop) and sends nothing when ``mutate``
  changed nothing;
* :func:`create_or_patch` sends a JSON merge patch of exactly what ``mutate`` changed,
  so it cannot conflict on fields it did not touch;
* :func:`apply_child` is server-side apply with the owner reference set: the apiserver
  tracks which fields each manager owns.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable, Mapping
from typing import Any

from kubeloop._client import Client, PatchType
from kubeloop._errors import Conflict, Invalid, KubeloopError, NotFound
from kubeloop._resource import Object, Resource
from kubeloop._retry import retry_on_conflict

JsonPatch = list[dict[str, Any]]
Mutate = Callable[[Object], None]


class OperationResult(enum.Enum):
    """What :func:`create_or_update` / :func:`create_or_patch` did."""

    NONE = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    PATCHED = "patched"


class AlreadyOwnedError(KubeloopError):
    """The object already has a different controller: two controllers must not
    both manage it (controller-runtime's ``AlreadyOwnedError``)."""


# -- finalizers ------------------------------------------------------------------------


def has_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def finalizer_add_patch(obj: Object, finalizer: str) -> JsonPatch:
    """A JSON patch appending ``finalizer``, valid only at the resourceVersion read."""
    meta = obj["metadata"]
    guard = {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
    if meta.get("finalizers"):
        return [guard, {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
    return [guard, {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]


def finalizer_remove_patch(obj: Object, finalizer: str) -> JsonPatch:
    """A JSON patch removing ``finalizer`` from where it was read, if still there."""
    index = obj["metadata"]["finalizers"].index(finalizer)
    path = f"/metadata/finalizers/{index}"
    return [{"op": "test", "path": path, "value": finalizer}, {"op": "remove", "path": path}]


async def _json_patch(client: Client, res: Resource, obj: Object, ops: JsonPatch) -> Object:
    meta = obj["metadata"]
    return await client.patch(
        res, meta["name"], ops, meta.get("namespace"), patch_type=PatchType.JSON
    )


def _did_not_apply(err: Invalid) -> bool:
    """The apiserver could not apply our JSON patch to the live object: a ``test`` op
    failed or a list index is gone, i.e. the object changed since we read it. That 422
    carries no field causes; a validation failure of the result (a malformed finalizer
    name) names its fields, and stays the terminal error it is."""
    return not err.causes


async def _set_finalizer(
    client: Client, res: Resource, obj: Object, finalizer: str, *, present: bool
) -> Object:
    """Patch ``obj`` until ``finalizer`` is (or is not) in its list, as the server has it.

    Every patch is guarded (the resourceVersion for an add, the value at the index for a
    remove), so it never duplicates a finalizer or removes another controller's. A guard
    that fails means another writer got in between our read and our patch: that is a
    race, so it is raised as a :class:`~kubeloop.Conflict` and retried, after a fresh
    read, on the conflict backoff (:func:`~kubeloop.retry_on_conflict`); never the
    terminal ``Invalid`` that would make a controller forget the object. When the
    backoff runs out, the Conflict propagates and the workqueue requeues.
    """
    meta = obj["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    current: Object | None = obj

    async def attempt() -> Object:
        nonlocal current
        live = current if current is not None else await client.get(res, name, namespace)
        current = None  # every later try reads afresh
        if has_finalizer(live, finalizer) == present:
            return live
        ops = (
            finalizer_add_patch(live, finalizer)
            if present
            else finalizer_remove_patch(live, finalizer)
        )
        try:
            return await _json_patch(client, res, live, ops)
        except Invalid as err:
            if not _did_not_apply(err):
                raise
            raise Conflict(
                409,
                "Conflict",
                f"{res.key} {name!r} changed since it was read; its finalizers are read "
                f"again ({err.message})",
                details=err.details,
            ) from err

    return await retry_on_conflict(attempt)


async def add_finalizer(client: Client, res: Resource, obj: Object, finalizer: str) -> Object:
    """``obj`` with ``finalizer`` added, as the server has it (``obj`` itself if it was
    there already). Another writer between the read and the patch is retried after a
    re-read (see :func:`_set_finalizer`); only a Conflict, never a terminal error, comes
    out of a race that outlasts the conflict backoff."""
    if has_finalizer(obj, finalizer):
        return obj
    return await _set_finalizer(client, res, obj, finalizer, present=True)


async def remove_finalizer(
    client: Client, res: Resource, obj: Object, finalizer: str
) -> Object | None:
    """Remove ``finalizer``; returns the server's answer (for an object being deleted
    whose last finalizer this was, its final state: it is gone afterwards), ``obj`` when
    there was nothing to remove, or None when the object no longer exists. Controllers
    removing their own finalizers at once each retry after a re-read, so none of them
    is lost and the object is not left Terminating."""
    if not has_finalizer(obj, finalizer):
        return obj
    try:
        return await _set_finalizer(client, res, obj, finalizer, present=False)
    except NotFound:
        return None


# -- owner references ------------------------------------------------------------------


def owner_reference(
    owner: Object, *, controller: bool = False, block_owner_deletion: bool = False
) -> dict[str, Any]:
    """An ``ownerReferences`` entry pointing at ``owner`` (which must have a uid)."""
    meta = owner.get("metadata") or {}
    for key in ("name", "uid"):
        if not meta.get(key):
            raise ValueError(f"owner has no metadata.{key}: it must be read from the server")
    ref: dict[str, Any] = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if controller:
        ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


def _check_scope(owner: Object, obj: Object) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace")
    obj_ns = (obj.get("metadata") or {}).get("namespace")
    # the garbage collector ignores (and warns about) cross-namespace owners
    if owner_ns and owner_ns != obj_ns:
        raise ValueError(
            f"cross-namespace owner references are not allowed: owner in {owner_ns!r}, "
            f"object in {obj_ns!r}"
        )


def _group(ref: Mapping[str, Any]) -> str:
    api_version = str(ref.get("apiVersion", ""))
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _same_owner(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """One owner whatever its version (controller-runtime compares group and kind)."""
    return (_group(a), a.get("kind"), a.get("name")) == (_group(b), b.get("kind"), b.get("name"))


def set_owner_reference(owner: Object, obj: Object) -> None:
    """Add (or refresh) a non-controller owner reference to ``owner`` on ``obj``."""
    _check_scope(owner, obj)
    refs: list[dict[str, Any]] = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
    new = owner_reference(owner)
    for i, ref in enumerate(refs):
        if _same_owner(ref, new):
            keep: dict[str, Any] = {
                k: ref[k] for k in ("controller", "blockOwnerDeletion") if k in ref
            }
            refs[i] = {**new, **keep}
            return
    refs.append(new)


def set_controller_reference(owner: Object, obj: Object) -> None:
    """Make ``owner`` the controller of ``obj`` (``controller: true``,
    ``blockOwnerDeletion: true``); :class:`AlreadyOwnedError` if another is."""
    _check_scope(owner, obj)
    refs: list[dict[str, Any]] = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
    new = owner_reference(owner, controller=True, block_owner_deletion=True)
    for ref in refs:
        if ref.get("controller") and not _same_owner(ref, new):
            raise AlreadyOwnedError(
                f"{obj.get('kind', 'object')} {obj['metadata'].get('name')!r} is already "
                f"controlled by {ref.get('kind')} {ref.get('name')!r}"
            )
    for i, ref in enumerate(refs):
        if _same_owner(ref, new):
            refs[i] = new
            return
    refs.append(new)


def controller_of(obj: Object) -> dict[str, Any] | None:
    """The ``controller: true`` owner reference of ``obj``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


# -- create or update ------------------------------------------------------------------


def _skeleton(res: Resource, name: str, namespace: str | None) -> Object:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta}


def _check_identity(obj: Object, name: str, namespace: str | None) -> None:
    meta = obj.get("metadata") or {}
    if meta.get("name") != name or meta.get("namespace") != namespace:
        raise ValueError("mutate must not change the object's name or namespace")


async def create_or_update(
    client: Client,
    res: Resource,
    name: str,
    namespace: str | None,
    mutate: Mutate,
) -> tuple[OperationResult, Object]:
    """Get the object (or start from an empty one), run ``mutate`` on it, then create
    it, update it, or send nothing if ``mutate`` changed nothing.

    ``mutate`` must set only what the caller owns (it runs again on a fresh copy after
    a 409). Status is not written: use :func:`~kubeloop.update_status` for that.
    """

    async def attempt() -> tuple[OperationResult, Object]:
        try:
            live = await client.get(res, name, namespace)
        except NotFound:
            obj = _skeleton(res, name, namespace)
            mutate(obj)
            _check_identity(obj, name, namespace)
            return OperationResult.CREATED, await client.create(res, obj, namespace)
        desired = copy.deepcopy(live)
        mutate(desired)
        _check_identity(desired, name, namespace)
        if desired == live:
            return OperationResult.NONE, live
        return OperationResult.UPDATED, await client.update(res, desired)

    return await retry_on_conflict(attempt)


def merge_patch(before: Any, after: Any) -> Any:
    """The RFC 7386 JSON merge patch that turns ``before`` into ``after``."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return copy.deepcopy(after)
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = copy.deepcopy(value)
        elif before[key] != value:
            patch[key] = merge_patch(before[key], value)
    return patch


async def create_or_patch(
    client: Client,
    res: Resource,
    name: str,
    namespace: str | None,
    mutate: Mutate,
) -> tuple[OperationResult, Object]:
    """Like :func:`create_or_update`, but an existing object gets a JSON merge patch of
    exactly what ``mutate`` changed (no resourceVersion: no conflict on other fields).
    Changes ``mutate`` makes to ``status`` are ignored (status has its own writes)."""
    try:
        live = await client.get(res, name, namespace)
    except NotFound:
        obj = _skeleton(res, name, namespace)
        mutate(obj)
        _check_identity(obj, name, namespace)
        obj.pop("status", None)
        return OperationResult.CREATED, await client.create(res, obj, namespace)
    desired = copy.deepcopy(live)
    mutate(desired)
    _check_identity(desired, name, namespace)
    before = {k: v for k, v in live.items() if k != "status"}
    after = {k: v for k, v in desired.items() if k != "status"}
    patch = merge_patch(before, after)
    if not patch:
        return OperationResult.NONE, live
    return OperationResult.PATCHED, await client.patch(
        res, name, patch, namespace, patch_type=PatchType.MERGE
    )


async def apply_child(
    client: Client,
    res: Resource,
    child: Object,
    owner: Object,
    *,
    field_manager: str | None = None,
    force: bool = True,
) -> Object:
    """Server-side apply ``child`` (only the fields this controller owns) with
    ``owner`` as its controller. ``force`` (the default for controllers, as
    controller-runtime's docs advise) takes fields over from other managers."""
    obj = copy.deepcopy(child)
    obj.setdefault("apiVersion", res.api_version)
    obj.setdefault("kind", res.kind)
    meta = obj.setdefault("metadata", {})
    if res.namespaced and "namespace" not in meta:
        owner_ns = (owner.get("metadata") or {}).get("namespace")
        if owner_ns:
            meta["namespace"] = owner_ns
    meta["ownerReferences"] = [
        r for r in meta.get("ownerReferences") or [] if not r.get("controller")
    ]
    set_controller_reference(owner, obj)
    return await client.apply(res, obj, field_manager=field_manager, force=force)
