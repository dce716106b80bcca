"""A cluster-scoped owner of namespaced children, against the real apiserver: however its
events arrive (its own, or any child's in any namespace), the owner is one queue key, so
it is never reconciled by two workers at once (controller-runtime drops the child's
namespace for a cluster-scoped owner too)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from kubeloop import (
    CONFIGMAPS,
    Client,
    ControllerOptions,
    Request,
    Result,
    set_controller_reference,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, resource_of, running, simple_crd

pytestmark = pytest.mark.integration

GROUP = "scope.kubeloop.dev"
TENANT_CRD = simple_crd(GROUP, "Tenant", scope="Cluster")
TENANTS = resource_of(TENANT_CRD)
CHILDREN_PER_NAMESPACE = 6


@pytest.fixture(scope="module")
def tenant_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([TENANT_CRD])


async def test_a_cluster_scoped_owner_is_one_key_and_never_reconciled_concurrently(
    kube_control_plane: ControlPlane, kube_client: Client, tenant_crd: None
) -> None:
    assert not TENANTS.namespaced
    namespaces = [kube_control_plane.create_namespace("scope") for _ in range(2)]
    name = f"tenant-{namespaces[0]}"
    owner = await kube_client.create(
        TENANTS, {"apiVersion": f"{GROUP}/v1", "kind": "Tenant", "metadata": {"name": name}}
    )

    mgr = new_manager(kube_client)
    requests: list[Request] = []
    running_now: Counter[str] = Counter()
    most_at_once: Counter[str] = Counter()

    rounds_seen: list[str] = []

    async def reconcile(req: Request) -> Result:
        requests.append(req)
        live = await mgr.cache.get(TENANTS, req.name)
        rounds_seen.append(((live or {}).get("metadata", {}).get("labels") or {}).get("r", ""))
        running_now[req.name] += 1
        most_at_once[req.name] = max(most_at_once[req.name], running_now[req.name])
        try:
            await asyncio.sleep(0.05)  # long enough for other keys' workers to overlap
        finally:
            running_now[req.name] -= 1
        return Result()

    mgr.controller("tenants").for_(TENANTS).owns(CONFIGMAPS).with_options(
        ControllerOptions(max_concurrent_reconciles=4)
    ).complete(reconcile)

    def child(ns: str, i: int) -> dict[str, Any]:
        obj: dict[str, Any] = {"metadata": {"name": f"c{i}", "namespace": ns}, "data": {}}
        set_controller_reference(owner, obj)
        return obj

    async def touch(ns: str, i: int, round_: int) -> None:
        await kube_client.patch(CONFIGMAPS, f"c{i}", {"data": {"round": str(round_)}}, ns)

    async with running(mgr):
        await eventually(lambda: len(requests) >= 1, "the owner's first reconcile")
        await asyncio.gather(
            *(
                kube_client.create(CONFIGMAPS, child(ns, i), ns)
                for ns in namespaces
                for i in range(CHILDREN_PER_NAMESPACE)
            )
        )
        for round_ in range(3):  # child events from both namespaces, and the owner's own
            await asyncio.gather(
                *(touch(ns, i, round_) for ns in namespaces for i in range(CHILDREN_PER_NAMESPACE)),
                kube_client.patch(TENANTS, name, {"metadata": {"labels": {"r": str(round_)}}}),
            )
        await eventually(lambda: "2" in rounds_seen, "a reconcile after the last round")
        await asyncio.sleep(1.0)  # let the queue drain before stopping (no assertion on time)

    assert most_at_once[name] == 1  # never two workers on one object
    assert {r.name for r in requests} == {name}
    assert {r.namespace for r in requests} == {None}, Counter(r.namespace for r in requests)
