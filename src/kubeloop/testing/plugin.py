"""pytest fixtures backed by a real local control plane (see :mod:`kubeloop.testing`)."""

from __future__ import annotations

import contextlib
import inspect
import uuid
import warnings
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

try:
    import pytest_asyncio

    from kubeloop.envtest import ControlPlane, ControlPlaneOptions, RestError
except ImportError as err:
    # Installed without the [testing] extra: pytest still loads this plugin (entry points
    # are per distribution), so it must not break a user's test run; the fixtures say why
    # they cannot work instead.
    _MISSING: ImportError | None = err
    _async_fixture: Callable[..., Any] = pytest.fixture
else:
    _MISSING = None
    # pytest-asyncio's own decorator with an explicit loop: the fixture runs on asyncio in
    # either of its modes and whatever asyncio_default_fixture_loop_scope says.
    _async_fixture = pytest_asyncio.fixture(loop_scope="function")

#: The fixtures this plugin provides. An ``async def`` test that asks for one of them is
#: an asyncio test (see :func:`pytest_pycollect_makeitem`).
FIXTURES = frozenset(
    {
        "kube_control_plane",
        "kube_cluster",
        "kube_namespace",
        "kube_nodes",
        "kube_client",
        "kube_fault_proxy",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Keep pytest-asyncio's "asyncio_default_fixture_loop_scope is unset" notice out of a
    project that never chose asyncio settings (the tutorial's): it is printed before the
    first test, about a default that our fixtures do not use (they name their loop). Only
    the notice goes: a project that sets the option sees no change, and one that sets
    nothing keeps pytest-asyncio's default for its own async fixtures. ``tryfirst``:
    pytest-asyncio warns from its own ``pytest_configure``, inside the same warnings
    context as this one, so the filter is in place before it runs and gone after."""
    if _MISSING is None and not config.getini("asyncio_default_fixture_loop_scope"):
        warnings.filterwarnings(
            "ignore",
            message='The configuration option "asyncio_default_fixture_loop_scope" is unset',
            category=pytest.PytestDeprecationWarning,
        )


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, None]:
    """Mark ``async def`` tests that use a kubeloop fixture with ``asyncio``.

    Without it, pytest-asyncio's default (strict) mode leaves such a test alone and
    pytest fails it ("async def functions are not natively supported"): the first test a
    new user writes would need an ``asyncio_mode`` setting the tutorial never showed.
    ``trylast`` makes this wrapper the innermost, so the mark is there before
    pytest-asyncio's wrapper decides which items are coroutines to run. A test already
    marked (or run in auto mode) is left as it is.
    """
    outcome = yield
    if _MISSING is not None:
        return
    try:
        result = outcome.get_result()
    except BaseException:  # a collection error: pytest reports it as it is
        return
    items = result if isinstance(result, list) else [result]
    for item in items:
        if (
            isinstance(item, pytest.Function)
            and inspect.iscoroutinefunction(item.obj)
            and FIXTURES.intersection(item.fixturenames)
            and item.get_closest_marker("asyncio") is None
        ):
            item.add_marker(pytest.mark.asyncio)


def _require_envtest() -> None:
    if _MISSING is not None:
        pytest.fail(str(_MISSING), pytrace=False)


@pytest.fixture(scope="session")
def kube_control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-scheduler for the whole session."""
    _require_envtest()
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


@_async_fixture
async def kube_client(kube_control_plane: ControlPlane) -> AsyncIterator[Client]:
    """An admin :class:`~kubeloop._client.Client` for the control plane, closed afterwards."""
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig) as client:
        yield client


# -- the fault proxy (kubeloop.testing.faults) ------------------------------------------
if TYPE_CHECKING:
    from kubeloop.testing.faults import FaultProxy


@_async_fixture
async def kube_fault_proxy(kube_control_plane: ControlPlane) -> AsyncIterator[FaultProxy]:
    """A :class:`~kubeloop.testing.faults.FaultProxy` in front of the session's control
    plane for one test (seed 0): hand its ``kubeconfig_for(...)`` to the code under test."""
    from kubeloop.testing.faults import FaultProxy  # only tests that use it pay for it

    async with FaultProxy(kube_control_plane) as proxy:
        yield proxy
