"""Two distributions from one workspace: `kubeloop` (the runtime) and `nodepool-operator`.

The wheels are built with `uv build --all-packages`, as a release would (the session's
``wheels`` fixture, shared with tests/e2e/test_wheels_alone.py); a fresh venv with only
the kubeloop wheel (and its declared dependencies from the index) imports kubeloop, lacks the
[testing] extra's packages, and runs the tutorial's operator against the real control plane.
"""

from __future__ import annotations

import asyncio
import email
import os
import signal
import subprocess
import zipfile
from pathlib import Path

import pytest

import kubeloop
from kubeloop import CONFIGMAPS, Client, NotFound, Resource
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually
from tests._dist import fresh_venv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GREETINGS = Resource("tutorial.kubeloop.dev", "v1", "greetings", "Greeting")


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        [name] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(name))


def packages_in(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}


def test_two_wheels_one_version_no_second_copy_of_the_runtime(wheels: dict[str, Path]) -> None:
    core, operator = metadata(wheels["kubeloop"]), metadata(wheels["nodepool_operator"])
    assert core["Version"] == operator["Version"] == kubeloop.__version__
    assert packages_in(wheels["kubeloop"]) == {"kubeloop"}
    assert packages_in(wheels["nodepool_operator"]) == {"nodepool_operator"}
    for meta in (core, operator):
        assert meta["License-Expression"] == "Apache-2.0"
        assert meta.get_all("License-File") == ["LICENSE"]
        assert meta.get_all("Classifier")
        assert meta.get_all("Project-URL")
    requires = core.get_all("Requires-Dist") or []
    plain = [r for r in requires if "extra ==" not in r]
    assert not [r for r in plain if r.startswith(("cryptography", "pytest"))], plain
    testing = [r for r in requires if r.replace('"', "'").endswith("extra == 'testing'")]
    assert {r.split(">")[0].split(";")[0].strip() for r in testing} == {
        "cryptography",
        "pytest",
        "pytest-asyncio",  # runs the plugin's async fixtures with no user configuration
    }
    assert any(r.startswith("kubeloop") for r in operator.get_all("Requires-Dist") or [])


@pytest.fixture(scope="module")
def runtime_only_venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "v"
    return fresh_venv(venv, str(wheels["kubeloop"])) / "python"


def test_a_plain_install_has_no_test_dependencies(runtime_only_venv: Path) -> None:
    probe = (
        "import importlib.util, kubeloop;"
        "print(kubeloop.__version__,"
        " importlib.util.find_spec('cryptography') is None,"
        " importlib.util.find_spec('pytest') is None,"
        " importlib.util.find_spec('nodepool_operator') is None)"
    )
    out = subprocess.run(
        [str(runtime_only_venv), "-c", probe], check=True, capture_output=True, text=True
    ).stdout.split()
    assert out == [kubeloop.__version__, "True", "True", "True"]
    # envtest says which extra it needs instead of failing deep inside
    err = subprocess.run(
        [str(runtime_only_venv), "-c", "import kubeloop.envtest"], capture_output=True, text=True
    ).stderr
    assert "pip install 'kubeloop[testing]'" in err


async def test_the_tutorial_operator_runs_from_the_runtime_wheel_alone(
    runtime_only_venv: Path,
    kube_control_plane: ControlPlane,
    kube_namespace: str,
    kube_client: Client,
    tmp_path: Path,
) -> None:
    ns = kube_namespace
    kube_control_plane.install_crds([ROOT / "examples" / "tutorial" / "greeting_crd.yaml"])
    script = tmp_path / "greeting_operator.py"  # outside the repository: no source on sys.path
    script.write_text((ROOT / "examples" / "tutorial" / "greeting_operator.py").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = await asyncio.create_subprocess_exec(
        str(runtime_only_venv),
        str(script),
        "--kubeconfig",
        str(kube_control_plane.kubeconfig),
        "--namespace",
        ns,
        cwd=tmp_path,
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await kube_client.create(
            GREETINGS,
            {
                "apiVersion": "tutorial.kubeloop.dev/v1",
                "kind": "Greeting",
                "metadata": {"name": "wheel"},
                "spec": {"message": "from the wheel"},
            },
            ns,
        )

        async def done() -> bool:
            try:
                cm = await kube_client.get(CONFIGMAPS, "greeting-wheel", ns)
            except NotFound:
                return False
            return bool(cm["data"] == {"message": "from the wheel"})

        await eventually(done, "the ConfigMap from the wheel-installed operator", timeout=90)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]


def test_the_runtime_venv_imports_kubeloop_from_the_wheel(runtime_only_venv: Path) -> None:
    where = subprocess.run(
        [str(runtime_only_venv), "-c", "import kubeloop; print(kubeloop.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
    ).stdout.strip()
    assert "site-packages" in where
    assert not where.startswith(str(ROOT / "src"))
