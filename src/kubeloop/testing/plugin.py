"""pytest fixtures backed by a real local control plane (see :mod:`kubeloop.testing`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubeloop.envtest import ControlPlane, ControlPlaneOptions, RestError


@pytest.fixture(scope="session")
def kube_control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-scheduler for the whole session."""
    with ControlPlane(ControlPlaneOptions(scheduler=True)) as cp:
        yield cp


#: The full test bed's options: the control plane plus kube-controller-manager and kwok.
CLUSTER_OPTIONS = ControlPlaneOptions(scheduler=True, controller_manager=True, kwok=True)


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[ControlPlane]:
    """The full test bed for the whole session: etcd, kube-apiserver, kube-scheduler,
    kube-controller-manager (:data:`kubeloop.envtest.DEFAULT_CONTROLLERS`) and kwok.

    A separate control plane from :func:`kube_control_plane` (a session using both runs
    two). Nodes annotated with :data:`kubeloop.envtest.KWOK_NODE_ANNOTATIONS` (e.g.
    ``kube_cluster.create_node(name, kwok=True)``) are heartbeated by kwok, with Leases,
    and pods bound to them run (Running, with pod IPs); other Nodes go ``Unknown`` after
    ``node_monitor_grace_seconds`` and are tainted by the node lifecycle controller, and
    new Nodes carry the ``node.kubernetes.io/not-ready`` taint until they are Ready.
    Namespaces finish deleting and ownerReferences cascade. ``kube_cluster.assets.kubectl``
    is the built kubectl. Its options are :data:`CLUSTER_OPTIONS`.
    """
    with ControlPlane(CLUSTER_OPTIONS) as cp:
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
