"""A reconcile's read sees at least the event that triggered it (issue 23, bug 4).

Two informers of ConfigMaps cover one namespace: the namespaced one a controller's
``for_(..., namespace=ns)`` watches, and a cluster-wide one (another controller's). The
fault proxy holds the cluster-wide watch open without answering, so that informer lags.
Another client creates, then changes, a ConfigMap: the namespaced watch delivers it and
the reconcile reads it. Reads used to prefer the cluster-wide informer: the reconcile
triggered by the create found nothing and returned (the object then waits for its next
event), and the one triggered by the change read the old data. A read is now served by
the covering informer furthest along, which has seen at least what the event's informer
had seen (as controller-runtime's single informer per kind guarantees by construction).
"""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Client, Object, Request, Result
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import FaultProxy, Hang

pytestmark = pytest.mark.integration


def _cm(name: str, v: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}}


async def test_a_reconcile_reads_what_its_namespaced_informer_delivered(
    kube_fault_proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    # what each reconcile of "x" read: (get's data, list's data), "-" for absent
    seen: list[tuple[str, str]] = []
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)

        async def reconcile(req: Request) -> Result:
            if req.name != "x":
                return Result()
            got = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
            listed = await mgr.cache.list(CONFIGMAPS, req.namespace)
            mine = [o for o in listed if o["metadata"]["name"] == req.name]
            seen.append(
                (
                    got["data"]["v"] if got is not None else "-",
                    mine[0]["data"]["v"] if mine else "-",
                )
            )
            return Result()

        async def ignore(req: Request) -> Result:
            return Result()

        mgr.controller("in-namespace").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
        mgr.controller("cluster-wide").for_(CONFIGMAPS, namespace=None).complete(ignore)
        async with running(mgr):
            await eventually(
                lambda: (
                    len(mgr.cache.informers) == 2 and all(i.has_synced for i in mgr.cache.informers)
                ),
                "both informers synced",
            )
            (wide,) = [i for i in mgr.cache.informers if i.reflector.namespace is None]
            (scoped,) = [i for i in mgr.cache.informers if i.reflector.namespace == ns]
            # from now on the cluster-wide watch is held open and never answered
            proxy.add_rule(Hang(), client="op", verb="watch", resource="configmaps", namespace="")
            proxy.cut_watches(client="op", resource="configmaps")
            await eventually(
                lambda: (
                    [w.path for w in proxy.open_watches("op")]
                    == [f"/api/v1/namespaces/{ns}/configmaps"]
                ),
                "the namespaced watch reopened, the cluster-wide one held",
                timeout=30,
            )

            await kube_client.create(CONFIGMAPS, _cm("x", "1"), ns)
            await eventually(lambda: len(seen) == 1, "a reconcile of the create")
            await kube_client.patch(CONFIGMAPS, "x", {"data": {"v": "2"}}, ns)
            await eventually(lambda: len(seen) == 2, "a reconcile of the change")

            assert seen == [("1", "1"), ("2", "2")]
            # the fault was in force: the cluster-wide informer never saw the object
            assert f"{ns}/x" not in wide.store
            assert f"{ns}/x" in scoped.store
            assert mgr.cache.live_read_fallbacks == 0
