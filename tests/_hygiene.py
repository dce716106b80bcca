"""The checks behind ``tests/conftest.py`` (a module of its own so that a test can load
them into a throw-away pytest run and watch them fail)."""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Generator
from typing import Any

import pytest

from kubeloop.envtest import ControlPlane

#: Every fixture that gives a test a control plane depends on this one.
CONTROL_PLANE_FIXTURE = "kube_control_plane"
#: Every fixture that gives a test moto's server (a process of its own, like the control
#: plane: the unit tier runs in process) depends on this one.
MOTO_FIXTURE = "moto_server"
MARKER = "integration"

_current: list[pytest.Item] = []


def _module_builds_control_plane(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return module is not None and _calls_control_plane(module.__name__, module)


@functools.cache
def _calls_control_plane(name: str, module: Any) -> bool:
    """Whether the module's code (not its strings) calls ``ControlPlane(...)``."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == "ControlPlane":
                return True
    return False


def needs_marker(item: pytest.Item) -> bool:
    """Whether ``item`` starts (or shares) a control plane or moto's server."""
    fixtures = getattr(item, "fixturenames", ())
    return (
        CONTROL_PLANE_FIXTURE in fixtures
        or MOTO_FIXTURE in fixtures
        or _module_builds_control_plane(item)
    )


def require_marker(item: pytest.Item, what: str) -> None:
    """Fail ``item`` unless it is marked: for a server a fixture hands out on request
    (``request.getfixturevalue``), which collection cannot see."""
    if item.get_closest_marker(MARKER) is None:
        pytest.fail(f"{item.nodeid} uses {what} but is not marked `{MARKER}`", pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = [i.nodeid for i in items if needs_marker(i) and i.get_closest_marker(MARKER) is None]
    if unmarked:
        listed = "\n  ".join(unmarked)
        raise pytest.UsageError(
            f"these tests start a control plane or moto's server but are not marked `{MARKER}` "
            f"(add `pytestmark = pytest.mark.{MARKER}`):\n  {listed}"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[Any]:
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()


_original_start = ControlPlane.start


def _checked_start(self: ControlPlane) -> None:
    item = _current[-1] if _current else None
    if item is not None and item.get_closest_marker(MARKER) is None:
        pytest.fail(
            f"{item.nodeid} starts a control plane but is not marked `{MARKER}`", pytrace=False
        )
    _original_start(self)


ControlPlane.start = _checked_start  # type: ignore[method-assign]
