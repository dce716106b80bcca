"""`kubeloop envtest up|status|down` as a user runs them: the CLI as a subprocess.

`up` prints an eval-able `export KUBECONFIG=...`; `status` and `down` find the control
plane `up` started from any working directory, without being given `--dir` again.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def kubeloop(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeloop", "envtest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A project directory and another one: status and down run from the other."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    return project, elsewhere


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """A user's environment with a state home of its own (where `up` records itself)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def test_up_prints_an_export_and_status_and_down_find_it_from_elsewhere(
    tmp_path: Path, dirs: tuple[Path, Path], user_env: dict[str, str]
) -> None:
    project, elsewhere = dirs
    # eval'd as the docs say, in a shell: the variable is set to a kubeconfig that exists
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f'eval "$({shlex.quote(sys.executable)} -m kubeloop envtest up)" && '
            'test -f "$KUBECONFIG" && echo "$KUBECONFIG"',
        ],
        cwd=project,
        env=user_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert shell.returncode == 0, shell.stderr
        kubeconfig = Path(shell.stdout.strip())
        default = tmp_path / "state" / "kubeloop" / "envtest"
        assert kubeconfig == default / "kubeconfig"  # not relative to the working directory

        again = kubeloop("up", cwd=elsewhere, env=user_env)  # idempotent, same line
        assert again.returncode == 0
        assert again.stdout == f"export KUBECONFIG={kubeconfig}\n"
        assert "already running" in again.stderr

        status = kubeloop("status", cwd=elsewhere, env=user_env)
        assert status.returncode == 0, status.stdout + status.stderr
        state = json.loads(status.stdout)
        assert state["ready"] is True
        assert state["kubeconfig"] == str(kubeconfig)
    finally:
        down = kubeloop("down", cwd=elsewhere, env=user_env)
    assert down.stdout.strip() == "stopped"
    after = kubeloop("status", cwd=project, env=user_env)
    assert after.returncode == 1
    assert after.stdout.startswith("not running (looked in ")


def test_status_and_down_find_an_up_with_its_own_dir(
    dirs: tuple[Path, Path], user_env: dict[str, str]
) -> None:
    project, elsewhere = dirs
    up = kubeloop("up", "--dir", "kl", cwd=project, env=user_env)  # a relative --dir
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout == f"export KUBECONFIG={project / 'kl' / 'kubeconfig'}\n"
        status = kubeloop("status", cwd=elsewhere, env=user_env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert json.loads(status.stdout)["dir"] == str(project / "kl")
    finally:
        down = kubeloop("down", cwd=elsewhere, env=user_env)
    assert down.stdout.strip() == "stopped"
    assert not (project / "kl" / "state.json").exists()
