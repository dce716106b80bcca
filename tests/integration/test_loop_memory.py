"""Loop detection in bounded memory, against real watch events (issue 23, bug 7).

A standby (a manager that is not leader) starts its sources and never its workers, so
no reconcile ever starts: the detector used to keep every event (up to nine per object,
two decoded objects each) until one did. And it remembered own writes of objects no
source watches, whose events never come to end them.
"""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, LEASES, SECRETS, Client, Object, Request, Result
from kubeloop._event import Added, Deleted, Generic, Updated
from kubeloop._loopdetect import LoopDetector
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, running

pytestmark = pytest.mark.integration

DEADLINE = 60.0
N = 200


def configmap(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


def held_objects(det: LoopDetector) -> Iterator[Any]:
    """Everything the detector's own tables reach (not its options or callbacks)."""
    skip = {"options", "on_loop", "on_fight", "primary_kind"}
    stack: list[Any] = [v for k, v in vars(det).items() if k not in skip]
    seen: set[int] = set()
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        yield o
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif isinstance(o, Added | Updated | Deleted | Generic | Request):
            stack.extend(gc.get_referents(o))


async def test_a_standby_keeps_no_events_for_its_objects(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns, lease_name = kube_namespace, "loop-memory-standby"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease_name},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600, "renewTime": now},
    }
    await kube_client.create(LEASES, lease, ns)
    for i in range(N):
        await kube_client.create(CONFIGMAPS, configmap(f"c{i}"), ns)
    mgr = new_manager(
        kube_client,
        leader_election=True,
        leader_election_id=lease_name,
        leader_election_namespace=ns,
        identity="standby",
    )
    reconciled: list[Request] = []

    async def reconcile(req: Request) -> Result:
        reconciled.append(req)
        return Result()

    ctl = mgr.controller("standby").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
    assert ctl.loops is not None
    async with running(mgr):
        await eventually(
            lambda: ctl.loops is not None and len(ctl.loops._pending) == N,
            "the standby's cache to deliver every object",
            DEADLINE,
        )
        last: dict[str, str] = {}
        for round_ in range(3):  # three updates each by another writer
            for i in range(N):
                body = {"data": {"round": str(round_)}}
                done = await kube_client.patch(CONFIGMAPS, f"c{i}", body, ns)
                last[f"{ns}/c{i}"] = done["metadata"]["resourceVersion"]
        [informer] = mgr.cache.informers
        await eventually(
            lambda: all(informer.store.resource_version(k) == rv for k, rv in last.items()),
            "every update in the standby's cache",
            DEADLINE,
        )
        assert reconciled == [], "a standby does not reconcile"
        pending, own = len(ctl.loops._pending), len(ctl.loops._own)
        held = list(held_objects(ctl.loops))
    api_objects = [o for o in held if isinstance(o, dict) and "metadata" in o]
    assert api_objects == [], f"{len(api_objects)} decoded objects kept for {N} objects"
    assert (pending, own) == (N, 0)


async def test_own_writes_of_unwatched_kinds_and_deleted_objects_are_not_kept(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    mgr = new_manager(kube_client)

    async def reconcile(req: Request) -> Result:
        cm = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        if cm is None:
            return Result()
        # a Secret per ConfigMap: a kind this controller does not watch
        meta = {"name": req.name, "namespace": req.namespace}
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
        await mgr.client.apply(SECRETS, secret, force=True)
        if not (cm.get("metadata", {}).get("annotations") or {}).get("seen"):
            await mgr.client.patch(
                CONFIGMAPS, req.name, {"metadata": {"annotations": {"seen": "yes"}}}, req.namespace
            )
        return Result()

    ctl = mgr.controller("writer").for_(CONFIGMAPS, namespace=ns).complete(reconcile)
    assert ctl.loops is not None
    names = [f"w{i}" for i in range(20)]
    async with running(mgr):
        for name in names:
            await kube_client.create(CONFIGMAPS, configmap(name), ns)

        async def all_seen() -> bool:
            items, _ = await kube_client.list_all(CONFIGMAPS, ns)
            marked = {o["metadata"]["name"] for o in items if o["metadata"].get("annotations")}
            secrets, _ = await kube_client.list_all(SECRETS, ns)
            return marked >= set(names) and len(secrets) >= len(names)

        await eventually(all_seen, "every ConfigMap annotated and its Secret written", DEADLINE)
        # own writes remembered: the annotated ConfigMaps only, never the Secrets
        assert len(ctl.loops._own) == len(names)
        for name in names:
            await kube_client.delete(CONFIGMAPS, name, ns)
        await eventually(
            lambda: ctl.loops is not None and len(ctl.loops._own) == 0,
            "deleted objects forgotten",
            DEADLINE,
        )
    assert len(ctl.loops._pending) == 0
