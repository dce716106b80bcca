"""The composition root: the one place that wires client, cloud, manager and controllers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection
from pathlib import Path

from kubeloop import (
    Client,
    ClusterConfig,
    Manager,
    ManagerOptions,
    Registry,
    load_config,
    load_kubeconfig,
)
from nodepool_operator.api import crds
from nodepool_operator.cloud import CloudProvider, SimulatedCloud, SimulatedKubelets
from nodepool_operator.cloud._kubelet import FIELD_MANAGER as KUBELET_FIELD_MANAGER
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.instance import InstanceController
from nodepool_operator.controllers.nodepool import NodePoolController
from nodepool_operator.crdinstall import install_crds
from nodepool_operator.settings import OperatorSettings

#: Writes are attributed to ``kubeloop-<controller>`` in managedFields (see docs/ownership.md).
FIELD_MANAGER = "kubeloop"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: Every controller the operator has.
CONTROLLERS = ("nodepool", "autoscaler", "instance")


def _own_namespace() -> str:
    """The pod's namespace when running in a cluster, else ``default``."""
    try:
        return (SERVICE_ACCOUNT_NAMESPACE.read_text().strip()) or "default"
    except OSError:
        return "default"


def build_manager(
    client: Client,
    cloud: CloudProvider,
    settings: OperatorSettings,
    *,
    registry: Registry | None = None,
    controllers: Collection[str] = CONTROLLERS,
) -> Manager:
    """One manager with the NodePool, Autoscaler and Instance controllers (or a subset)."""
    options = ManagerOptions(
        name="nodepool-operator",
        leader_election=settings.leader_election,
        leader_election_id="nodepool-operator-leader",
        leader_election_namespace=settings.leader_election_namespace or _own_namespace(),
        metrics_bind_address=settings.metrics_bind_address,
        health_probe_bind_address=settings.health_probe_bind_address,
        handle_signals=settings.handle_signals,
    )
    if registry is not None:
        options.registry = registry
    mgr = Manager(client, options)
    if "nodepool" in controllers:
        NodePoolController(mgr, cloud, settings).register()
    if "autoscaler" in controllers:
        AutoscalerController(mgr, settings).register()
    if "instance" in controllers:
        InstanceController(mgr, cloud, settings).register()
    return mgr


@contextlib.asynccontextmanager
async def operator(
    kubeconfig: str | None,
    settings: OperatorSettings,
    *,
    registry: Registry | None = None,
) -> AsyncIterator[Manager]:
    """A ready-to-run manager (CRDs installed if asked); the client closes on exit."""
    # no kubeconfig: $KUBECONFIG, then the pod's service account, then ~/.kube/config
    config = load_kubeconfig(kubeconfig) if kubeconfig else load_config()
    client = Client(config, field_manager=FIELD_MANAGER)
    try:
        if settings.install_crds:
            await install_crds(client, crds())
        cloud = SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
        yield build_manager(client, cloud, settings, registry=registry)
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def simulated_vms(
    config: ClusterConfig, cloud: SimulatedCloud
) -> AsyncIterator[SimulatedKubelets]:
    """The simulated cloud's VM side, running beside the operator: its VMs' kubelets
    register their Nodes (own client, field manager ``kubelet``); stopped on exit."""
    async with Client(config, field_manager=KUBELET_FIELD_MANAGER) as client:
        kubelets = SimulatedKubelets(cloud, client)
        task = asyncio.create_task(kubelets.run(), name="simulated-kubelets")
        try:
            yield kubelets
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run(kubeconfig: str | None, settings: OperatorSettings) -> None:
    """Run until SIGTERM/SIGINT (with the simulated VMs' kubelets, unless turned off)."""
    async with contextlib.AsyncExitStack() as stack:
        mgr = await stack.enter_async_context(operator(kubeconfig, settings))
        if settings.simulated_kubelets:
            config = load_kubeconfig(kubeconfig) if kubeconfig else load_config()
            cloud = SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
            await stack.enter_async_context(simulated_vms(config, cloud))
        await mgr.run()
