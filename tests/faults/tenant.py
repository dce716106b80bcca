"""A cluster-scoped owner of namespaced children, for the fault matrix (issue 23, bug 2).

A ``Tenant`` (cluster-scoped) names namespaces and data; its reconcile keeps one
ConfigMap child per namespace, slowly (it reads a child, pauses as a reconcile that
calls out would, then writes it). ``for_(TENANTS).owns(CONFIGMAPS)`` with four
workers: a child's event in either namespace must map to the owner's one queue key, or
two workers reconcile one Tenant at once. The matrix sees that at the fault proxy: two
reconciles that read a child before either wrote it both write it, and one is answered
409 (AlreadyExists, Conflict); one reconcile at a time never is (nobody else writes
the children).

Each Tenant's child data also carries that of its source ConfigMap
(``source-<tenant>`` in the ``--sources`` namespace), read from the cache and watched by
a namespaced informer beside ``owns()``'s cluster-wide one: the matrix's ``watch-lag``
holds the cluster-wide watch, and a reconcile triggered by the source's event must read
it from the informer that delivered it (issue 23, bug 4).

    python tests/faults/tenant.py --kubeconfig K --label-selector run=x --identity op-1
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from kubeloop import (
    CONFIGMAPS,
    Client,
    ControllerOptions,
    Manager,
    ManagerOptions,
    NotFound,
    Object,
    Request,
    Result,
    configure_logging,
    load_kubeconfig,
    set_controller_reference,
    update_status,
)
from kubeloop.testing import resource_of, simple_crd

GROUP = "faults.kubeloop.dev"
TENANT_CRD = simple_crd(
    GROUP, "Tenant", scope="Cluster", status={"observedGeneration": {"type": "integer"}}
)
TENANTS = resource_of(TENANT_CRD)
#: The children's label (the Tenant's name).
CHILD_LABEL = "faults.kubeloop.dev/tenant"
#: The pause between reading a child and writing it: long enough for a second worker
#: on the same Tenant to read it too.
SLOW_S = 0.3


def child_name(tenant: str) -> str:
    return f"tenant-{tenant}"


def source_name(tenant: str) -> str:
    return f"source-{tenant}"


def _tenant_of_source(obj: Object) -> list[Request]:
    name = obj["metadata"]["name"]
    return [Request(name.removeprefix("source-"))] if name.startswith("source-") else []


class TenantOperator:
    def __init__(self, mgr: Manager, selector: str, sources: str) -> None:
        self.mgr, self.selector, self.sources = mgr, selector, sources

    def register(self) -> None:
        (
            self.mgr.controller("tenants")
            .for_(TENANTS, label_selector=self.selector)
            .owns(CONFIGMAPS)
            # a second informer of ConfigMaps, namespaced beside owns()'s cluster-wide one
            .watches(CONFIGMAPS, _tenant_of_source, namespace=self.sources)
            .with_options(ControllerOptions(max_concurrent_reconciles=4))
            .complete(self.reconcile)
        )

    async def reconcile(self, req: Request) -> Result:
        tenant = await self.mgr.cache.get(TENANTS, req.name, label_selector=self.selector)
        if tenant is None or tenant["metadata"].get("deletionTimestamp"):
            return Result()
        spec = tenant.get("spec") or {}
        data = {str(k): str(v) for k, v in (spec.get("data") or {}).items()}
        # the source's data from the cache: the namespaced informer delivered its event,
        # the cluster-wide one may lag behind it (issue 23, bug 4)
        source = await self.mgr.cache.get(CONFIGMAPS, source_name(req.name), self.sources)
        data.update((source or {}).get("data") or {})
        for ns in spec.get("namespaces") or []:
            await self._child(tenant, ns, data)

        def observed(status: dict[str, Any]) -> None:
            status["observedGeneration"] = tenant["metadata"]["generation"]

        await update_status(self.mgr.client, TENANTS, tenant, observed)
        return Result()

    async def _child(self, tenant: Object, ns: str, data: dict[str, str]) -> None:
        """Read the child live, and if it is not as wanted, write it a moment later
        (a create, or an update guarded by the resourceVersion read). One reconcile at
        a time never meets a 409 here: nobody else writes these children."""
        name = child_name(tenant["metadata"]["name"])
        try:
            child: Object | None = await self.mgr.client.get(CONFIGMAPS, name, ns)
        except NotFound:
            child = None
        if child is not None and child.get("data") == data:
            return
        await asyncio.sleep(SLOW_S)
        if child is None:
            new: Object = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {CHILD_LABEL: tenant["metadata"]["name"]}},
                "data": data,
            }
            set_controller_reference(tenant, new)
            await self.mgr.client.create(CONFIGMAPS, new, ns)
        else:
            await self.mgr.client.update(CONFIGMAPS, {**child, "data": data})


async def run(args: argparse.Namespace) -> None:
    client = Client(load_kubeconfig(args.kubeconfig), field_manager="faults-tenant")
    try:
        options = ManagerOptions(
            name="faults-tenant",
            identity=args.identity,
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=True,
        )
        mgr = Manager(client, options)
        TenantOperator(mgr, args.label_selector, args.sources).register()
        await mgr.run()
    finally:
        await client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--label-selector", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--sources", required=True, help="the namespace of the source ConfigMaps")
    configure_logging(os.environ.get("LOG_LEVEL", "INFO"), json_format=True)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
