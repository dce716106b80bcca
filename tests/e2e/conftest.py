"""The operator end to end on the full test bed, the operator in-process.

The session's cluster is :func:`kubeloop.testing.plugin.kube_cluster` (apiserver, scheduler,
kube-controller-manager and kwok): the simulated cloud's VMs register their own Nodes
(:class:`SimulatedKubelets`, started with the operator as "the VM side"), kwok heartbeats
them and runs their pods, the node lifecycle controller marks silent ones NotReady.

Each test gets its own simulated cloud file and a unique label; the operator it
starts handles only objects with that label, so tests sharing the session's
control plane never act on each other's pools.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubeloop import NODES, Client, Manager, NotFound, Registry, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, INSTANCES, NODEPOOLS
from nodepool_operator.cloud import CloudProvider, SimulatedCloud
from nodepool_operator.operator import CONTROLLERS, build_manager
from nodepool_operator.settings import OperatorSettings
from nodepool_operator.testbed import KUBELET_FIELD_MANAGER as KUBELET
from nodepool_operator.testbed import SimulatedKubelets

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
LABEL = "e2e.kubeloop.dev/run"
#: Seconds the operator gets to shut down at the end of a test.
STOP_TIMEOUT = 60.0
T = TypeVar("T")


@pytest.fixture(scope="session")
def kube_control_plane(kube_cluster: ControlPlane) -> ControlPlane:
    """Every e2e test runs on the full test bed (kube-controller-manager and kwok too)."""
    return kube_cluster


@pytest.fixture(scope="session")
def operator_crds(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))


@dataclass
class OperatorEnv:
    """One test's operator world: client, cloud, settings and the running manager."""

    client: Client
    cloud: SimulatedCloud
    settings: OperatorSettings
    run_id: str
    kubeconfig: Path | None = None
    registry: Registry = field(default_factory=Registry)
    provider: CloudProvider | None = None
    """The cloud the operator gets, when it is not ``cloud`` (e.g. an AwsCloud on moto)."""
    mgr: Manager | None = None
    task: asyncio.Task[None] | None = None
    kubelets: SimulatedKubelets | None = None
    """The VM side (started with the operator unless ``start(kubelets=False)``)."""
    make_kubelets: Callable[[Client], SimulatedKubelets] | None = None
    """How to make the VM side for ``provider`` (e.g. MotoKubelets); default: the simulated
    cloud's."""
    kubelet_task: asyncio.Task[None] | None = None
    kubelet_client: Client | None = None
    created: list[tuple[Resource, str, str | None]] = field(default_factory=list)

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL: self.run_id}

    def labelled(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {}).update(self.labels)
        return obj

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> Any:
        created = await self.client.create(res, self.labelled(obj), namespace)
        self.created.append((res, created["metadata"]["name"], namespace))
        return created

    async def start(
        self,
        *,
        controllers: tuple[str, ...] = CONTROLLERS,
        kubelets: bool = True,
        **overrides: Any,
    ) -> Manager:
        """Start the operator (in this event loop) with settings overrides, and the VM
        side (the simulated kubelets) unless ``kubelets=False``."""
        settings = replace(self.settings, **overrides)
        self.mgr = build_manager(
            self.client,
            self.provider or self.cloud,
            settings,
            registry=self.registry,
            controllers=controllers,
        )
        self.task = asyncio.create_task(self.mgr.run())
        if kubelets:
            await self.start_kubelets()
        return self.mgr

    async def start_kubelets(self) -> SimulatedKubelets:
        """Start the simulated cloud's VM side (its kubelets register the Nodes)."""
        if self.kubelets is None:
            assert self.kubeconfig is not None
            self.kubelet_client = Client.from_kubeconfig(self.kubeconfig, field_manager=KUBELET)
            if self.make_kubelets is not None:
                self.kubelets = self.make_kubelets(self.kubelet_client)
            else:
                self.kubelets = SimulatedKubelets(self.cloud, self.kubelet_client)
            self.kubelet_task = asyncio.create_task(self.kubelets.run())
        return self.kubelets

    async def stop_kubelets(self) -> None:
        if self.kubelet_task is not None:
            self.kubelet_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.kubelet_task
        if self.kubelet_client is not None:
            await self.kubelet_client.close()
        self.kubelets, self.kubelet_task, self.kubelet_client = None, None, None

    async def stop(self) -> None:
        if self.mgr is not None and self.task is not None:
            self.mgr.stop()
            # bounded: a manager that does not stop fails the test here, with a traceback
            async with asyncio.timeout(STOP_TIMEOUT):
                with contextlib.suppress(asyncio.CancelledError):
                    await self.task
        self.mgr, self.task = None, None
        await self.stop_kubelets()

    async def eventually(
        self, probe: Callable[[], Awaitable[T]], what: str, timeout: float = 60.0
    ) -> T:
        """Poll ``probe`` until it returns something truthy (or fail naming ``what``)."""
        deadline = asyncio.get_running_loop().time() + timeout
        last: T | None = None
        while asyncio.get_running_loop().time() < deadline:
            last = await probe()
            if last:
                return last
            await asyncio.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})")

    async def cleanup(self) -> None:
        """Delete what the test created while the operator runs (finalizers need it)."""
        for res, name, ns in reversed(self.created):
            with contextlib.suppress(NotFound):
                await self.client.delete(res, name, ns)
        if self.mgr is not None:
            for res, name, ns in self.created:
                if res in (NODEPOOLS, INSTANCES, AUTOSCALERS):
                    with contextlib.suppress(AssertionError):
                        await self.eventually(
                            functools.partial(_gone, self.client, res, name, ns),
                            f"{res.kind} {name} to be deleted",
                            timeout=30,
                        )
        await self.stop()
        # nodes a crashed test left behind must not attract other tests' pods (nor hang in
        # Terminating on the operator's finalizer, with no operator left to remove it)
        for node in (await self.client.list(NODES, label_selector=f"{LABEL}={self.run_id}"))[
            "items"
        ]:
            name = node["metadata"]["name"]
            with contextlib.suppress(NotFound):
                await self.client.patch(NODES, name, {"metadata": {"finalizers": None}})
                await self.client.delete(NODES, name)


async def _gone(client: Client, res: Resource, name: str, ns: str | None) -> bool:
    try:
        await client.get(res, name, ns)
    except NotFound:
        return True
    return False


@pytest.fixture
async def operator_env(
    kube_control_plane: ControlPlane, operator_crds: None, tmp_path: Path
) -> AsyncIterator[OperatorEnv]:
    run_id = uuid.uuid4().hex[:8]
    settings = OperatorSettings(
        cloud_state=tmp_path / "cloud.sqlite",
        boot_seconds=1.0,
        gc_grace_seconds=5.0,
        drift_interval_seconds=5.0,
        batch_window_seconds=0.5,
        install_crds=False,
        metrics_bind_address=None,
        health_probe_bind_address=None,
        handle_signals=False,
        label_selector=f"{LABEL}={run_id}",
    )
    cloud = SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig, field_manager="kubeloop"
    ) as client:
        env = OperatorEnv(
            client=client,
            cloud=cloud,
            settings=settings,
            run_id=run_id,
            kubeconfig=kube_control_plane.kubeconfig,
        )
        try:
            yield env
        finally:
            await env.cleanup()
