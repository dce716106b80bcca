"""The operator is SIGKILLed right after the cloud accepted a create, before any
status write; after a restart there is exactly one VM per wanted node.

This is the failure that duplicates or leaks VMs in naive controllers: the
cloud has a VM the controller never recorded. Intent recorded first (the VM's
name and idempotency token in status.instances) makes the retry return the
same VM.

Run against both clouds: the simulated one, and AwsCloud on moto's EC2 server, where the
oracle is moto's DescribeInstances (every instance of the pool, by tag).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop import NODES
from nodepool_operator.api import AWSNODECLASSES, NODEPOOLS
from nodepool_operator.cloud import AwsCloud, CloudSnapshot
from nodepool_operator.failpoints import ENV as FAILPOINTS_ENV
from nodepool_operator.testbed import MotoKubelets, MotoServer, seed_launch_environment
from tests import factories
from tests.e2e.conftest import LABEL, OperatorEnv

pytestmark = pytest.mark.integration

_RUN = """
import asyncio, sys
from pathlib import Path
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.operator import run
from nodepool_operator.settings import OperatorSettings
from nodepool_operator.testbed import simulated_vms

settings = OperatorSettings(
    cloud_state=Path(sys.argv[2]), boot_seconds=1.0, install_crds=False,
    metrics_bind_address=None, health_probe_bind_address=None, label_selector=sys.argv[3],
    cloud=sys.argv[4], aws_endpoint_url=sys.argv[5] or None,
)
vms = (lambda config: simulated_vms(config, SimulatedCloud(settings.cloud_state))) if (
    settings.cloud == "simulated") else None  # on moto the test runs MotoKubelets
asyncio.run(run(sys.argv[1], settings, vms=vms))
"""


class _Cloud:
    """One cloud as the test sees it: what the operator subprocess is told, and the census."""

    def __init__(self, env: OperatorEnv, moto: MotoServer | None, aws: AwsCloud | None) -> None:
        self.env, self.moto, self.aws = env, moto, aws

    @property
    def name(self) -> str:
        return "aws" if self.aws is not None else "simulated"

    async def node_class(self, name: str) -> str | None:
        """On moto, an AL2023 AwsNodeClass ``name`` in a freshly seeded account (as a pool on
        EC2 has: its instances join through the NodeConfig the operator writes)."""
        if self.moto is None:
            return None
        seeded = await seed_launch_environment(self.moto.endpoint_url, name=name)
        await self.env.create(
            AWSNODECLASSES,
            {
                "apiVersion": AWSNODECLASSES.api_version,
                "kind": AWSNODECLASSES.kind,
                "metadata": {"name": name},
                "spec": seeded.node_class_spec(),
            },
        )
        return name

    def process_env(self) -> dict[str, str]:
        return self.moto.env() if self.moto is not None else {}

    async def census(self, pool: str) -> CloudSnapshot:
        """The cloud's own record of the pool's VMs (not the operator's)."""
        tags = {"kubeloop.dev/nodepool": pool}
        if self.aws is not None:
            return await self.aws.snapshot(tags)
        snapshot = self.env.cloud.snapshot()
        return CloudSnapshot(
            instances=tuple(
                i for i in snapshot.instances if all(i.tags.get(k) == v for k, v in tags.items())
            ),
            calls=snapshot.calls,
            duplicates=snapshot.duplicates,
        )


@pytest.fixture(params=["simulated", "aws-moto"])
async def cloud(request: pytest.FixtureRequest, operator_env: OperatorEnv) -> AsyncIterator[_Cloud]:
    if request.param == "simulated":
        yield _Cloud(operator_env, None, None)
        return
    moto: MotoServer = request.getfixturevalue("moto")
    async with contextlib.AsyncExitStack() as stack:
        aws = await stack.enter_async_context(
            AwsCloud(endpoint_url=moto.endpoint_url, instance_types=["m5.large"])
        )
        operator_env.provider = aws
        operator_env.make_kubelets = lambda client: MotoKubelets(moto.endpoint_url, client)
        yield _Cloud(operator_env, moto, aws)
        # while the AwsCloud is open: the pool's finalizer terminates its VMs through it
        await operator_env.cleanup()


async def test_sigkill_between_cloud_create_and_status_write(
    operator_env: OperatorEnv, cloud: _Cloud, kube_control_plane: Any
) -> None:
    env = operator_env
    name = f"crash-{env.run_id}"
    await env.create(
        NODEPOOLS,
        factories.nodepool(name, target=3, max_nodes=5, node_class=await cloud.node_class(name)),
    )

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _RUN,
        str(kube_control_plane.kubeconfig),
        str(env.settings.cloud_state),
        env.settings.label_selector or "",
        cloud.name,
        cloud.moto.endpoint_url if cloud.moto is not None else "",
        env={**os.environ, **cloud.process_env(), FAILPOINTS_ENV: "after-cloud-create=kill"},
    )
    code = await asyncio.wait_for(proc.wait(), timeout=120)
    assert code == -9, "the failpoint should have killed the operator"

    # the cloud accepted one create that no status write ever recorded with an id
    before = await cloud.census(name)
    assert len(before.live) == 1
    orphan = before.live[0]
    status = (await env.client.get(NODEPOOLS, name)).get("status", {})
    recorded = {r["name"]: r for r in status.get("instances", [])}
    assert orphan.name in recorded, "intent is recorded before the cloud call"
    assert not recorded[orphan.name].get("instanceId"), "the crash came before the id was written"
    # on EC2 the subnet (and so the zone) is chosen before the call and recorded with the
    # intent: the restart asks for the same one, and the token returns the same VM
    assert recorded[orphan.name].get("zone", "") == orphan.zone
    if cloud.aws is not None:
        assert orphan.zone

    # restart (in-process this time) and converge
    await env.start(controllers=("nodepool",))

    async def converged() -> bool:
        pool = await env.client.get(NODEPOOLS, name)
        return int(pool.get("status", {}).get("readyNodes", 0)) == 3

    await env.eventually(converged, "the pool to have 3 ready nodes")
    after = await cloud.census(name)
    assert len(after.live) == 3
    assert after.duplicates == 0
    assert len(after.instances) == 3, "no VM was launched and thrown away"
    assert orphan.id in {vm.id for vm in after.live}, "the VM created before the crash was adopted"
    status = (await env.client.get(NODEPOOLS, name))["status"]
    assert {r.get("instanceId") for r in status["instances"]} == {vm.id for vm in after.live}
    nodes = await env.client.list(NODES, label_selector=f"kubeloop.dev/nodepool={name}")
    assert len(nodes["items"]) == 3
    assert all(n["metadata"]["labels"].get(LABEL) == env.run_id for n in nodes["items"])
    # registered by the VMs' kubelets (on moto: MotoKubelets, with EC2's providerID)
    scheme = "aws:///" if cloud.aws is not None else "sim:///"
    assert {n["spec"]["providerID"].split("/")[-1] for n in nodes["items"]} == {
        vm.id for vm in after.live
    }
    assert all(n["spec"]["providerID"].startswith(scheme) for n in nodes["items"])
