"""The two wheels, built as a release builds them, and fresh venvs with only what they declare.

Shared by every test that installs the distributions (``tests/integration/test_distributions.py``,
``tests/e2e/test_wheels_alone.py``); the ``wheels`` fixture in ``tests/conftest.py`` builds them
once per session.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A venv's environment without the dev venv leaking in (its PYTHONPATH, its VIRTUAL_ENV).
LEAKY = ("PYTHONPATH", "VIRTUAL_ENV")


def uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    assert Path(found).exists(), "uv is installed by `make setup`"
    return found


def build_wheels(out: Path) -> dict[str, Path]:
    """``uv build --all-packages --wheel`` (the workspace's build backend): distribution name
    (``kubeloop``, ``nodepool_operator``) -> wheel."""
    subprocess.run(
        [uv(), "build", "--all-packages", "--wheel", "-o", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(found) == {"kubeloop", "nodepool_operator"}, sorted(found)
    return found


def fresh_venv(where: Path, *requirements: str) -> Path:
    """A new venv at ``where`` (this interpreter's Python) with ``requirements`` installed
    (wheels as ``name[extras] @ file://...``; their dependencies from the index); returns
    its ``bin`` directory."""
    subprocess.run(
        [uv(), "venv", "--python", sys.executable, str(where)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    python = where / "bin" / "python"
    subprocess.run(
        [uv(), "pip", "install", "--python", str(python), *requirements],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return where / "bin"


def requirement(name: str, wheel: Path, extras: str = "") -> str:
    """A PEP 508 requirement for a local wheel, with extras (``demo``) if given."""
    return f"{name}{f'[{extras}]' if extras else ''} @ {wheel.resolve().as_uri()}"
