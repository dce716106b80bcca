"""Suite-wide fixtures and hygiene.

Hygiene: a test that starts a control plane or moto's server must say so. ``-m "not
integration"`` is how a quick run (the unit tier) keeps to what runs in process, so a test
that starts one without the ``integration`` marker breaks that run (it starts etcd, the
apiserver or moto where nobody expected them). Three checks make a missing marker an error
rather than a surprise:

* at collection: a test whose fixture closure includes ``kube_control_plane`` (directly or
  through ``kube_client``, ``kube_namespace``, ``operator_env``, ...) or ``moto_server``
  (through ``moto``), or whose module constructs a :class:`~kubeloop.envtest.ControlPlane`
  itself, must carry the marker;
* at run time: :meth:`ControlPlane.start` called while an unmarked test runs fails it, and
  so does ``moto`` handed to an unmarked test (a fixture asks for it on request).

Fixtures: moto's EC2 API server on loopback, started once per session and only if a test
asks for it; each test that uses it resets it first, so tests see a fresh account. The two
wheels, built once per session for the tests that install them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodepool_operator.testbed import MotoServer
from tests._dist import build_wheels
from tests._hygiene import (  # re-exported as this conftest's hooks
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    require_marker,
)
from tests._nodeadm import check_every_nodeconfig

__all__ = [
    "moto",
    "moto_server",
    "pytest_collection_modifyitems",
    "pytest_runtest_protocol",
    "wheels",
]


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    log = Path(tmp_path_factory.mktemp("moto")) / "moto.log"
    with MotoServer(log=log) as server:
        yield server


@pytest.fixture
def moto(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[MotoServer]:
    """A fresh moto account, with the standard chain's variables pointing at it. Afterwards,
    the real nodeadm checks every AL2023 user data the test had EC2 launch with (issue 21:
    nodeadm judges every user data the tests generate, not only those a test looks at)."""
    require_marker(request.node, "moto's server")
    moto_server.reset()
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
    yield moto_server
    check_every_nodeconfig(moto_server)


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The kubeloop and nodepool-operator wheels (``uv build --all-packages``), by name."""
    return build_wheels(tmp_path_factory.mktemp("dist"))
