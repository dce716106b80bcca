"""The local control plane itself: clean start, clean stop, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane, ControlPlaneOptions, StartError, find_assets
from kubeloop.envtest._process import reap_leftovers, run_dir

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def _wait_dead(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_stop_leaves_nothing_running() -> None:
    cp = ControlPlane(ControlPlaneOptions(scheduler=False))
    cp.start()
    pids, data_dir = cp.pids, cp.dir
    assert len(pids) == 2
    assert all(_alive(p) for p in pids)
    assert cp.rest().get("/api/v1/namespaces/default")["metadata"]["name"] == "default"
    cp.stop()
    assert _wait_dead(pids) == []
    assert not data_dir.exists()


def test_killed_owner_takes_its_components_with_it(tmp_path: Path) -> None:
    script = (
        "import json, sys, time\n"
        "from kubeloop.envtest import ControlPlane, ControlPlaneOptions\n"
        "cp = ControlPlane(ControlPlaneOptions(scheduler=False))\n"
        "cp.start()\n"
        "print(json.dumps({'pids': cp.pids, 'dir': str(cp.dir)}), flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    info = json.loads(owner.stdout.readline())
    assert (run_dir() / f"{owner.pid}.json").exists()
    owner.kill()  # SIGKILL: no finaliser runs
    owner.wait()
    assert _wait_dead(info["pids"]) == []  # the parent-death signal did it
    reap_leftovers()  # the next start cleans the record and the temp dir
    assert not (run_dir() / f"{owner.pid}.json").exists()
    assert not Path(info["dir"]).exists()


def test_failed_start_reports_the_component_log() -> None:
    cp = ControlPlane(
        ControlPlaneOptions(scheduler=False, apiserver_args=["--no-such-flag-for-the-test"])
    )
    with pytest.raises(StartError) as info:
        cp.start()
    message = str(info.value)
    assert "kube-apiserver exited" in message
    assert "no-such-flag-for-the-test" in message
    assert cp.pids == []


def test_apiserver_reports_the_pinned_version() -> None:
    out = subprocess.run(
        [str(find_assets().kube_apiserver), "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "Kubernetes v1.37.2"


def _kubeloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeloop", *args], capture_output=True, text=True, timeout=180
    )


def test_cli_up_kubectl_status_down(tmp_path: Path) -> None:
    d = tmp_path / "env"
    up = _kubeloop("envtest", "up", "--dir", str(d), "--no-scheduler")
    assert up.returncode == 0, up.stderr
    last = up.stdout.strip().splitlines()[-1]  # eval-able: export KUBECONFIG=<path>
    assert last == f"export KUBECONFIG={d / 'kubeconfig'}"
    kubeconfig = last.removeprefix("export KUBECONFIG=")
    try:
        kubectl = _kubeloop("envtest", "assets", "--binary", "kubectl").stdout.strip()
        got = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "get", "ns", "-o", "name"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "namespace/default" in got.stdout.split()
        status = _kubeloop("envtest", "status", "--dir", str(d))
        assert status.returncode == 0
        state = json.loads(status.stdout)
        assert state["ready"] is True
        pids = [state["pid"], *state["components"]]
    finally:
        down = _kubeloop("envtest", "down", "--dir", str(d))
    assert down.returncode == 0
    assert _wait_dead(pids) == []
    assert _kubeloop("envtest", "status", "--dir", str(d)).returncode == 1
