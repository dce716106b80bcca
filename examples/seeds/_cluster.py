"""Where the seed examples run: the given cluster, or a temporary local control plane."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kubeloop import CRDS, NAMESPACES, AlreadyExists, Client, KubeloopError
from kubeloop.envtest import ControlPlane, ControlPlaneOptions
from kubeloop.testing import resource_of, simple_crd

GROUP = "seeds.kubeloop.dev"
POOL_CRD = simple_crd(
    GROUP,
    "Pool",
    spec={"targetNodes": {"type": "integer", "minimum": 0}},
    status={
        "observedGeneration": {"type": "integer"},
        "readyNodes": {"type": "integer"},
        "lastCheckedAt": {"type": "string"},
        "phase": {"type": "string"},
    },
)
POOLS = resource_of(POOL_CRD)


def pool(name: str, target: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Pool",
        "metadata": {"name": name},
        "spec": {"targetNodes": target},
    }


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="cluster to use (default: $KUBECONFIG; neither: a temporary local control plane)",
    )


@contextlib.asynccontextmanager
async def cluster(kubeconfig: str | None) -> AsyncIterator[Client]:
    """A client for the given cluster (with the example CRD installed), or a temporary one."""
    with contextlib.ExitStack() as stack:
        if kubeconfig is None:
            cp = stack.enter_context(ControlPlane(ControlPlaneOptions(scheduler=False)))
            kubeconfig = str(cp.kubeconfig)
        client = Client.from_kubeconfig(kubeconfig)
        try:
            await _install_crd(client)
            yield client
        finally:
            await client.close()


async def _install_crd(client: Client) -> None:
    with contextlib.suppress(AlreadyExists):
        await client.create(CRDS, POOL_CRD)
    for _ in range(200):
        crd = await client.get(CRDS, POOL_CRD["metadata"]["name"])
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            try:
                await client.discover(f"{GROUP}/v1", "Pool")
                return
            except KubeloopError:
                pass
        await asyncio.sleep(0.05)
    raise RuntimeError("example CRD not established")


async def new_namespace(client: Client, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name
