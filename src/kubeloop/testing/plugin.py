"""pytest fixtures backed by a real local control plane (see :mod:`kubeloop.testing`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from kubeloop.envtest import ControlPlane, ControlPlaneOptions, RestError


@pytest.fixture(scope="session")
def kube_control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-scheduler for the whole session."""
    with ControlPlane(ControlPlaneOptions(scheduler=True)) as cp:
        yield cp


@pytest.fixture
def kube_namespace(kube_control_plane: ControlPlane) -> str:
    """A fresh namespace. Not deleted afterwards: without kube-controller-manager a
    namespace never finishes terminating, and unique names make reuse moot."""
    return kube_control_plane.create_namespace("t")


class NodeFactory:
    """Creates kubelet-less Nodes with given capacity; removes them on teardown."""

    def __init__(self, cp: ControlPlane) -> None:
        self._cp = cp
        self.names: list[str] = []

    def __call__(self, name: str | None = None, **kwargs: Any) -> dict[str, Any]:
        node_name = name or f"node-{uuid.uuid4().hex[:8]}"
        node = self._cp.create_node(node_name, **kwargs)
        self.names.append(node_name)
        return node

    def cleanup(self) -> None:
        rest = self._cp.rest()
        for name in self.names:
            with contextlib.suppress(RestError):
                rest.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
def kube_nodes(kube_control_plane: ControlPlane) -> Iterator[NodeFactory]:
    factory = NodeFactory(kube_control_plane)
    yield factory
    factory.cleanup()


# -- kubeloop's async client ----------------------------------------------------------
# (imports kept with the fixture so the section above stays untouched; fine to hoist)
from collections.abc import AsyncIterator  # noqa: E402

from kubeloop._client import Client  # noqa: E402


@pytest.fixture
async def kube_client(kube_control_plane: ControlPlane) -> AsyncIterator[Client]:
    """An admin :class:`~kubeloop._client.Client` for the control plane, closed afterwards."""
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig) as client:
        yield client


# -- the fault proxy (kubeloop.testing.faults) ------------------------------------------
if TYPE_CHECKING:
    from kubeloop.testing.faults import FaultProxy


@pytest.fixture
async def kube_fault_proxy(kube_control_plane: ControlPlane) -> AsyncIterator[FaultProxy]:
    """A :class:`~kubeloop.testing.faults.FaultProxy` in front of the session's control
    plane for one test (seed 0): hand its ``kubeconfig_for(...)`` to the code under test."""
    from kubeloop.testing.faults import FaultProxy  # only tests that use it pay for it

    async with FaultProxy(kube_control_plane) as proxy:
        yield proxy
