"""kubeloop.testing.invariants on hand-made log entries and watch events."""

from __future__ import annotations

from typing import Any, cast

from kubeloop.testing.faults import LogEntry
from kubeloop.testing.invariants import GenerationWatch, writes_after_handover, writes_outside
from kubeloop.testing.oracles import RecordedEvent, WatchRecorder


def entry(
    seq: int,
    client: str,
    rv: str | None,
    *,
    resource: str = "configmaps",
    namespace: str = "a",
    started: float | None = None,
    finished: float | None = None,
) -> LogEntry:
    at = float(seq) if started is None else started
    return LogEntry(
        seq=seq,
        client=client,
        user="admin",
        user_agent="test",
        method="PUT",
        path="/x",
        query="",
        verb="update",
        resource=resource,
        subresource=None,
        namespace=namespace,
        name=f"obj-{seq}",
        started=at,
        started_wall=at,
        status=200,
        finished=at + 0.01 if finished is None else finished,
        resource_version=rv,
    )


def test_handover_counts_only_the_old_leaders_writes_after_the_new_leaders_first() -> None:
    writes = [
        entry(1, "old", "10"),
        entry(2, "old", "11"),
        entry(3, "new", "12"),
        entry(4, "old", "13"),  # split brain
        entry(5, "old", "14", resource="leases"),  # coordination, not an object write
        entry(6, "new", "15"),
    ]
    assert [e.seq for e in writes_after_handover(writes, "old")] == [4]


def test_handover_places_a_write_without_resource_version_by_time() -> None:
    writes = [
        entry(1, "new", None, started=5.0, finished=5.1),  # a delete answered with a Status
        entry(2, "old", None, started=4.0),  # before: fine
        entry(3, "old", None, started=6.0),  # started after the new leader's write: late
    ]
    assert [e.seq for e in writes_after_handover(writes, "old")] == [3]
    assert writes_after_handover(writes[1:], "old") == []  # nobody else wrote


def test_handover_does_not_place_a_write_that_changed_nothing_by_its_old_version() -> None:
    # kube-apiserver answers an unchanged patch with the object as it was: the new
    # leader's no-op answered rv 602 after the old leader's rv 603 was answered, so
    # 602 is no commit and says nothing of when it was made (matrix, stop 15)
    writes = [
        entry(1, "old", "603", started=1.0, finished=1.1),
        entry(2, "new", "602", started=5.0, finished=5.1),  # no-op
        entry(3, "new", "610", started=6.0, finished=6.1),
    ]
    assert writes_after_handover(writes, "old") == []
    # the no-op still counts as the new leader acting, by time
    later = [*writes, entry(4, "old", "603", started=5.5, finished=5.6)]  # its own no-op
    assert [e.seq for e in writes_after_handover(later, "old")] == [4]
    # and a real commit of the old leader after the new leader's first commit is late
    late = [*writes, entry(5, "old", "611", started=0.5, finished=7.0)]
    assert [e.seq for e in writes_after_handover(late, "old")] == [5]


def test_writes_outside_a_scope() -> None:
    writes = [entry(1, "op-a", "1"), entry(2, "op-a", "2", namespace="b"), entry(3, "op-b", "3")]
    out = writes_outside(writes, {"op-a"}, lambda e: e.namespace == "a")
    assert [e.seq for e in out] == [2]


class FakeRecorder:
    def __init__(self) -> None:
        self.objects: dict[Any, Any] = {}
        self.listeners: list[Any] = []

    def add_listener(self, fn: Any) -> None:
        self.listeners.append(fn)

    def event(self, kind: str, uid: str, observed: int | None, rv: str) -> None:
        key = ("apps", "a", "x")
        status = {} if observed is None else {"observedGeneration": observed}
        self.objects[key] = {"metadata": {"uid": uid}, "status": status}
        for fn in self.listeners:
            fn(RecordedEvent(kind, key, rv))


def test_generation_watch_sees_a_regression_per_uid() -> None:
    rec = FakeRecorder()
    watch = GenerationWatch(cast(WatchRecorder, rec))
    rec.event("ADDED", "u1", None, "1")
    rec.event("MODIFIED", "u1", 1, "2")
    rec.event("MODIFIED", "u1", 2, "3")
    rec.event("MODIFIED", "u1", 2, "4")
    assert watch.regressions == []
    rec.event("MODIFIED", "u1", 1, "5")
    assert watch.regressions == ["x: observedGeneration 2 -> 1 (rv 5)"]
    rec.event("ADDED", "u2", 1, "6")  # re-created under the same name: starts again
    assert len(watch.regressions) == 1
