"""The ``kubeloop`` command: ``kubeloop envtest up|status|down|assets``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from kubeloop.envtest import AssetsError, find_assets
from kubeloop.envtest._daemon import STATE_FILE

DEFAULT_DIR = Path(".envtest")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _state(directory: Path) -> dict[str, object] | None:
    try:
        state: dict[str, object] = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if _alive(int(str(state["pid"]))) else None


def _up(directory: Path, scheduler: bool, cluster: bool, timeout: float) -> int:
    directory = directory.resolve()
    if (state := _state(directory)) is not None:
        print(state["kubeconfig"])
        print("already running", file=sys.stderr)
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    try:
        find_assets(cluster=cluster)  # build first (in the foreground, with progress) if needed
    except AssetsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    log = (directory / "daemon.log").open("wb")
    cmd = [sys.executable, "-m", "kubeloop.envtest._daemon", "--dir", str(directory)]
    if not scheduler:
        cmd.append("--no-scheduler")
    if cluster:
        cmd.append("--cluster")
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (state := _state(directory)) is not None:
            print(state["kubeconfig"])
            return 0
        if proc.poll() is not None:
            print((directory / "daemon.log").read_text(errors="replace"), file=sys.stderr)
            print(f"error: control plane did not start (log: {directory}/logs)", file=sys.stderr)
            return 1
        time.sleep(0.2)
    proc.terminate()
    print(
        f"error: control plane not ready after {timeout:.0f}s (logs: {directory}/logs)",
        file=sys.stderr,
    )
    return 1


def _status(directory: Path) -> int:
    state = _state(directory.resolve())
    if state is None:
        print("not running")
        return 1
    ctx = ssl.create_default_context(cafile=str(directory.resolve() / "pki" / "ca.crt"))
    try:
        with urllib.request.urlopen(f"{state['server']}/readyz", timeout=5, context=ctx) as resp:
            ready = resp.status == 200
    except OSError:
        ready = False
    print(json.dumps({**state, "ready": ready}, indent=2))
    return 0 if ready else 1


def _down(directory: Path, timeout: float) -> int:
    state = _state(directory.resolve())
    if state is None:
        print("not running")
        return 0
    pid = int(str(state["pid"]))
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)  # its children die with it (parent-death signal)
    print("stopped")
    return 0


def _assets(binary: str | None) -> int:
    try:
        # everything a test bed may run, so that `make setup` builds it all up front
        assets = find_assets(cluster=True)
    except AssetsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if binary:
        path = assets.path(binary)
        if path is None:
            print(f"error: {binary} not available", file=sys.stderr)
            return 1
        print(path)
    else:
        print(assets.kube_apiserver.parent)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubeloop")
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser(
        "envtest", help="a local control plane (etcd, kube-apiserver, kube-scheduler)"
    )
    envsub = env.add_subparsers(dest="action", required=True)
    up = envsub.add_parser("up", help="start in the background; prints the kubeconfig path")
    up.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state dir (default: .envtest)")
    up.add_argument("--no-scheduler", action="store_true", help="do not run kube-scheduler")
    up.add_argument(
        "--cluster",
        action="store_true",
        help="also run kube-controller-manager and kwok (Nodes annotated kwok.x-k8s.io/node=fake"
        " are heartbeated and run their pods)",
    )
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default: 120)")
    status = envsub.add_parser("status", help="is it running and ready?")
    status.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    down = envsub.add_parser("down", help="stop it")
    down.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    down.add_argument("--timeout", type=float, default=30.0)
    assets = envsub.add_parser("assets", help="print the binaries' dir (building them if needed)")
    assets.add_argument(
        "--binary",
        choices=[
            "etcd",
            "kube-apiserver",
            "kube-scheduler",
            "kubectl",
            "kube-controller-manager",
            "kwok",
            "kwok-stages.yaml",
        ],
        help="print this binary's path instead",
    )
    args = parser.parse_args(argv)
    if args.action == "up":
        return _up(args.dir, not args.no_scheduler, args.cluster, args.timeout)
    if args.action == "status":
        return _status(args.dir)
    if args.action == "down":
        return _down(args.dir, args.timeout)
    return _assets(args.binary)


if __name__ == "__main__":
    sys.exit(main())
