"""Safety invariants for tests under faults, read from the apiserver and the fault proxy's log.

They complement :mod:`kubeloop.testing.oracles` (which compares runs and checks that a
state is eventually reached) with properties that must hold *at every step*:

:class:`GenerationWatch`
    ``status.observedGeneration`` of an object never goes down (per uid: a re-created
    object starts again), as the apiserver's watch reports it, in its order. A regression
    means a writer acted on an older spec after a newer one had been reported done.
:func:`writes_after_handover`
    With two replicas and leader election, the writes the old leader got accepted after
    the new leader's first write (commit order). client-go's promise: none.
:func:`writes_outside`
    Writes a client made to objects outside the scope it was given (two instances of one
    operator in two namespaces must never touch each other's objects).

Public API (stable): :class:`GenerationWatch`, :func:`writes_after_handover`,
:func:`writes_outside`, :data:`NOT_OBJECT_WRITES`.

    async with WatchRecorder(client, [APPS], namespace=ns) as rec:
        generations = GenerationWatch(rec)
        ...                                          # the workload, the faults
    assert generations.regressions == []
    assert writes_after_handover(proxy.log.writes(), old="op-a") == []
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable

from kubeloop.testing._faultlog import LogEntry
from kubeloop.testing.oracles import ObjectKey, RecordedEvent, WatchRecorder

#: Resources whose writes are about coordination, not the operator's objects: the
#: leader Lease (both replicas write it by design) and Events.
NOT_OBJECT_WRITES: frozenset[str] = frozenset({"leases", "events"})


class GenerationWatch:
    """Watches a :class:`~kubeloop.testing.oracles.WatchRecorder`'s events and lists every
    time an object's ``status.observedGeneration`` went down."""

    def __init__(self, recorder: WatchRecorder) -> None:
        self._recorder = recorder
        self._highest: dict[tuple[ObjectKey, str], int] = {}
        #: One line per regression: ``"<name>: observedGeneration 3 -> 2 (rv 123)"``.
        self.regressions: list[str] = []
        recorder.add_listener(self._seen)

    def _seen(self, event: RecordedEvent) -> None:
        if event.type == "DELETED":
            return
        obj = self._recorder.objects.get(event.key)
        if obj is None:
            return
        observed = (obj.get("status") or {}).get("observedGeneration")
        if not isinstance(observed, int):
            return
        key = (event.key, str((obj.get("metadata") or {}).get("uid")))
        highest = self._highest.get(key)
        if highest is not None and observed < highest:
            self.regressions.append(
                f"{event.key[2]}: observedGeneration {highest} -> {observed} "
                f"(rv {event.resource_version})"
            )
        self._highest[key] = observed if highest is None else max(highest, observed)


def _object_writes(
    writes: Iterable[LogEntry], exclude: Collection[str] = NOT_OBJECT_WRITES
) -> list[LogEntry]:
    return [w for w in writes if (w.resource or "") not in exclude]


def _committed(rows: list[LogEntry]) -> set[int]:
    """The ``seq`` of every write whose answer's resourceVersion is a commit.

    kube-apiserver answers a write that changes nothing (an unchanged patch or update)
    with the object as it was, at its old resourceVersion: no commit, and that version
    says nothing of when the write was made. A version that is not above every version
    already answered before the write reached the proxy cannot be this write's commit
    (etcd's revisions only grow), so such a write is treated as one without a version."""
    answered = sorted(
        (e.finished, int(e.resource_version))
        for e in rows
        if e.resource_version and e.finished is not None
    )
    times = [t for t, _ in answered]
    highest: list[int] = []
    for _, rv in answered:
        highest.append(max(rv, highest[-1]) if highest else rv)
    out: set[int] = set()
    for e in rows:
        if not e.resource_version:
            continue
        before = bisect.bisect_left(times, e.started)  # answered strictly before it started
        if before == 0 or int(e.resource_version) > highest[before - 1]:
            out.add(e.seq)
    return out


def writes_after_handover(
    writes: Iterable[LogEntry], old: str, *, exclude: Collection[str] = NOT_OBJECT_WRITES
) -> list[LogEntry]:
    """``old``'s accepted writes committed after the first write of any other client.

    Pass the log's accepted writes of the replicas (``proxy.log.writes()``, filtered to
    them). Commit order is the resourceVersion where the answer carried a new one. A
    write without one (a delete answered with a ``Status``), or whose answer carried a
    version older than one already answered before it (a write that changed nothing, so
    the API server committed nothing), is placed by time: it counts as late only if it
    *started* after the other's first write had been answered, so clock resolution never
    makes a write look late."""
    rows = _object_writes(writes, exclude)
    others = [e for e in rows if e.client != old]
    if not others:
        return []
    commits = _committed(rows)
    rvs = [int(e.resource_version) for e in others if e.resource_version and e.seq in commits]
    first_rv = min(rvs) if rvs else None
    first_done = min(e.finished if e.finished is not None else e.started for e in others)
    late: list[LogEntry] = []
    for e in rows:
        if e.client != old:
            continue
        if e.resource_version and e.seq in commits and first_rv is not None:
            if int(e.resource_version) > first_rv:
                late.append(e)
        elif e.started > first_done:
            late.append(e)
    return late


def writes_outside(
    writes: Iterable[LogEntry],
    clients: Collection[str],
    in_scope: Callable[[LogEntry], bool],
    *,
    exclude: Collection[str] = NOT_OBJECT_WRITES,
) -> list[LogEntry]:
    """Accepted writes by ``clients`` to objects ``in_scope`` says are not theirs."""
    return [e for e in _object_writes(writes, exclude) if e.client in clients and not in_scope(e)]
