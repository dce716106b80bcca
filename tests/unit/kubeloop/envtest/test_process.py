"""Child processes started from a short-lived thread live on (the parent-death signal
is tied to the forking thread, so the spawn must not happen on it)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from kubeloop.envtest._process import Process


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_child_started_from_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    proc = Process("sleeper", [sleep, "60"], tmp_path / "sleeper.log")
    thread = threading.Thread(target=proc.start)
    thread.start()
    thread.join()
    try:
        assert proc.pid is not None
        time.sleep(0.3)  # a parent-death SIGKILL would have landed by now
        assert _alive(proc.pid)
        assert proc.exited() is None
    finally:
        proc.stop(timeout=5)
    assert proc.exited() is not None
