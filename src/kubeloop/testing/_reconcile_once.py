"""One reconcile, in process, against a :class:`~kubeloop.testing.Snapshot`.

Karpenter's ``ExpectObjectReconciled`` calls a reconciler directly instead of waiting
for a running manager to get round to it; this is the same idea without the
apiserver: the manager's cache and client read a fixed snapshot, and every write is
recorded, not applied. What the reconcile decided is then plain data to assert on,
with no sleep, no ``eventually`` and no control plane. What needs the real cluster
(convergence over many reconciles, the scheduler, admission, conflicts) stays in
tests against it.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref

from kubeloop import _log
from kubeloop._controller import Controller
from kubeloop._manager import Manager
from kubeloop._reconcile import Request, Result
from kubeloop.testing._snapshot import Write, snapshot_of


async def reconcile_once(
    mgr: Manager, request: Request, *, controller: str | None = None
) -> tuple[Result, list[Write]]:
    """Run ``controller``'s reconciler (the manager's only one by default) once for
    ``request``, and return its result and the writes it made, in order.

    ``mgr`` must be built on a snapshot's client (``Snapshot(objects).client``). Its
    controllers' sources are started as a running manager starts them (their informers
    list the snapshot, with their selectors, transforms and indexes), the reconcile runs
    with the controller's name in context (so field managers are as in production), then
    the event recorder is flushed (its Events are writes too) and the caches stop. The
    manager is spent afterwards: build another for the next reconcile. An exception
    from the reconciler propagates; the writes made before it (the Events it recorded
    flushed) are in ``Snapshot.writes``.
    """
    snapshot = snapshot_of(mgr.client)
    if snapshot is None:
        raise TypeError("reconcile_once needs a manager built on a Snapshot's client")
    if mgr in _SPENT:
        raise RuntimeError("this manager already ran a reconcile_once: build another")
    target = _controller(mgr, controller)
    _SPENT.add(mgr)
    first = len(snapshot.writes)
    mgr.cache.start()
    try:
        for c in mgr.controllers:
            await c.start_sources(mgr.cache)
        tokens = (
            _log.CONTROLLER.set(target.name),
            _log.OBJECT.set(str(request)),
            _log.RECONCILE_ID.set(uuid.uuid4().hex[:12]),
        )
        try:
            result = await target.reconciler(request) or Result()
        finally:
            for var, token in zip(
                (_log.CONTROLLER, _log.OBJECT, _log.RECONCILE_ID), tokens, strict=True
            ):
                var.reset(token)
            # also when it raised: the Warning a failing reconcile records is its answer
            await mgr.recorder.close(flush=True)
    finally:
        await asyncio.gather(*(c.shutdown(0) for c in mgr.controllers))
        await mgr.cache.stop()
    return result, snapshot.writes[first:]


#: Managers that ran a reconcile_once: their caches and event recorders are closed.
_SPENT: weakref.WeakSet[Manager] = weakref.WeakSet()


def _controller(mgr: Manager, name: str | None) -> Controller:
    names = [c.name for c in mgr.controllers]
    if name is None:
        if len(mgr.controllers) != 1:
            raise ValueError(f"the manager has controllers {names}: pass controller=<name>")
        return mgr.controllers[0]
    for c in mgr.controllers:
        if c.name == name:
            return c
    raise ValueError(f"no controller named {name!r}; the manager has {names}")
