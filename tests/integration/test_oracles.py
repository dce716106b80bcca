"""The oracles against the real apiserver: each one passes on a good run and fails on a
bad one, naming what differed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, Client, Object
from kubeloop.envtest import ControlPlane
from kubeloop.testing.faults import FaultProxy
from kubeloop.testing.oracles import (
    NotStable,
    RunRecord,
    WatchRecorder,
    capture_state,
    compare_runs,
    eventually_stable,
    live_mismatches,
    operations_from_log,
)

pytestmark = pytest.mark.integration


def cm(name: str, **data: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def managed(_res: Any, obj: Object) -> bool:
    return bool(obj["metadata"]["name"] != "kube-root-ca.crt")


async def test_differential_check_sees_a_recreate_the_end_state_hides(
    kube_control_plane: ControlPlane, kube_client: Client
) -> None:
    cp = kube_control_plane
    async with FaultProxy(cp) as proxy, Client(proxy.client_config("writer")) as writer:

        async def run(*, recreate: bool) -> tuple[RunRecord, RunRecord]:
            ns = cp.create_namespace("diff")
            async with WatchRecorder(kube_client, [CONFIGMAPS], namespace=ns) as rec:
                await writer.create(CONFIGMAPS, cm("a", k="1"), ns)
                await writer.create(CONFIGMAPS, cm("b", k="1"), ns)
                if recreate:  # the bug: delete and create again, ending where it started
                    await writer.delete(CONFIGMAPS, "a", ns)
                    await writer.create(CONFIGMAPS, cm("a", k="1"), ns)
                obj = await writer.get(CONFIGMAPS, "b", ns)
                obj["data"] = {"k": "2"}
                await writer.update(CONFIGMAPS, obj)
                await rec.wait_for_count(5 if recreate else 3, timeout=30)
            state = await capture_state(kube_client, [CONFIGMAPS], namespace=ns, include=managed)
            from_log = operations_from_log(proxy.log, namespace=ns)
            return RunRecord(state, rec.operations), RunRecord(state, from_log)

        (ref_watch, ref_log), (ref2_watch, _) = await run(recreate=False), await run(recreate=False)
        bad_watch, bad_log = await run(recreate=True)

    assert compare_runs(ref_watch, ref2_watch) == []  # two good runs agree
    assert ref_watch.state.objects == bad_watch.state.objects  # the end state looks right
    for ref, bad in ((ref_watch, bad_watch), (ref_log, bad_log)):
        found = [str(d) for d in compare_runs(ref, bad)]
        assert found == [
            "configmaps a: creates 2 times (reference 1)",
            "configmaps a: deletes 1 times (reference 0)",
        ]


async def test_eventually_stable_passes_once_the_state_settles_and_fails_on_a_flap(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, cm("target", phase="pending"), ns)
    want = {"target": {"data": {"phase": "ready"}}}

    async def set_phase(phase: str, after: float) -> None:
        await asyncio.sleep(after)
        obj = await kube_client.get(CONFIGMAPS, "target", ns)
        obj["data"] = {"phase": phase}
        await kube_client.update(CONFIGMAPS, obj)

    async with WatchRecorder(kube_client, [CONFIGMAPS], namespace=ns) as rec:
        settle = asyncio.create_task(set_phase("ready", 0.5))
        result = await eventually_stable(
            lambda: live_mismatches(
                kube_client, CONFIGMAPS, want, namespace=ns, only_expected=True
            ),
            within=30,
            stable_for=1.0,
            recorder=rec,
        )
        await settle
        assert result.stable_checks >= 1

        # a writer that undoes the state after it matched: the check must notice
        flap = asyncio.create_task(set_phase("pending", 0.3))
        with pytest.raises(NotStable, match="then stopped holding") as err:
            await eventually_stable(
                lambda: live_mismatches(
                    kube_client, CONFIGMAPS, want, namespace=ns, only_expected=True
                ),
                within=30,
                stable_for=30,
                recorder=rec,
                what="target ready",
            )
        await flap
    assert err.value.broke
    assert err.value.mismatches == [
        "configmaps target: data.phase: expected 'ready', got 'pending'"
    ]
