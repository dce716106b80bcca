"""Follow one pending pod's data through an Autoscaler reconcile, from the reconcile to
its targetNodes write, and count the modules the data re-enters after leaving them.

Issue 20 asks that this path "re-enters no module it has left more than once". This runs
one reconcile in process (``kubeloop.testing.reconcile_once`` over a fixed snapshot: an
Autoscaler, its NodePool at 0 nodes, one pending pod; the target write is recorded, not
applied) under ``sys.setprofile``, and follows the pod by identity.

What counts as the data being in a module, and leaving it (one rule for every module):

- the pod's data is first the pod object (a mapping named as the pod, with a ``spec``);
  whatever a call that held the data returns joins it (a record built from the pod, a plan
  placing it, a decision carrying the plan);
- a call of the operator's code (``nodepool_operator.*``; the runtime and the standard
  library are the roads, not the rooms) *holds* the data when it is handed it: one of its
  arguments is the data or holds it one step down (an item of a list, tuple, set or dict, a
  field of an object), or a call returned the data to it: a call of ours that held it, or a
  read of the runtime (its cache) that returned the pod;
- the data enters a module when a call there comes to hold it, and leaves it when that call
  returns: it goes back to the nearest call of ours up the stack (for a worker thread, the
  one that handed the work over with ``asyncio.to_thread``), which holds it from then on;
- the path is the modules the data is in, in order, from the first call of ours that holds it
  to the target write (``_scale.write_target``).

So the path starts where the data does, not where the reconcile does: the reconcile asks its
first step (observe) with a Request and gets the pod's data back from it; it has not had the
data before, so observe's return is the data entering the reconcile's module, not coming
back to it. A recipe that is handed the data and calls three steps with it still gets two
returns, and a module that hands the data out twice (a fit check, then a search) comes back
twice: ``tests/unit/nodepool_operator/test_pod_path.py`` runs the follower over hand-made
modules to show both.

A record's own behaviour is not a room: a method or property of the object carrying the data
(``obs.pool_name``, ``view.requests.fits_in(free)``), a frozen value's arithmetic and a
record's constructor read or make the record where it is; what they return joins the data
(``follow(strict=True)`` counts them as rooms too). A call of another module's function with
the data (a getter above all) is a move. A coroutine suspending at an ``await`` and resuming
later is not a return: the data stays where it is. A module entered again after the data
left it counts once per return.

    .venv/bin/python -m tools.pod_path          # the modules passed and every re-entry
"""

from __future__ import annotations

import asyncio
import dis
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
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
#: Where following starts (the reconcile: what it calls is traced, not what ran before) and
#: ends (the target write).
START = (RECIPE, "reconcile")
END = ("nodepool_operator.controllers.autoscaler._scale", "write_target")
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


class _Follower:
    """The profile hook: marks the pod's data and records where it goes (see the module's
    docstring for the rule). ``package``: whose code the rooms are; ``start``, ``end``: the
    (module, function) whose call starts the trace and whose call ends the path; ``pod``: the
    name of the pod followed."""

    def __init__(
        self,
        *,
        strict: bool = False,
        package: str = PACKAGE,
        start: tuple[str, str] = START,
        end: tuple[str, str] = END,
        pod: str = POD,
    ) -> None:
        self.strict = strict  # count a record's own methods as modules too
        self.package, self.start, self.end, self.pod = package, start, end, pod
        self.path = PodPath()
        self._data: dict[int, object] = {}  # id -> the object (kept alive: ids stay unique)
        self._holding: set[FrameType] = set()  # the calls of ours that hold the data
        self._reading: set[FrameType] = set()  # a record's own method: no move, see _own
        self._done = False
        # the informers' handlers run before the reconcile: not the path; the trace starts
        # at the reconcile's call, which holds nothing until a call hands it the data
        self._root: FrameType | None = None
        # the frame of ours that handed work to a worker thread (asyncio.to_thread): what
        # the thread returns goes back there, though the thread's stack does not show it
        self._awaiting: FrameType | None = None

    def _is_pod(self, value: object) -> bool:
        if not isinstance(value, Mapping) or "spec" not in value:
            return False
        meta = value.get("metadata")
        return isinstance(meta, Mapping) and meta.get("name") == self.pod

    def _mark(self, value: object) -> None:
        if value is None or isinstance(value, str | int | float | bool):
            return
        if isinstance(value, Mapping | list | tuple | set | frozenset) and not value:
            return  # an empty container carries nothing, and empty ones are shared singletons
        self._data[id(value)] = value

    def _ours(self, frame: FrameType) -> bool:
        return str(frame.f_globals.get("__name__", "")).startswith(self.package)

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
        """Whether ``frame`` is called from the reconcile: below it, or in a worker thread
        (whose stack starts there)."""
        if threading.current_thread() is not threading.main_thread():
            return True
        caller = frame.f_back
        while caller is not None:
            if caller is self._root:
                return True
            caller = caller.f_back
        return False

    def _caller(self, frame: FrameType) -> FrameType | None:
        """The nearest call of ours up the stack from ``frame``, or for a worker thread's
        stack with none, the one that handed the work over."""
        caller = _ours_up(frame.f_back, self._ours)
        if caller is None and threading.current_thread() is not threading.main_thread():
            caller = self._awaiting
        return caller

    def _hold(self, frame: FrameType) -> None:
        """``frame`` holds the data from now on: the data is in its module."""
        self._holding.add(frame)
        module = frame.f_globals.get("__name__", "")
        if not self.path.modules or self.path.modules[-1] != module:
            self.path.modules.append(module)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self._done or event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if self._root is None:
            if event == "call" and (module, frame.f_code.co_name) == self.start:
                self._root = frame
                self._called(frame, module)  # handed the data itself, it holds it too
            return
        if frame in self._holding and event == "call":
            return  # a coroutine on the path resumed after an await: the data did not move
        if event == "call" and module == "asyncio.threads" and frame.f_code.co_name == "to_thread":
            self._awaiting = _ours_up(frame.f_back, self._ours)
            return
        if event == "return" and _suspended(frame):
            return  # ... and the await that suspended it: it has not returned
        if event == "call":
            self._called(frame, module)
        elif frame in self._reading:  # what a record's method returns is the data too
            self._reading.discard(frame)
            self._mark(arg)
        elif frame in self._holding:  # a call on the path returns: the data goes back
            self._holding.discard(frame)
            self._returned(frame, arg)
        elif not self._ours(frame) and self._is_pod_read(arg) and self._below_the_reconcile(frame):
            self._returned(frame, arg)  # a read of the runtime hands the pod to its reader

    def _called(self, frame: FrameType, module: str) -> None:
        if (module, frame.f_code.co_name) == self.end:
            if self.path.modules:  # the data reached the write
                self._hold(frame)
                self.path.wrote = self._done = True
            return
        if not module.startswith(self.package):
            return  # the roads
        if frame is not self._root and not self._below_the_reconcile(frame):
            return  # an informer's handler meanwhile: not this pod's path
        args = [frame.f_locals[n] for n in frame.f_code.co_varnames[: _arity(frame)]]
        if any(self._carries(a) for a in args):
            if self.strict is False and self._own(frame, args):
                self._reading.add(frame)
                return
            for a in args:
                if self._is_pod(a):
                    self._mark(a)
            self._hold(frame)

    def _returned(self, frame: FrameType, value: object) -> None:
        self._mark(value)
        for part in _parts(value):
            self._mark(part)
        caller = self._caller(frame)
        if caller is not None:
            self._hold(caller)

    def _is_pod_read(self, value: object) -> bool:
        return self._is_pod(value) or any(self._is_pod(part) for part in _parts(value))


def _ours_up(frame: FrameType | None, ours: Callable[[FrameType], bool]) -> FrameType | None:
    """The nearest frame from ``frame`` up its callers that ``ours`` accepts."""
    while frame is not None and not ours(frame):
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
    _, writes = await reconcile_once(mgr, Request("scaler"), controller="autoscaler")
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
