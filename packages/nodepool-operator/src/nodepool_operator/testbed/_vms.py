"""The VM side, run beside an operator: the VMs' kubelets as one supervised task."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from kubeloop import Client, ClusterConfig
from nodepool_operator.cloud import SimulatedCloud

from ._kubelet import FIELD_MANAGER, SimulatedKubelets
from ._moto_kubelet import MotoKubelets

K = TypeVar("K", bound=SimulatedKubelets)


@contextlib.asynccontextmanager
async def _running(
    config: ClusterConfig, make: Callable[[Client], K], name: str
) -> AsyncIterator[K]:
    # own client, field manager ``kubelet``: their writes are not counted as the operator's
    async with Client(config, field_manager=FIELD_MANAGER) as client:
        kubelets = make(client)
        task = asyncio.create_task(kubelets.run(), name=name)
        try:
            yield kubelets
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def simulated_vms(
    config: ClusterConfig, cloud: SimulatedCloud
) -> contextlib.AbstractAsyncContextManager[SimulatedKubelets]:
    """The VMs of ``cloud`` register their Nodes while the context is open; stopped on exit."""
    return _running(config, lambda client: SimulatedKubelets(cloud, client), "simulated-kubelets")


def moto_vms(
    config: ClusterConfig, endpoint_url: str
) -> contextlib.AbstractAsyncContextManager[MotoKubelets]:
    """The instances of the moto server at ``endpoint_url`` register their Nodes while the
    context is open; stopped on exit."""
    return _running(config, lambda client: MotoKubelets(endpoint_url, client), "moto-kubelets")
