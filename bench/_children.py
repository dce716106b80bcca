"""The child-owning job of ``bench/kopf_compare.py``: what every operator must make true.

Every ``Sample`` (CRD ``samples.bench.kubeloop.dev``) owns one ConfigMap of the same name in
its namespace, labelled ``LABEL=<sample name>``, controlled by it (an ``ownerReference`` with
``controller: true``, as ``kopf.adopt`` and kubeloop's ``set_controller_reference`` write it)
and holding ``data == {"size": str(spec.size)}``. A deleted child is created again.

Shared by the harness (which judges the children against it) and by the operators; it
imports neither kubeloop nor kopf (only aiohttp, through ``bench._raw``, for the kopf side's
child writes), so each operator process loads only its own framework.
"""

from __future__ import annotations

from typing import Any

from bench._raw import Api

#: The CRD of ``bench.throughput.SAMPLE_CRD`` (not imported: that would load kubeloop).
GROUP, VERSION, PLURAL, KIND = "bench.kubeloop.dev", "v1", "samples", "Sample"
#: Children carry it (the owner's name): kopf's index and handlers filter on it, the
#: harness cleans up by it.
LABEL = f"{GROUP}/sample"
#: kopf (defaults): its documented way to notice a missing child is a timer on the owners
#: (docs "Reconciliation": a timer, an index of the children); this is its interval, the
#: one the docs' example uses.
TIMER_INTERVAL_S = 10.0
#: Connections of the kopf side's aiohttp session for the children (kopf has no client of
#: its own for other objects; its docs use an external one).
CONNECTIONS = 32


def child_data(spec: dict[str, Any]) -> dict[str, str]:
    """The data a Sample's child holds."""
    return {"size": str(spec.get("size"))}


def child_of(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The child ConfigMap of Sample ``name``, without its owner reference (each framework
    adds that its own way)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: name}},
        "data": child_data(spec),
    }


def controller_uid(child: dict[str, Any]) -> str | None:
    """The UID of the Sample controlling ``child`` (None: no Sample controls it)."""
    for ref in (child.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == KIND
            and ref.get("apiVersion") == (f"{GROUP}/{VERSION}")
        ):
            return str(ref.get("uid"))
    return None


def configmaps_path(namespace: str, name: str | None = None) -> str:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return f"{path}/{name}" if name else path


async def _send(
    api: Api, method: str, path: str, body: Any, content_type: str, *, expected: int
) -> int:
    """One request; returns its status, raising on an error other than ``expected``."""
    headers = {**api.headers, "Content-Type": content_type}
    async with api.http.request(method, api.base + path, json=body, headers=headers) as resp:
        data = await resp.read()
        if resp.status >= 300 and resp.status != expected:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return resp.status


async def create_child(api: Api, child: dict[str, Any]) -> None:
    """POST the child; if it exists already, bring its data in line (a handler retried)."""
    path = configmaps_path(child["metadata"]["namespace"])
    if await _send(api, "POST", path, child, "application/json", expected=409) == 409:
        await patch_child(api, child)


async def patch_child(api: Api, child: dict[str, Any]) -> None:
    """Merge-PATCH the child's data; if it is gone, create it."""
    meta = child["metadata"]
    path = configmaps_path(meta["namespace"], meta["name"])
    patch = {"data": child["data"]}
    status = await _send(api, "PATCH", path, patch, "application/merge-patch+json", expected=404)
    if status == 404:
        await create_child(api, child)
