"""The background process behind ``kubeloop envtest up``.

It owns the control plane: its children die with it (parent-death signal), and
SIGTERM (``kubeloop envtest down``) stops them cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from kubeloop.envtest._controlplane import ControlPlane, ControlPlaneOptions

STATE_FILE = "state.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeloop.envtest._daemon")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--no-scheduler", action="store_true")
    parser.add_argument("--cluster", action="store_true", help="kube-controller-manager + kwok")
    args = parser.parse_args(argv)
    directory: Path = args.dir.resolve()
    # a fresh cluster every time: stale etcd data would not match the new certificates' users
    shutil.rmtree(directory / "etcd", ignore_errors=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cp = ControlPlane(
        ControlPlaneOptions(
            dir=directory,
            scheduler=not args.no_scheduler,
            controller_manager=args.cluster,
            kwok=args.cluster,
        )
    )
    try:
        cp.start()
    except Exception as err:
        print(f"control plane failed to start: {err}", file=sys.stderr, flush=True)
        return 1
    state = {
        "pid": os.getpid(),
        "server": cp.server,
        "kubeconfig": str(cp.kubeconfig),
        "components": cp.pids,
        "scheduler": not args.no_scheduler,
        "cluster": args.cluster,
        "started": time.time(),
    }
    (directory / STATE_FILE).write_text(json.dumps(state, indent=2))
    try:
        stop.wait()
    finally:
        cp.stop()
        (directory / STATE_FILE).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
