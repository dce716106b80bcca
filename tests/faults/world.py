"""What every scenario of the matrix shares: one control plane, one fault proxy, clients.

The oracles read the apiserver directly (``admin``, not through the proxy), so faults
aimed at operators never blind them; the workload writes through the proxy as the client
``user``, so its writes are in the proxy's log next to the operators'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubeloop import Client
from kubeloop.envtest import ControlPlane, ControlPlaneOptions
from kubeloop.envtest._process import Process
from kubeloop.testing.faults import FaultProxy

T = TypeVar("T")
log = logging.getLogger("faults.matrix")
ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "config" / "crd"
_INSTALLED: set[str] = set()


@dataclass
class World:
    cp: ControlPlane
    proxy: FaultProxy
    admin: Client
    user: Client
    dir: Path
    #: The thread control-plane faults run on (see ``_CONTROL``).
    executor: concurrent.futures.ThreadPoolExecutor
    #: Operators whose CRDs are installed (shared by every world of the process).
    installed: set[str] = field(default_factory=lambda: _INSTALLED)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    def kubeconfig(self, client: str) -> Path:
        return self.proxy.kubeconfig_for(client)


#: Restarted components get a parent-death signal tied to the thread that started them,
#: so control-plane faults run on one thread that lives as long as the process.
_CONTROL = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="control-plane")


@contextlib.asynccontextmanager
async def world(cp: ControlPlane | None = None, *, seed: int = 0) -> AsyncIterator[World]:
    """A world on ``cp`` (or a control plane of its own), with a fault proxy in front."""
    executor = _CONTROL
    workdir = Path(tempfile.mkdtemp(prefix="kubeloop-matrix-"))
    async with contextlib.AsyncExitStack() as stack:
        if cp is None:
            loop = asyncio.get_running_loop()
            # kwok keeps the pools' Nodes alive; kube-controller-manager collects what
            # deleted objects owned; kube-scheduler places the disruption scenarios' pods
            # (the full test bed, as the kube_cluster fixture)
            own = ControlPlane(
                ControlPlaneOptions(scheduler=True, controller_manager=True, kwok=True)
            )
            await loop.run_in_executor(executor, own.start)
            stack.callback(own.stop)
            cp = own
        (workdir / "proxy").mkdir()
        proxy = await stack.enter_async_context(FaultProxy(cp, seed=seed, dir=workdir / "proxy"))
        admin = await stack.enter_async_context(Client.from_kubeconfig(cp.kubeconfig))
        user = await stack.enter_async_context(
            Client(proxy.client_config("user"), field_manager="matrix-user")
        )
        w = World(cp, proxy, admin, user, workdir, executor)
        try:
            yield w
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


class Replica:
    """One operator OS process, known to the proxy as ``client``."""

    def __init__(self, client: str, argv: list[str], log_path: Path) -> None:
        self.client = client
        self.argv = argv
        self.log_path = log_path
        self.proc: Process | None = None
        self.starts = 0

    def start(self) -> None:
        self.proc = Process(self.client, [sys.executable, *self.argv], self.log_path)
        self.proc.start()
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.exited() is None:
            self.proc.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.exited() is None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.exited()

    async def stop(self) -> None:
        if self.proc is not None:
            await asyncio.to_thread(self.proc.stop, 15.0)

    def log_tail(self, lines: int = 30) -> str:
        return self.proc.log_tail(lines) if self.proc else "(not started)"
