"""The operator is SIGKILLed right after the cloud accepted a create, before any
status write; after a restart there is exactly one VM per wanted node.

This is the failure that duplicates or leaks VMs in naive controllers: the
cloud has a VM the controller never recorded. Intent recorded first (the VM's
name and idempotency token in status.instances) makes the retry return the
same VM.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from kubeloop import NODES
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.failpoints import ENV as FAILPOINTS_ENV
from tests.e2e.conftest import LABEL, OperatorEnv

pytestmark = pytest.mark.integration

_RUN = """
import asyncio, sys
from pathlib import Path
from nodepool_operator.operator import run
from nodepool_operator.settings import OperatorSettings

settings = OperatorSettings(
    cloud_state=Path(sys.argv[2]), boot_seconds=1.0, install_crds=False,
    metrics_bind_address=None, health_probe_bind_address=None, label_selector=sys.argv[3],
)
asyncio.run(run(sys.argv[1], settings))
"""


def _pool(name: str, target: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeloop.dev/v1alpha1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"targetNodes": target, "instanceType": "m5.large", "maxNodes": 5},
    }


async def test_sigkill_between_cloud_create_and_status_write(
    operator_env: OperatorEnv, kube_control_plane: Any
) -> None:
    env = operator_env
    name = f"crash-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 3))

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _RUN,
        str(kube_control_plane.kubeconfig),
        str(env.settings.cloud_state),
        env.settings.label_selector or "",
        env={**os.environ, FAILPOINTS_ENV: "after-cloud-create=kill"},
    )
    code = await asyncio.wait_for(proc.wait(), timeout=120)
    assert code == -9, "the failpoint should have killed the operator"

    # the cloud accepted one create that no status write ever recorded with an id
    live = [i for i in await env.cloud.list({"kubeloop.dev/nodepool": name})]
    assert len(live) == 1
    status = (await env.client.get(NODEPOOLS, name)).get("status", {})
    recorded = {r["name"]: r for r in status.get("instances", [])}
    assert live[0].name in recorded, "intent is recorded before the cloud call"
    assert not recorded[live[0].name].get("instanceId"), "the crash came before the id was written"

    # restart (in-process this time) and converge
    await env.start(controllers=("nodepool",))

    async def converged() -> bool:
        pool = await env.client.get(NODEPOOLS, name)
        return int(pool.get("status", {}).get("readyNodes", 0)) == 3

    await env.eventually(converged, "the pool to have 3 ready nodes")
    vms = await env.cloud.list({"kubeloop.dev/nodepool": name})
    assert len(vms) == 3
    assert env.cloud.duplicates() == 0
    assert live[0].id in {vm.id for vm in vms}, "the VM created before the crash was adopted"
    status = (await env.client.get(NODEPOOLS, name))["status"]
    assert {r.get("instanceId") for r in status["instances"]} == {vm.id for vm in vms}, "no leak"
    nodes = await env.client.list(NODES, label_selector=f"kubeloop.dev/nodepool={name}")
    assert len(nodes["items"]) == 3
    assert all(n["metadata"]["labels"].get(LABEL) == env.run_id for n in nodes["items"])
