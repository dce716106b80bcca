"""The client as a user gets it (``Client.from_kubeconfig()``, no arguments) against the
real apiserver: a burst of objects and a controller's writes for each are never held
behind a client-side token bucket (controller-runtime's default since #3119).

What is counted is the limiter's own record (:attr:`Client.limiter_waits`, one per
request that had to wait for a token), not time; the same burst through a client that
asks for client-go style limits shows the count is real.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, Client, ControllerOptions, Request, Result
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, running

pytestmark = pytest.mark.integration

BURST = 300
LABEL = "defaults.kubeloop.dev/burst"


def source(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"src-{i}", "labels": {LABEL: "yes"}}, "data": {"n": str(i)}}


async def create_burst(client: Client, namespace: str) -> None:
    await asyncio.gather(*(client.create(CONFIGMAPS, source(i), namespace) for i in range(BURST)))


async def test_a_burst_of_300_objects_is_never_held_behind_a_client_side_bucket(
    kube_control_plane: ControlPlane,
) -> None:
    ns = kube_control_plane.create_namespace("defaults")
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig) as admin:
        await create_burst(admin, ns)
        assert admin.limiter_waits == 0

        # the README's shape: a Manager on a default client, one write per object
        operator = Client.from_kubeconfig(kube_control_plane.kubeconfig)
        mgr = new_manager(operator)

        async def reconcile(req: Request) -> Result:
            obj = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
            if obj is None or (obj.get("data") or {}).get("seen") == "yes":
                return Result()
            await operator.patch(CONFIGMAPS, req.name, {"data": {"seen": "yes"}}, req.namespace)
            return Result()

        mgr.controller("burst").for_(CONFIGMAPS, namespace=ns).with_options(
            ControllerOptions(max_concurrent_reconciles=16)
        ).complete(reconcile)

        async def converged() -> bool:
            items, _ = await admin.list_all(CONFIGMAPS, ns, label_selector=f"{LABEL}=yes")
            done = [o for o in items if (o.get("data") or {}).get("seen") == "yes"]
            return len(done) == BURST

        async with operator, running(mgr):
            await eventually(converged, f"all {BURST} objects patched by the controller", 120)
        assert operator.limiter_waits == 0

        # the counter is real: the same burst through a 20/30 bucket waits for most tokens
        ns_limited = kube_control_plane.create_namespace("defaults-limited")
        async with Client.from_kubeconfig(
            kube_control_plane.kubeconfig, qps=20, burst=30
        ) as limited:
            await create_burst(limited, ns_limited)
            assert limited.limiter_waits >= BURST - 30 - 20
