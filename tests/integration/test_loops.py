"""Loop detection against real writes and real watch events.

Two shapes the detector used to miss: a loop through an owned child (the
reconcile rewrites a child, the child's event maps back to the owner), and two
writers fighting over one spec field (each write is an outside change to the
other, so no self-triggered streak ever forms). The oracle is the Warning
Event at the apiserver, which is what an operator's user would read.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, EVENTS, Client, Object, Request, Result
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, resource_of, running, simple_crd

pytestmark = pytest.mark.integration

GROUP = "loops.kubeloop.dev"
SITE_CRD = simple_crd(GROUP, "Site", spec={"size": {"type": "integer"}}, status={})
SITES = resource_of(SITE_CRD)
DEADLINE = 60.0


@pytest.fixture
def ns(kube_control_plane: ControlPlane) -> str:
    kube_control_plane.install_crds([SITE_CRD])
    return kube_control_plane.create_namespace("loops")


def site(name: str) -> Object:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Site",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }


async def warnings_about(client: Client, ns: str, obj: Object, reason: str) -> list[str]:
    items, _ = await client.list_all(EVENTS, ns)
    return [
        e["note"]
        for e in items
        if e.get("reason") == reason and e["regarding"].get("uid") == obj["metadata"]["uid"]
    ]


async def test_a_loop_through_an_owned_child_is_reported_on_the_owner(
    kube_client: Client, ns: str
) -> None:
    owner = await kube_client.create(SITES, site("web"), ns)
    mgr = new_manager(kube_client)

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(SITES, req.name, req.namespace)
        if obj is None:
            return Result()
        child: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{req.name}-config",
                "namespace": req.namespace,
                "ownerReferences": [
                    {
                        "apiVersion": f"{GROUP}/v1",
                        "kind": "Site",
                        "name": req.name,
                        "uid": obj["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            # the bug: a value that differs on every reconcile
            "data": {"renderedAt": str(time.time_ns())},
        }
        await mgr.client.apply(CONFIGMAPS, child, force=True)
        return Result()

    ctl = mgr.controller("sites").for_(SITES, namespace=ns).owns(CONFIGMAPS).complete(reconcile)
    async with running(mgr):
        await eventually(lambda: ctl.loops_detected >= 1, "the loop to be detected", DEADLINE)

        async def reported() -> bool:
            return bool(await warnings_about(kube_client, ns, owner, "ReconcileLoop"))

        await eventually(reported, "the ReconcileLoop Event on the owner", DEADLINE)
    notes = await warnings_about(kube_client, ns, owner, "ReconcileLoop")
    assert "ConfigMap web-config: data.renderedAt" in notes[0]
    assert ctl.loops_detected == 1  # reported once per streak, not once per reconcile


async def test_two_writers_fighting_over_a_spec_field_are_named(
    kube_control_plane: ControlPlane, kube_client: Client, ns: str
) -> None:
    target = await kube_client.create(SITES, site("contested"), ns)
    mgr = new_manager(kube_client)

    async def reconcile(req: Request) -> Result:
        return Result()  # only watching; the fight is between two other writers

    ctl = mgr.controller("sites").for_(SITES, namespace=ns).complete(reconcile)
    async with (
        Client.from_kubeconfig(kube_control_plane.kubeconfig, field_manager="gitops") as gitops,
        Client.from_kubeconfig(
            kube_control_plane.kubeconfig, field_manager="autoscaler"
        ) as autoscaler,
        running(mgr),
    ):
        await eventually(lambda: ctl.reconciles >= 1, "the first reconcile")
        for _ in range(3):  # gitops says 1, the autoscaler says 5, and again, and again
            await autoscaler.patch(SITES, "contested", {"spec": {"size": 5}}, ns)
            await gitops.patch(SITES, "contested", {"spec": {"size": 1}}, ns)
        await eventually(lambda: ctl.fights_detected >= 1, "the fight to be detected", DEADLINE)

        async def reported() -> bool:
            return bool(await warnings_about(kube_client, ns, target, "SpecFight"))

        await eventually(reported, "the SpecFight Event", DEADLINE)
    notes = await warnings_about(kube_client, ns, target, "SpecFight")
    assert len(notes) == 1
    assert "spec.size" in notes[0]
    assert "autoscaler and gitops" in notes[0]
    assert ctl.fights_detected == 1
