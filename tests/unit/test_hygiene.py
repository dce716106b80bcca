"""The suite's own rule: a test that starts a control plane or moto's server carries the
integration marker.

Each case runs a throw-away pytest session (collection only, so nothing is started) with
the checks of ``tests/conftest.py`` loaded, and reads its verdict. The unmarked kinds share
one session, a module each: the error must name every one of them (and no plain test).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = "from tests._hygiene import pytest_collection_modifyitems, pytest_runtest_protocol\n"


def _collect(tmp_path: Path, modules: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, body in modules.items():
        (tmp_path / f"{name}.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


#: A test module of each way to start a control plane, unmarked.
UNMARKED = {
    "test_fixture": "def test_x(kube_control_plane):\n    pass\n",
    "test_dependent_fixture": "def test_x(kube_namespace):\n    pass\n",
    "test_constructed": (
        "from kubeloop.envtest import ControlPlane\ndef test_x():\n    ControlPlane().start()\n"
    ),
    # moto's server is a process of its own too (the fixture of tests/conftest.py, by name)
    "test_moto": (
        "import pytest\n@pytest.fixture\ndef moto_server():\n    yield None\n"
        "def test_x(moto_server):\n    pass\n"
    ),
}


def test_an_unmarked_control_plane_test_is_an_error(tmp_path: Path) -> None:
    plain = "def test_plain(tmp_path):\n    pass\n"
    result = _collect(tmp_path, {**UNMARKED, "test_plain": plain})
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "not marked `integration`" in result.stderr
    for module in UNMARKED:
        assert f"{module}.py::test_x" in result.stderr
    assert "test_plain" not in result.stderr


def test_a_marked_one_and_a_plain_one_collect(tmp_path: Path) -> None:
    body = (
        "import pytest\n"
        "@pytest.mark.integration\n"
        "def test_x(kube_control_plane):\n    pass\n"
        "def test_y(tmp_path):\n    pass\n"
    )
    result = _collect(tmp_path, {"test_case": body})
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "2 tests collected" in result.stdout
