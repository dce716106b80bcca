"""The kopf benchmark's child-owning job does what it claims, on every side.

Each operator of ``bench/kopf_compare.py``'s child-owning job (kubeloop with ``owns``, kopf
with the docs' index and timer, kopf-tuned with an event handler on the children) runs as
the benchmark runs it, as its own process, against the session control plane, at a tiny
size. The oracle is the apiserver: every Sample has a ConfigMap of its name, controlled by
that very Sample, holding its spec's size; after a spec change the data follows; a deleted
child comes back as a new object with the right data and owner, and every Sample keeps
one child. No time is asserted (the waits are generous bounds).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from bench._children import LABEL, TIMER_INTERVAL_S, controller_uid
from bench._raw import connect
from bench.kopf_compare import FRAMEWORKS, Operator, keep_unknown_status
from bench.throughput import SAMPLES, install_crd

from kubeloop import CONFIGMAPS, Client, NotFound
from kubeloop.envtest import ControlPlane

pytestmark = [pytest.mark.bench, pytest.mark.integration, pytest.mark.timeout(300)]

OBJECTS = 4
#: A generous bound; kopf's timer needs up to TIMER_INTERVAL_S to notice a deleted child.
WAIT_S = 60.0 + 2 * TIMER_INTERVAL_S


@contextlib.asynccontextmanager
async def operator(
    framework: str, kubeconfig: Path, namespace: str, log: Path
) -> AsyncIterator[Operator]:
    proc = Operator(framework, str(kubeconfig), namespace, log, job="children")
    try:
        yield proc
    finally:
        await asyncio.to_thread(proc.stop)


async def children_state(client: Client, namespace: str) -> dict[str, Any]:
    """Per Sample name: (its uid, its size, its child's uid, owner uid, data) read now."""
    samples = (await client.list(SAMPLES, namespace))["items"]
    out: dict[str, Any] = {}
    for s in samples:
        name = s["metadata"]["name"]
        try:
            cm = await client.get(CONFIGMAPS, name, namespace)
        except NotFound:
            cm = None
        out[name] = (
            s["metadata"]["uid"],
            s["spec"]["size"],
            None if cm is None else cm["metadata"]["uid"],
            None if cm is None else controller_uid(cm),
            None if cm is None else cm.get("data"),
            None if cm is None else cm["metadata"].get("labels", {}).get(LABEL),
        )
    return out


def all_right(state: dict[str, Any]) -> bool:
    return len(state) == OBJECTS and all(
        child_uid is not None and owner == uid and data == {"size": str(size)} and label == name
        for name, (uid, size, child_uid, owner, data, label) in state.items()
    )


async def wait_until(proc: Operator, client: Client, namespace: str, ok: Any) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        proc.check()
        state = await children_state(client, namespace)
        if ok(state):
            return state
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not converged after {WAIT_S:.0f} s: {state}\n{proc.tail()}")
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_child_owning_job(
    framework: str,
    kube_control_plane: ControlPlane,
    kube_client: Client,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    if framework != "kubeloop":  # a bench dependency `make setup` installs: absence fails
        assert importlib.util.find_spec("kopf") is not None, "kopf missing: uv sync --group bench"
    client, namespace = kube_client, kube_namespace
    await install_crd(client)
    async with connect(str(kube_control_plane.kubeconfig), 2) as api:
        await keep_unknown_status(api, client)
    async with operator(
        framework, kube_control_plane.kubeconfig, namespace, tmp_path / "op.log"
    ) as proc:
        for i in range(OBJECTS):
            await client.create(
                SAMPLES,
                {
                    "apiVersion": SAMPLES.api_version,
                    "kind": SAMPLES.kind,
                    "metadata": {"name": f"m{i:05d}"},
                    "spec": {"size": i},
                },
                namespace,
            )
        await wait_until(proc, client, namespace, all_right)

        # a spec change: the child's data follows, the child stays the same object
        before = await children_state(client, namespace)
        await client.patch(SAMPLES, "m00001", {"spec": {"size": 6}}, namespace)
        state = await wait_until(
            proc, client, namespace, lambda s: all_right(s) and s["m00001"][1] == 6
        )
        assert state["m00001"][2] == before["m00001"][2], "the child was replaced, not updated"

        # a deleted child comes back: a new object, right data, right owner
        await client.delete(CONFIGMAPS, "m00002", namespace)
        state = await wait_until(
            proc,
            client,
            namespace,
            lambda s: all_right(s) and s["m00002"][2] != before["m00002"][2],
        )
        for name in ("m00000", "m00003"):  # the others were left alone
            assert state[name][2] == before[name][2], name
        listed = await client.list(CONFIGMAPS, namespace, label_selector=LABEL)
        assert sorted(cm["metadata"]["name"] for cm in listed["items"]) == sorted(state)
