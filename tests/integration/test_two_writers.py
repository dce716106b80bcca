"""Issue 12's scenarios with more than one writer, checked at the apiserver.

* Two instances of one operator, scoped to namespaces A and B: a spec change on
  every object in A converges with the writes of one instance (counted by the
  apiserver's ``apiserver_request_total``) and instance B leaves no trace in A
  (no managedFields entry of B's field manager).
* Two controllers writing one object's status while a third writer bumps the spec
  1,000 times: every status write seen on a watch has an observedGeneration at
  least the previous one, and the last equals the generation.
* Every 409 names the other writer, by the field manager the apiserver recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubeloop import CONFIGMAPS, Client, OutOfScope, WatchEvent
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, running
from tests.integration.parents import (
    PARENT_CRD,
    PARENTS,
    apiserver_writes,
    child_name,
    delta,
    managers_of,
    operator,
    parent,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: A client-side limit well above what these tests send (the limit has unit tests).
FAST = 200.0


@pytest.fixture(scope="module")
def parents_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([PARENT_CRD])


@contextlib.asynccontextmanager
async def client_for(cp: ControlPlane, field_manager: str) -> AsyncIterator[Client]:
    async with Client.from_kubeconfig(cp.kubeconfig, field_manager=field_manager, qps=FAST) as c:
        yield c


async def converged(client: Client, ns: str, count: int) -> bool:
    items, _ = await client.list_all(PARENTS, ns)
    return len(items) == count and all(
        (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
        and o["status"].get("size") == o["spec"]["size"]
        for o in items
    )


@contextlib.asynccontextmanager
async def instance(cp: ControlPlane, ns: str, field_manager: str) -> AsyncIterator[None]:
    """The operator in a process of its own, stopped with SIGTERM (a graceful shutdown)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.parents",
        "--kubeconfig",
        str(cp.kubeconfig),
        "--namespace",
        ns,
        "--field-manager",
        field_manager,
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]


async def test_two_instances_in_different_namespaces_never_touch_each_other(
    kube_control_plane: ControlPlane, parents_crd: None
) -> None:
    """Two operator processes, one per namespace; oracles read the apiserver only."""
    cp, n = kube_control_plane, 100
    ns_a, ns_b = cp.create_namespace("inst-a"), cp.create_namespace("inst-b")
    async with client_for(cp, "admin") as admin:
        for i in range(n):
            await admin.create(PARENTS, parent(f"p{i}"), ns_a)
        for i in range(10):
            await admin.create(PARENTS, parent(f"p{i}"), ns_b)  # the same names in B
        async with instance(cp, ns_a, "op-a"), instance(cp, ns_b, "op-b"):
            await eventually(lambda: converged(admin, ns_a, n), "A converged", timeout=120)
            await eventually(lambda: converged(admin, ns_b, 10), "B converged", timeout=120)
            before = await apiserver_writes(cp)
            for i in range(n):
                await admin.patch(PARENTS, f"p{i}", {"spec": {"size": 2}}, ns_a)
            await eventually(lambda: converged(admin, ns_a, n), "A re-converged", timeout=120)
            # let any stray reconcile (there should be none) finish before counting
            await asyncio.sleep(1.0)
            after = await apiserver_writes(cp)
        writes = delta(after, before, frozenset({PARENTS.plural, "configmaps"}))
        # per object: our spec patch, the child's update, the status write; nothing else
        assert writes == {
            ("PATCH", PARENTS.plural, ""): n,
            ("PUT", "configmaps", ""): n,
            ("PUT", PARENTS.plural, "status"): n,
        }
        for ns, mine, other in ((ns_a, "op-a", "op-b"), (ns_b, "op-b", "op-a")):
            parents, _ = await admin.list_all(PARENTS, ns)
            children, _ = await admin.list_all(CONFIGMAPS, ns)
            for obj in parents + [c for c in children if c["metadata"]["name"].endswith("-child")]:
                managers = managers_of(obj)
                assert not any(m.startswith(other) for m in managers), (ns, obj, managers)
            assert any(m.startswith(mine) for p in parents for m in managers_of(p))
            names = {c["metadata"]["name"] for c in children}
            assert {child_name(p["metadata"]["name"]) for p in parents} <= names


async def test_a_restricted_manager_raises_out_of_scope_instead_of_widening(
    kube_control_plane: ControlPlane, parents_crd: None
) -> None:
    cp = kube_control_plane
    ns_a, ns_b = cp.create_namespace("scope-a"), cp.create_namespace("scope-b")
    async with client_for(cp, "op") as client:
        await client.create(
            CONFIGMAPS, {"metadata": {"name": "cm", "namespace": ns_a}, "data": {"k": "v"}}
        )
        mgr = operator(client, None, namespaces=[ns_a])  # for_ without a namespace
        assert [i for i in mgr.cache.informers] == []
        with pytest.raises(OutOfScope, match=ns_b):
            mgr.controller("other").for_(PARENTS, namespace=ns_b)
        async with running(mgr):
            await eventually(lambda: mgr.cache.informers != [], "informers started")
            with pytest.raises(OutOfScope, match=ns_b):
                await mgr.cache.get(CONFIGMAPS, "cm", ns_b)
            got = await mgr.cache.get(CONFIGMAPS, "cm", ns_a)
            assert got is not None
            assert got["data"] == {"k": "v"}
            got["data"]["k"] = "changed"  # a copy: the cache keeps the server's value
            again = await mgr.cache.get(CONFIGMAPS, "cm", ns_a)
            assert again is not None
            assert again["data"] == {"k": "v"}
            scopes = {(i.resource.plural, i.reflector.namespace) for i in mgr.cache.informers}
            assert scopes == {(PARENTS.plural, ns_a), ("configmaps", ns_a)}


# -- two writers on one object's status, and a spec writer ------------------------------


async def _record(client: Client, ns: str, rv: str, seen: dict[str, list[int]]) -> None:
    """Every version of every Parent the apiserver delivers: its observedGeneration."""
    while True:  # until cancelled; a watch the server ends resumes where it stopped
        async for event in client.watch(PARENTS, ns, resource_version=rv):
            if event.type != "BOOKMARK":
                _note(event, seen)
            rv = event.object["metadata"]["resourceVersion"]


def _note(event: WatchEvent, seen: dict[str, list[int]]) -> None:
    status = event.object.get("status") or {}
    if "observedGeneration" in status:
        seen[event.object["metadata"]["name"]].append(status["observedGeneration"])


async def test_observed_generation_never_goes_backwards_under_two_writers(
    kube_control_plane: ControlPlane, parents_crd: None, caplog: pytest.LogCaptureFixture
) -> None:
    cp, objects, bumps = kube_control_plane, 20, 50  # 1,000 spec changes
    ns = cp.create_namespace("writers")
    caplog.set_level(logging.INFO, logger="kubeloop.status")
    async with (
        client_for(cp, "oracle") as oracle,
        client_for(cp, "bumper") as bumper,
        client_for(cp, "ctl-one") as one,
        client_for(cp, "ctl-two") as two,
    ):
        for i in range(objects):
            await bumper.create(PARENTS, parent(f"p{i}"), ns)
        _, rv = await oracle.list_all(PARENTS, ns)
        seen: dict[str, list[int]] = defaultdict(list)
        recorder = asyncio.create_task(_record(oracle, ns, rv, seen))
        # two replicas of one controller, both writing status (no leader election):
        # the second writer of status; "work" widens the window between read and write
        first, second = operator(one, ns, work=0.005), operator(two, ns, work=0.005)
        try:
            async with running(first), running(second):
                for b in range(bumps):
                    for i in range(objects):
                        await bumper.patch(PARENTS, f"p{i}", {"spec": {"size": b + 2}}, ns)
                await eventually(lambda: converged(oracle, ns, objects), "converged", timeout=120)
                final, _ = await oracle.list_all(PARENTS, ns)
        finally:
            await asyncio.sleep(0.5)  # the last events reach the recorder
            recorder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recorder

    regressions = sum(
        1 for gens in seen.values() for prev, cur in itertools.pairwise(gens) if cur < prev
    )
    assert regressions == 0, {k: v for k, v in seen.items()}
    lost = [o for o in final if o["status"]["observedGeneration"] != o["metadata"]["generation"]]
    assert lost == []
    assert all(o["metadata"]["generation"] == bumps + 1 for o in final)
    assert sum(len(v) for v in seen.values()) >= objects, "the recorder saw status writes"

    # every conflict named who: the writers the apiserver recorded on the objects
    recorded = set().union(*(managers_of(o) for o in final))
    named: set[str] = set()
    for record in caplog.records:
        if record.getMessage().startswith("conflict on "):
            named.update(getattr(record, "other_managers", []))
    assert "bumper" in named
    assert named <= recorded, (named, recorded)
    counted: dict[str, float] = defaultdict(float)
    for mgr in (first, second):
        for (_, other), child in mgr.metrics.conflict_writers_total._children.items():
            counted[other] += child.value
    assert counted["bumper"] >= 1
    assert set(counted) <= recorded
