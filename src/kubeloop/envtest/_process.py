"""Child processes that never outlive their owner.

Three layers, because pytest can be killed in ways that skip every finaliser:
each child gets its own process group (stopping takes the whole group), a
parent-death signal (the kernel kills it when the owner dies), and a pid file
in a shared run dir that the next start reads to reap leftovers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Spawner:
    """One thread that lives as long as the process and forks children for other threads.

    The parent-death signal fires when the *thread* that forked the child ends, not the
    process. A component restarted from a short-lived thread (``asyncio.to_thread``, a
    thread pool) would be killed as soon as that thread finished; forking from this
    thread ties every child to the life of the process, as intended.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
            queue.Queue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is threading.main_thread():
            return fn()  # the main thread lives as long as the process
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="kubeloop-envtest-spawner", daemon=True
                )
                self._thread.start()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((fn, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            fn, done = self._jobs.get()
            try:
                done.set_result(fn())
            except BaseException as err:
                done.set_exception(err)


_spawner = _Spawner()


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process:
    """One component: started in its own process group, logged to a file."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def start(self) -> None:
        self._log = log = self.log_path.open("ab")
        self._popen = _spawner.run(
            lambda: subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        )

    def exited(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return None if self._popen is None else self._popen.poll()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process (e.g. SIGSTOP/SIGCONT to pause and resume it)."""
        if self._popen is None or self._popen.poll() is not None:
            raise ProcessLookupError(f"{self.name} is not running")
        os.kill(self._popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group at once and reap it: a crash, not a shutdown."""
        popen = self._popen
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL it if it is still there after ``timeout``."""
        popen = self._popen
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGTERM)
                os.killpg(popen.pid, signal.SIGCONT)  # a paused (SIGSTOPped) one must see it
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def run_dir() -> Path:
    """Where owners record their children, so a later start can reap leftovers."""
    d = Path(tempfile.gettempdir()) / f"kubeloop-envtest-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def record(owner: int, processes: list[Process], data_dir: Path, *, owns_dir: bool) -> Path:
    """Write the pid file for ``owner``; returns its path."""
    path = run_dir() / f"{owner}.json"
    entry = {
        "owner": owner,
        "dir": str(data_dir),
        "owns_dir": owns_dir,
        "children": [{"pid": p.pid, "argv0": p.argv[0]} for p in processes if p.pid],
    }
    path.write_text(json.dumps(entry))
    return path


def reap_leftovers() -> int:
    """Kill children whose owner is gone; returns how many processes were killed."""
    killed = 0
    for path in run_dir().glob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if _alive(int(entry["owner"])):
            continue
        for child in entry.get("children", []):
            pid = int(child["pid"])
            # the pid may have been reused: only kill what still runs our binary
            if _alive(pid) and child["argv0"] in _cmdline(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                killed += 1
        deadline = time.monotonic() + 5
        while any(_alive(int(c["pid"])) for c in entry.get("children", [])):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if entry.get("owns_dir"):
            shutil.rmtree(entry["dir"], ignore_errors=True)
        path.unlink(missing_ok=True)
    return killed
