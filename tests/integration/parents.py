"""The issue-12 operator: one ConfigMap child per custom resource, status with
observedGeneration through ``update_status``, as the README shows. Shared by the
scope and two-writer tests; the oracles there read the apiserver, not this code."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from kubeloop import CONFIGMAPS, Client, Manager, Request, Result, update_status
from kubeloop.envtest import ControlPlane
from kubeloop.testing import new_manager, resource_of, simple_crd

GROUP = "parents.kubeloop.dev"
PARENT_CRD = simple_crd(
    GROUP,
    "Parent",
    spec={"size": {"type": "integer", "minimum": 0}},
    status={"observedGeneration": {"type": "integer"}, "size": {"type": "integer"}},
)
PARENTS = resource_of(PARENT_CRD)


def parent(name: str, size: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Parent",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


def child_name(name: str) -> str:
    return f"{name}-child"


def operator(
    client: Client,
    namespace: str | None,
    *,
    work: float = 0.0,
    controller: str = "parents",
    **options: Any,
) -> Manager:
    """``for_(PARENTS, namespace=namespace).owns(CONFIGMAPS)``; ``work`` seconds of
    pretend provisioning between the read and the status write widen the race."""
    mgr = new_manager(client, **options)

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(PARENTS, req.name, req.namespace)
        if obj is None:
            return Result()
        meta = obj["metadata"]
        generation, size = meta["generation"], obj["spec"]["size"]
        want = {"size": str(size)}
        name = child_name(req.name)
        child = await mgr.cache.get(CONFIGMAPS, name, req.namespace)
        if child is None:
            await client.create(
                CONFIGMAPS,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": req.namespace,
                        "ownerReferences": [
                            {
                                "apiVersion": f"{GROUP}/v1",
                                "kind": "Parent",
                                "name": req.name,
                                "uid": meta["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "data": want,
                },
            )
        elif child.get("data") != want:
            child["data"] = want  # a copy: the cache is not touched
            await client.update(CONFIGMAPS, child)
        if work:
            await asyncio.sleep(work)

        def done(status: dict[str, Any]) -> None:
            status["observedGeneration"] = generation
            status["size"] = size

        await update_status(client, PARENTS, obj, done)
        return Result()

    mgr.controller(controller).for_(PARENTS, namespace=namespace).owns(CONFIGMAPS).complete(
        reconcile
    )
    return mgr


# -- the apiserver's own count of requests ------------------------------------------------

_SAMPLE = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})  # as the apiserver labels them


async def apiserver_writes(cp: ControlPlane) -> dict[tuple[str, str, str], float]:
    """Successful writes the apiserver served, by (verb, resource, subresource), from its
    ``/metrics`` (``apiserver_request_total``)."""
    text = await asyncio.to_thread(cp.rest().get, "/metrics")
    out: dict[tuple[str, str, str], float] = {}
    for labels, value in _SAMPLE.findall(str(text)):
        tags = dict(_LABEL.findall(labels))
        if tags.get("verb") not in _WRITES or not tags.get("code", "").startswith("2"):
            continue
        key = (tags["verb"], tags.get("resource", ""), tags.get("subresource", ""))
        out[key] = out.get(key, 0.0) + float(value)
    return out


def delta(
    after: dict[tuple[str, str, str], float],
    before: dict[tuple[str, str, str], float],
    resources: frozenset[str],
) -> dict[tuple[str, str, str], float]:
    return {
        k: v - before.get(k, 0.0)
        for k, v in after.items()
        if k[1] in resources and v - before.get(k, 0.0) > 0
    }


def managers_of(obj: dict[str, Any]) -> set[str]:
    """The field managers the apiserver recorded on ``obj``."""
    return {e.get("manager", "") for e in obj["metadata"].get("managedFields") or ()}


# -- as a process: python -m tests.integration.parents --kubeconfig K --namespace NS ----------


def main() -> None:
    import argparse
    import logging

    parser = argparse.ArgumentParser(description="the issue-12 operator, scoped to a namespace")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--field-manager", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    async def run() -> None:
        async with Client.from_kubeconfig(
            args.kubeconfig, field_manager=args.field_manager, qps=200.0, burst=300
        ) as client:
            await operator(client, args.namespace, handle_signals=True).run()  # until SIGTERM

    asyncio.run(run())


if __name__ == "__main__":
    main()
