"""The Go the control-plane build needs is named where it matters: when `go` is missing or
too old, before the build starts, with the version it needs (and no distribution package
that is too old suggested). Checked with the machine's real Go and the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubeloop.envtest import AssetsError
from kubeloop.envtest._assets import build_script, check_go, go_release, required_go

GO = shutil.which("go")


def test_the_required_go_is_the_pinned_modules_go_directive() -> None:
    need = required_go(build_script().parent)
    release = go_release(need)
    assert release is not None
    assert release >= (1, 26, 0)


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("go1.26.8", (1, 26, 8)),
        ("go1.19", (1, 19, 0)),
        ("1.26.0", (1, 26, 0)),
        ("go1.27rc1", (1, 27, 0)),
        ("devel go1.27-abcdef", None),
    ],
)
def test_go_release_numbers(text: str, release: tuple[int, int, int] | None) -> None:
    assert go_release(text) == release


def test_the_machines_go_passes_and_a_newer_requirement_names_both_versions() -> None:
    assert GO is not None, "the build needs Go; `make setup` installs it"
    check_go(required_go(build_script().parent))  # the Go that built the cached binaries
    have = subprocess.run(
        [GO, "env", "GOVERSION"], capture_output=True, text=True, check=True, cwd="/"
    ).stdout.strip()
    # the real toolchain, held to a release it cannot meet: what an old Go sees
    with pytest.raises(AssetsError) as info:
        check_go("1.999.0")
    message = str(info.value)
    assert "needs Go >= 1.999.0" in message
    assert have in message
    assert "https://go.dev/dl/" in message
    assert "apt-get install golang" not in message


def test_the_cli_without_go_says_which_go_to_install(tmp_path: Path) -> None:
    # PATH without go, and an empty binary cache, so `up` would have to build
    path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "go").exists()
    )
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("KUBELOOP_ASSETS", "KUBEBUILDER_ASSETS")
        },
        "PATH": path,
        "KUBELOOP_CONTROLPLANE_CACHE": str(tmp_path / "empty-cache"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    need = required_go(build_script().parent)
    proc = subprocess.run(
        [sys.executable, "-m", "kubeloop", "envtest", "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"needs Go >= {need} on PATH, and there is no `go`" in proc.stderr
    assert "apt-get install golang" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
