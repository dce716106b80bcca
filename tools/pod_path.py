"""Follow one pending pod's data through an Autoscaler reconcile, from the reconcile to
its targetNodes write, and count the modules the data re-enters after leaving them.

Issue 20 asks that this path "re-enters no module it has left more than once". This runs
one reconcile in process (``kubeloop.testing.reconcile_once`` over a fixed snapshot: an
Autoscaler, its NodePool at 0 nodes, one pending pod; the target write is recorded, not
applied) under ``sys.setprofile``, and follows the pod by identity:

- the pod's data is first the pod object read from the cache (a mapping named as the pod,
  with a ``spec``); whatever a call that received the pod's data returns joins it (a record
  built from the pod, a plan placing it, a decision carrying the plan);
- a call of the operator's code (``nodepool_operator.*``; the runtime and the standard
  library are the roads, not the rooms) is on the path when one of its arguments is the
  pod's data, or holds it one step down (an item of a list, tuple, set or dict, a field of
  an object);
- the path is the modules those calls run in, in the order the data is in them: entering a
  callee, and coming back to the caller when it returns. It ends at the target write.

A record's own behaviour is not a room: a method or property of the object carrying the data
(``obs.pool_name``, ``view.requests.fits_in(free)``), a frozen value's arithmetic and a
record's constructor read or make the record where it is; what they return joins the data
(``follow(strict=True)`` counts them as rooms too). A call of another module's function with
the data (a getter above all) is a move. A coroutine suspending at an ``await`` and resuming
later is not a return: the data stays where it is. A module entered again after the data
left it counts once per return. A recipe (observe, decide, act) comes back to its own
module between the steps: those returns are the recipe, and are listed apart (``returns to
the reconcile's module``).

    .venv/bin/python tools/pod_path.py          # the modules passed and every re-entry
"""

from __future__ import annotations

import asyncio
import dis
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from types import FrameType
from typing import Any

from kubeloop import Request
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.settings import OperatorSettings

PACKAGE = "nodepool_operator"
RECIPE = "nodepool_operator.controllers.autoscaler.controller"
POD = "waiting"
NAMESPACE = "apps"


@dataclass
class PodPath:
    """The modules the pod's data was in, in order (consecutive repeats merged)."""

    modules: list[str] = field(default_factory=list)
    wrote: bool = False

    @property
    def reentries(self) -> Counter[str]:
        """Module -> how many times the data came back to it after leaving it."""
        seen: set[str] = set()
        again: Counter[str] = Counter()
        for module in self.modules:
            if module in seen:
                again[module] += 1
            seen.add(module)
        return again

    @property
    def outside_the_recipe(self) -> Counter[str]:
        """The re-entries that are not the reconcile's own module coming back between
        its steps."""
        return Counter({m: n for m, n in self.reentries.items() if m != RECIPE})


class _Follower:
    """The profile hook: marks the pod's data and records where it goes."""

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict  # count a record's own methods as modules too
        self.path = PodPath()
        self._data: dict[int, object] = {}  # id -> the object (kept alive: ids stay unique)
        self._carrying: set[FrameType] = set()
        self._reading: set[FrameType] = set()  # a record's own method: no move, see _own
        self._done = False
        self._started = False  # the informers' handlers run before the reconcile: not the path
        # the frame on the path that handed work to a worker thread (asyncio.to_thread): what
        # the thread returns goes back there, though the thread's stack does not show it
        self._awaiting: FrameType | None = None

    def _is_pod(self, value: object) -> bool:
        if not isinstance(value, Mapping) or "spec" not in value:
            return False
        meta = value.get("metadata")
        return isinstance(meta, Mapping) and meta.get("name") == POD

    def _mark(self, value: object) -> None:
        if value is None or isinstance(value, str | int | float | bool):
            return
        if isinstance(value, Mapping | list | tuple | set | frozenset) and not value:
            return  # an empty container carries nothing, and empty ones are shared singletons
        self._data[id(value)] = value

    def _own(self, frame: FrameType, args: list[object]) -> bool:
        """Whether the call is a record's own behaviour: a method or property of the object
        that carries the data (``view.requests.fits_in(free)``, ``obs.pool_name``), or a
        record being made (its ``__init__``, a classmethod constructor). Reading a record's
        attribute through its class is reading the record where it is; the data does not
        move to another module."""
        code = frame.f_code
        if not args or code.co_varnames[0] not in ("self", "cls"):
            return False
        if code.co_varnames[0] == "cls" or code.co_name in ("__init__", "__post_init__"):
            return True
        return self._carries(args[0]) or _frozen(args[0])

    def _carries(self, value: object) -> bool:
        if id(value) in self._data or self._is_pod(value):
            return True
        return any(id(part) in self._data or self._is_pod(part) for part in _parts(value))

    def _below_the_reconcile(self, frame: FrameType) -> bool:
        """Whether ``frame`` is called from the path: below a frame on it, or in the worker
        thread the decision runs in (its stack starts there)."""
        if threading.current_thread() is not threading.main_thread():
            return True
        caller = frame.f_back
        while caller is not None:
            if caller in self._carrying:
                return True
            caller = caller.f_back
        return False

    def _enter(self, module: str) -> None:
        if not self.path.modules or self.path.modules[-1] != module:
            self.path.modules.append(module)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self._done or event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not self._started:
            self._started = module == RECIPE and frame.f_code.co_name == "reconcile"
            if not self._started:
                return
            self.path.modules.append(RECIPE)
            self._carrying.add(frame)  # the pod's data comes back here between the steps
            return
        if frame in self._carrying and event == "call":
            return  # a coroutine on the path resumed after an await: the data did not move
        if event == "call" and module == "asyncio.threads" and frame.f_code.co_name == "to_thread":
            self._awaiting = _on_path(frame.f_back, self._carrying)
            return
        if event == "return" and _suspended(frame):
            return  # ... and the await that suspended it: it has not returned
        if event == "call":
            if module == "nodepool_operator.controllers.autoscaler._scale" and (
                frame.f_code.co_name == "write_target"
            ):
                self._enter(module)
                self.path.wrote = self._done = True
                return
            if not module.startswith(PACKAGE):
                return
            if not self._below_the_reconcile(frame):
                return  # an informer's handler meanwhile: another road, not this pod's path
            args = [frame.f_locals[n] for n in frame.f_code.co_varnames[: _arity(frame)]]
            if any(self._carries(a) for a in args):
                if self.strict is False and self._own(frame, args):
                    self._reading.add(frame)
                    return
                for a in args:
                    if self._is_pod(a):
                        self._mark(a)
                self._carrying.add(frame)
                self._enter(module)
            return
        if frame in self._reading:  # what a record's method returns is the data too
            self._reading.discard(frame)
            self._mark(arg)
            return
        if frame in self._carrying:  # a call on the path returns: the data goes back
            self._carrying.discard(frame)
            self._mark(arg)
            for part in _parts(arg):
                self._mark(part)
            caller = _on_path(frame.f_back, self._carrying)
            if caller is None and threading.current_thread() is not threading.main_thread():
                caller = self._awaiting
            if caller is not None:
                self._enter(caller.f_globals.get("__name__", ""))


def _on_path(frame: FrameType | None, carrying: set[FrameType]) -> FrameType | None:
    """The nearest frame on the path from ``frame`` up its callers."""
    while frame is not None and frame not in carrying:
        frame = frame.f_back
    return frame


def _frozen(value: object) -> bool:
    """Whether ``value`` is a frozen record (a value such as ``Resources``: its arithmetic
    with the pod's request is the value's own)."""
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(getattr(params, "frozen", False))


def _suspended(frame: FrameType) -> bool:
    """Whether a ``return`` event is a coroutine suspending at an ``await`` (its last
    instruction a yield), not returning."""
    code = frame.f_code
    return dis.opname[code.co_code[frame.f_lasti]] == "YIELD_VALUE"


def _arity(frame: FrameType) -> int:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    return n + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)


def _parts(value: object) -> list[object]:
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    if is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name, None) for f in fields(value)]
    slots = getattr(type(value), "__struct_fields__", None)  # msgspec Structs
    if slots is not None:
        return [getattr(value, name, None) for name in slots]
    return []


def snapshot() -> Snapshot:
    """An Autoscaler whose pool has no node, and one pod the scheduler found no room for."""
    api = NODEPOOLS.api_version
    pool = {
        "apiVersion": api,
        "kind": "NodePool",
        "metadata": {"name": "pool", "generation": 1},
        "spec": {"targetNodes": 0, "instanceType": "m5.large", "maxNodes": 5},
    }
    scaler = {
        "apiVersion": api,
        "kind": "Autoscaler",
        "metadata": {"name": "scaler", "generation": 1},
        "spec": {"nodePoolRef": {"name": "pool"}, "namespaces": [NAMESPACE]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {POOL_LABEL: "pool"},
            "containers": [
                {"name": "app", "image": "app", "resources": {"requests": {"cpu": "500m"}}}
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }
    return Snapshot([pool, scaler, pod], resources=[NODEPOOLS, AUTOSCALERS])


async def _reconcile(snap: Snapshot) -> list[Write]:
    settings = OperatorSettings(batch_window_seconds=0.0, install_crds=False)
    mgr = new_manager(snap.client)
    AutoscalerController(mgr, settings).register()
    _, writes = await reconcile_once(mgr, Request("scaler"))
    return writes


def follow(*, strict: bool = False) -> tuple[PodPath, list[Write]]:
    """One reconcile, traced; the path and the writes it made. ``strict``: a record's own
    methods and constructors count as rooms too (see ``_Follower._own``)."""
    follower = _Follower(strict=strict)
    snap = snapshot()

    async def run() -> list[Write]:
        # the decision runs in a worker thread (asyncio.to_thread): trace threads too
        threading.setprofile(follower)
        sys.setprofile(follower)
        try:
            return await _reconcile(snap)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    writes = asyncio.run(run())
    return follower.path, writes


def packages(path: PodPath) -> PodPath:
    """The same path a package at a time (``controllers.autoscaler``, ``scheduling``)."""
    coarse = PodPath(wrote=path.wrote)
    for module in path.modules:
        package = module.rpartition(".")[0]
        if not coarse.modules or coarse.modules[-1] != package:
            coarse.modules.append(package)
    return coarse


def main() -> int:
    path, writes = follow()
    print(f"target written: {path.wrote}; writes recorded: {len(writes)}")
    print(f"modules passed: {len(set(path.modules))}; stays: {len(path.modules)}")
    for i, module in enumerate(path.modules, 1):
        print(f"  {i:3}  {module}")
    again = path.reentries
    print(f"re-entries: {sum(again.values())} in all, {max(again.values(), default=0)} at most")
    for module, n in again.most_common():
        recipe = "  (returns to the reconcile's module)" if module == RECIPE else ""
        print(f"  {n:3}  {module}{recipe}")
    coarse = packages(path)
    print(
        f"a package at a time: {' -> '.join(m.removeprefix(PACKAGE + '.') for m in coarse.modules)}"
    )
    return 0 if path.wrote else 1


if __name__ == "__main__":
    sys.exit(main())
