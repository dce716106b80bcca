"""Adding and removing a finalizer with a JSON patch that cannot clobber anyone else's.

A merge patch would replace the whole ``finalizers`` list; these patches carry a ``test``
op, so a list changed meanwhile makes the server refuse the patch instead. A failed test is
a 422, not a 409: the helpers re-read the object once and try again.
"""

from __future__ import annotations

from typing import Any

from kubeloop import Client, Invalid, Object, PatchType, Resource

JsonPatch = list[dict[str, Any]]


def has_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def add_patch(obj: Object, finalizer: str) -> JsonPatch:
    """Append ``finalizer``, provided the object is still at the version read."""
    meta = obj["metadata"]
    guard = {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
    if meta.get("finalizers"):
        return [guard, {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
    return [guard, {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]


def remove_patch(obj: Object, finalizer: str) -> JsonPatch:
    """Remove ``finalizer`` from where it was read, provided it is still there."""
    index = obj["metadata"]["finalizers"].index(finalizer)
    path = f"/metadata/finalizers/{index}"
    return [{"op": "test", "path": path, "value": finalizer}, {"op": "remove", "path": path}]


async def _patched(client: Client, res: Resource, obj: Object, ops: JsonPatch) -> Object:
    meta = obj["metadata"]
    return await client.patch(
        res, meta["name"], ops, meta.get("namespace"), patch_type=PatchType.JSON
    )


async def add_finalizer(client: Client, res: Resource, obj: Object, finalizer: str) -> Object:
    """``obj`` with ``finalizer`` added (the server's object)."""
    try:
        return await _patched(client, res, obj, add_patch(obj, finalizer))
    except Invalid:
        meta = obj["metadata"]
        obj = await client.get(res, meta["name"], meta.get("namespace"))
        if has_finalizer(obj, finalizer):
            return obj
        return await _patched(client, res, obj, add_patch(obj, finalizer))


async def remove_finalizer(client: Client, res: Resource, obj: Object, finalizer: str) -> None:
    """Remove ``finalizer`` from ``obj``; nothing if it is not there."""
    if not has_finalizer(obj, finalizer):
        return
    try:
        await _patched(client, res, obj, remove_patch(obj, finalizer))
    except Invalid:
        meta = obj["metadata"]
        obj = await client.get(res, meta["name"], meta.get("namespace"))
        if has_finalizer(obj, finalizer):
            await _patched(client, res, obj, remove_patch(obj, finalizer))
