"""The ``kubeloop`` command: ``kubeloop envtest up|status|down|assets`` and
``kubeloop manifests``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

try:
    from kubeloop.envtest import AssetsError, find_assets
    from kubeloop.envtest._daemon import STATE_FILE
except ImportError as err:  # kubeloop installed without the [testing] extra
    _MISSING: ImportError | None = err
else:
    _MISSING = None


def state_home() -> Path:
    """Where ``up`` keeps its control plane unless given ``--dir``, and where it notes
    the one it started last: ``$XDG_STATE_HOME/kubeloop`` (default
    ``~/.local/state/kubeloop``). Absolute and the same from any working directory, so
    ``status`` and ``down`` find what ``up`` started without being given ``--dir``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).resolve() / "kubeloop"


def default_dir() -> Path:
    return state_home() / "envtest"


def _current_file() -> Path:
    return state_home() / "envtest-current"


def _remember(directory: Path) -> None:
    current = _current_file()
    current.parent.mkdir(parents=True, exist_ok=True)
    current.write_text(f"{directory}\n")


def _resolve_dir(given: Path | None) -> Path:
    """``--dir`` if given; else the dir of the last ``up`` (it records it) or the default
    dir, whichever runs a control plane (the recorded one when neither does)."""
    if given is not None:
        return given.resolve()
    candidates = []
    try:
        recorded = Path(_current_file().read_text().strip())
    except OSError:
        pass
    else:
        if recorded.is_absolute():
            candidates.append(recorded)
    candidates.append(default_dir())
    for candidate in candidates:
        if _state(candidate) is not None:
            return candidate
    return candidates[0]


def _export(kubeconfig: object) -> str:
    """The line ``up`` prints: eval-able (``eval "$(kubeloop envtest up)"``) and plain to
    copy."""
    return f"export KUBECONFIG={shlex.quote(str(kubeconfig))}"


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


def _up(given: Path | None, scheduler: bool, cluster: bool, timeout: float) -> int:
    directory = given.resolve() if given is not None else default_dir()
    if (state := _state(directory)) is not None:
        _remember(directory)
        print(_export(state["kubeconfig"]))
        print(f"already running (in {directory})", file=sys.stderr)
        if cluster and not state.get("cluster"):
            print(
                "warning: it runs without --cluster (no kube-controller-manager, so no"
                " garbage collection); `kubeloop envtest down` and start it again with --cluster",
                file=sys.stderr,
            )
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
            _remember(directory)
            print(_export(state["kubeconfig"]))
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


def _status(given: Path | None) -> int:
    directory = _resolve_dir(given)
    state = _state(directory)
    if state is None:
        print(f"not running (looked in {directory})")
        return 1
    ctx = ssl.create_default_context(cafile=str(directory / "pki" / "ca.crt"))
    try:
        with urllib.request.urlopen(f"{state['server']}/readyz", timeout=5, context=ctx) as resp:
            ready = resp.status == 200
    except OSError:
        ready = False
    print(json.dumps({**state, "dir": str(directory), "ready": ready}, indent=2))
    return 0 if ready else 1


def _down(given: Path | None, timeout: float) -> int:
    directory = _resolve_dir(given)
    state = _state(directory)
    if state is None:
        print(f"not running (looked in {directory})")
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


def _add_manifests(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "manifests",
        help="write the CRDs a Python module defines (kubeloop.crd) as YAML, one file each",
        description="Import MODULE and write the CRDs it defines, <group>_<plural>.yaml each, "
        "into every --out directory. MODULE alone takes every kubeloop.crd.CustomResource at "
        "its top level; MODULE:NAME takes that attribute (a CustomResource, a list of them or "
        "of CRD dicts, or a function returning one). --check writes nothing: it prints a "
        "diff and exits 1 when a file is stale, missing or left over.",
    )
    cmd.add_argument("target", metavar="MODULE[:NAME]")
    cmd.add_argument(
        "--out",
        type=Path,
        action="append",
        help="a directory to write to; repeatable (default: config/crd)",
    )
    cmd.add_argument("--check", action="store_true", help="diff instead of writing")
    cmd.add_argument(
        "--header",
        default=None,
        help="comment lines at the top of each file (default: where they come from)",
    )


def _manifests(target: str, outs: list[Path] | None, check: bool, header: str | None) -> int:
    from kubeloop import crd  # only this command needs it

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module of the project the command runs in
    try:
        crds = crd.load(target)
        if header is None:
            header = (
                f"# Generated from the Python types in {target.partition(':')[0]} by"
                " `kubeloop manifests`.\n"
                "# Do not edit: change the types and regenerate.\n"
            )
        elif header and not header.endswith("\n"):
            header += "\n"
        stale = crd.write_manifests(crds, outs or [Path("config/crd")], header=header, check=check)
    except (ImportError, ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if check and stale:
        print(f"{stale} CRD file(s) out of date", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubeloop")
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser(
        "envtest", help="a local control plane (etcd, kube-apiserver, kube-scheduler)"
    )
    envsub = env.add_subparsers(dest="action", required=True)
    up = envsub.add_parser(
        "up",
        help="start in the background; prints `export KUBECONFIG=...`"
        ' (eval "$(kubeloop envtest up)")',
    )
    dir_help = (
        "state dir (default: $XDG_STATE_HOME/kubeloop/envtest, i.e."
        " ~/.local/state/kubeloop/envtest; status and down default to the last up's)"
    )
    up.add_argument("--dir", type=Path, default=None, help=dir_help)
    up.add_argument("--no-scheduler", action="store_true", help="do not run kube-scheduler")
    up.add_argument(
        "--cluster",
        action="store_true",
        help="also run kube-controller-manager (garbage collection of owned objects, namespace"
        " deletion, ...) and kwok (Nodes annotated kwok.x-k8s.io/node=fake are heartbeated and"
        " run their pods)",
    )
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default: 120)")
    status = envsub.add_parser("status", help="is it running and ready?")
    status.add_argument("--dir", type=Path, default=None, help=dir_help)
    down = envsub.add_parser("down", help="stop it")
    down.add_argument("--dir", type=Path, default=None, help=dir_help)
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
    _add_manifests(sub)
    args = parser.parse_args(argv)
    if args.command == "manifests":
        return _manifests(args.target, args.out, args.check, args.header)
    if _MISSING is not None:
        print(f"error: {_MISSING}", file=sys.stderr)
        return 2
    if args.action == "up":
        return _up(args.dir, not args.no_scheduler, args.cluster, args.timeout)
    if args.action == "status":
        return _status(args.dir)
    if args.action == "down":
        return _down(args.dir, args.timeout)
    return _assets(args.binary)


if __name__ == "__main__":
    sys.exit(main())
