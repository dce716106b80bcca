"""Worked example: test your own operator under API faults with kubeloop's fault kit.

The operator under test is tiny: for every ConfigMap labelled ``role=source`` it keeps a
``<name>-mirror`` ConfigMap with the same data, and deletes the mirror when the source
goes. The test runs the same workload twice through one :class:`FaultProxy`:

* a **reference run** in one namespace, without faults;
* a **faulty run** in another, where the operator's requests are throttled (429 with
  Retry-After), fail (503), have their connections reset, and its watches are cut
  every couple of events.

Then the faults stop and two oracles judge the outcome from the apiserver, not from
the operator: the faulty run must reach the desired state and stay there
(:func:`eventually_stable`), and its end state and per-object create/delete counts must
equal the reference run's (:func:`compare_runs`, Sieve's differential check).

Run it with ``pytest examples/faults`` (it starts a local control plane via the
``kube_control_plane`` fixture of kubeloop's pytest plugin). To test your operator,
replace :func:`run_operator` with code that starts it against the kubeconfig the
proxy gives you: ``proxy.kubeconfig_for("my-operator")`` for a subprocess, or
``proxy.client_config(...)`` for an in-process :class:`~kubeloop.Client`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, AlreadyExists, Client, NotFound, Request, Result
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, running
from kubeloop.testing.faults import (
    CutWatch,
    FaultProxy,
    Reset,
    service_unavailable,
    too_many_requests,
)
from kubeloop.testing.oracles import (
    RunRecord,
    WatchRecorder,
    assert_no_differences,
    capture_state,
    compare_runs,
    eventually_stable,
    live_mismatches,
)

pytestmark = pytest.mark.integration

SOURCES = ["alpha", "beta", "gamma", "delta", "epsilon"]
#: The objects this test is about (a cluster may put others in every namespace).
OURS = "role in (source,mirror)"
SOURCE = "role=source"

# -- the operator under test ---------------------------------------------------------------


@contextlib.asynccontextmanager
async def run_operator(client: Client, namespace: str) -> AsyncIterator[None]:
    """The mirror operator, running for the body of the ``async with``."""
    mgr = new_manager(client)

    async def reconcile(req: Request) -> Result:
        # Read from the informer that triggers this reconcile (same selector): a read without
        # it would start a second informer, whose watch may lag behind the first one's, and
        # a reconcile that sees the old data then has no event left to run it again.
        source = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace, label_selector=SOURCE)
        mirror = f"{req.name}-mirror"
        if source is None:
            with contextlib.suppress(NotFound):
                await client.delete(CONFIGMAPS, mirror, req.namespace)
            return Result()
        try:
            current = await client.get(CONFIGMAPS, mirror, req.namespace)
        except NotFound:
            try:
                await client.create(
                    CONFIGMAPS,
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": mirror, "labels": {"role": "mirror"}},
                        "data": source.get("data") or {},
                    },
                    req.namespace,
                )
            except AlreadyExists:  # our earlier create went through after all: look again
                return Result(requeue=True)
            return Result()
        if (current.get("data") or {}) != (source.get("data") or {}):
            current["data"] = source.get("data") or {}
            await client.update(CONFIGMAPS, current)
        return Result()

    mgr.controller("mirror").for_(CONFIGMAPS, namespace=namespace, label_selector=SOURCE).complete(
        reconcile
    )
    async with running(mgr):
        yield


# -- the workload and the desired state ----------------------------------------------------


def source(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"role": "source"}},
        "data": {"value": value},
    }


def desired(step: int) -> dict[str, dict[str, Any] | None]:
    """Name → what must be true of it after workload step ``step`` (None: absent)."""
    want: dict[str, dict[str, Any] | None] = {}
    for i, name in enumerate(SOURCES):
        gone = step >= 3 and name == SOURCES[-1]
        value = "v2" if step >= 2 and i < 3 else "v1"
        want[name] = None if gone else {"data": {"value": value}}
        want[f"{name}-mirror"] = None if gone else {"data": {"value": value}}
    return want


async def workload(user: Client, namespace: str, settled: Callable[[int], Awaitable[None]]) -> None:
    """What a user does: create sources, change some, delete one. Like Sieve's
    workloads it waits for each step to settle, so that the two runs are comparable
    (otherwise a slower faulty run may never mirror a source that is deleted soon after)."""
    for name in SOURCES:
        await user.create(CONFIGMAPS, source(name, "v1"), namespace)
    await settled(1)
    for name in SOURCES[:3]:
        obj = await user.get(CONFIGMAPS, name, namespace)
        obj["data"] = {"value": "v2"}
        await user.update(CONFIGMAPS, obj)
    await settled(2)
    await user.delete(CONFIGMAPS, SOURCES[-1], namespace)


def managed(_res: Any, obj: dict[str, Any]) -> bool:
    # leave out what the control plane creates in every namespace
    return bool(obj["metadata"]["name"] != "kube-root-ca.crt")


# -- the test ------------------------------------------------------------------------------


async def one_run(
    proxy: FaultProxy, admin: Client, cp: ControlPlane, name: str, *, faults: bool
) -> RunRecord:
    namespace = cp.create_namespace(name)
    operator = f"{name}-operator"
    rules = []
    if faults:
        rules = [
            proxy.add_rule(too_many_requests(1), client=operator, verb="create", probability=0.5),
            proxy.add_rule(service_unavailable(), client=operator, verb="update", probability=0.5),
            proxy.add_rule(Reset(), client=operator, verb="get", probability=0.3),
            proxy.add_rule(CutWatch(after_events=2), client=operator, watch=True),
        ]
    async with (
        Client(proxy.client_config(operator)) as op_client,
        Client(proxy.client_config(f"{name}-user")) as user,
        WatchRecorder(admin, [CONFIGMAPS], namespace=namespace) as recorder,
        run_operator(op_client, namespace),
    ):

        async def settled(step: int) -> None:
            async def matches() -> bool:
                found = await live_mismatches(
                    admin, CONFIGMAPS, desired(step), namespace=namespace, label_selector=OURS
                )
                return not found

            await eventually(matches, f"workload step {step} in {namespace}", 60)

        await workload(user, namespace, settled)
        for rule in rules:  # the faults stop; from here on the operator must converge
            proxy.remove_rule(rule)
        await eventually_stable(
            lambda: live_mismatches(
                admin, CONFIGMAPS, desired(3), namespace=namespace, label_selector=OURS
            ),
            within=60,
            stable_for=2,
            recorder=recorder,
            what=f"every source mirrored in {namespace}",
        )
    state = await capture_state(admin, [CONFIGMAPS], namespace=namespace, include=managed)
    return RunRecord(state, recorder.operations)


async def test_mirror_operator_survives_api_faults(kube_control_plane: ControlPlane) -> None:
    async with (
        FaultProxy(kube_control_plane, seed=7) as proxy,
        Client.from_kubeconfig(kube_control_plane.kubeconfig) as admin,
    ):
        reference = await one_run(proxy, admin, kube_control_plane, "ref", faults=False)
        faulty = await one_run(proxy, admin, kube_control_plane, "faulty", faults=True)
        # the faults did strike: the oracle below is not judging a fault-free run
        injected = proxy.log.entries(client="faulty-operator", where=lambda e: e.rule is not None)
        assert injected, proxy.log.dump()
        assert_no_differences(compare_runs(reference, faulty))
