"""Loop detection on hand-made events: loops through owned children, and spec fights.

The end-to-end versions (real writes, real watch events) are in
tests/integration/test_loops.py.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from kubeloop import Added, Deleted, Request, Updated
from kubeloop._loopdetect import LoopDetectionOptions, LoopDetector, field_owner

REQ = Request("web", "ns")


def obj(kind: str, name: str, rv: int, **fields: Any) -> dict[str, Any]:
    api = "v1" if kind == "ConfigMap" else "example.dev/v1"
    # a custom resource's generation moves with every spec change; here: with every version
    generation = 1 if kind == "ConfigMap" else rv
    meta = {"name": name, "namespace": "ns", "resourceVersion": str(rv), "generation": generation}
    return {"apiVersion": api, "kind": kind, "metadata": meta, **fields}


def managed(manager: str, *paths: str, time: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for path in paths:
        node = fields
        for part in path.split("."):
            node = node.setdefault(f"f:{part}", {})
    return {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields}


def detector(found: list[Any], fights: list[Any]) -> LoopDetector:
    return LoopDetector(
        LoopDetectionOptions(threshold=3),
        lambda req, o, f: found.append((req, f)),
        on_fight=lambda req, o, path, pair: fights.append((req, path, pair)),
        primary_kind=("example.dev", "Site"),
    )


def test_a_loop_through_an_owned_child_is_detected() -> None:
    found: list[Any] = []
    det = detector(found, [])
    child = obj("ConfigMap", "web-config", 10, data={"stamp": "0"})
    for i in range(1, 4):
        new = obj("ConfigMap", "web-config", 10 + i, data={"stamp": str(i)})
        det.own_write(new)  # our reconcile wrote the child ...
        det.enqueued(REQ, Updated(child, new))  # ... its event maps back to the owner
        assert det.starting(REQ)
        child = new
    assert found == [(REQ, ["ConfigMap web-config: data.stamp"])]


def test_a_child_changed_by_someone_else_ends_the_streak() -> None:
    found: list[Any] = []
    det = detector(found, [])
    child = obj("ConfigMap", "web-config", 10, data={"stamp": "0"})
    for i in range(1, 6):
        new = obj("ConfigMap", "web-config", 10 + i, data={"stamp": str(i)})
        if i != 3:
            det.own_write(new)
        det.enqueued(REQ, Updated(child, new))
        assert det.starting(REQ) is (i != 3)
        child = new
    assert found == []  # 2 in a row, a foreign write, then 2 in a row: never 3


def test_a_generation_change_of_the_primary_is_never_self_triggered() -> None:
    det = detector([], [])
    old = obj("Site", "web", 1, spec={"size": 1})
    new = obj("Site", "web", 2, spec={"size": 2})
    det.own_write(new)
    det.enqueued(REQ, Updated(old, new))
    assert not det.starting(REQ)


def test_field_owner_reads_managed_fields() -> None:
    entries = [
        managed("kubectl", "spec.replicas", "spec.image", time="2026-01-01T00:00:01Z"),
        managed("hpa", "spec.replicas", time="2026-01-01T00:00:02Z"),
        {**managed("kubeloop", "spec.replicas"), "subresource": "status"},
    ]
    assert field_owner(entries, "spec.replicas") == "hpa"  # the latest of two co-owners
    assert field_owner(entries, "spec.image") == "kubectl"
    assert field_owner(entries, "spec.other") is None


def test_a_spec_field_flipping_between_two_managers_is_reported_once() -> None:
    fights: list[Any] = []
    det = detector([], fights)
    old = obj("Site", "web", 1, spec={"size": 1, "image": "a"})
    owners = ["gitops", "autoscaler", "gitops", "autoscaler", "gitops", "autoscaler"]
    for i, owner in enumerate(owners):
        new = obj("Site", "web", 2 + i, spec={"size": 3 if owner == "autoscaler" else 1})
        new["spec"]["image"] = "a"
        det.enqueued(
            REQ, Updated(old, new, [managed(owner, "spec.size"), managed("ci", "spec.image")])
        )
        det.starting(REQ)
        old = new
    assert fights == [(REQ, "spec.size", ("autoscaler", "gitops"))]


def test_one_writer_changing_a_field_often_is_no_fight() -> None:
    fights: list[Any] = []
    det = detector([], fights)
    old = obj("Site", "web", 1, spec={"size": 0})
    for i in range(1, 8):
        new = obj("Site", "web", 1 + i, spec={"size": i})
        det.enqueued(REQ, Updated(old, new, [managed("autoscaler", "spec.size")]))
        old = new
    # two managers taking turns once each is a hand-over, not a fight
    for owner in ("gitops", "autoscaler"):
        new = obj("Site", "web", 20 if owner == "gitops" else 21, spec={"size": 99})
        new["spec"]["size"] = 50 if owner == "gitops" else 60
        det.enqueued(REQ, Updated(old, new, [managed(owner, "spec.size")]))
        old = new
    assert fights == []


# -- bounded memory (issue 23, bug 7) -------------------------------------------------------


def big(name: str, rv: int) -> dict[str, Any]:
    """A ConfigMap of a few KB decoded, as a cache read hands out."""
    return obj("ConfigMap", name, rv, data={f"k{i}": "x" * 40 for i in range(40)})


def retained(fn: Any) -> int:
    """Bytes still allocated after ``fn()`` returned and its garbage was collected."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_standby_that_never_reconciles_keeps_no_events() -> None:
    # a standby's workers never start: events of 500 objects, none reconciled (enough that a
    # table's fixed cost is a few bytes an object; kept events would be ~14 KB each)
    det = detector([], [])
    reqs = [Request(f"o{i}", "ns") for i in range(500)]

    def events() -> None:
        for req in reqs:
            det.enqueued(req, Added(big(req.name, 1)))
            for rv in range(2, 5):  # three updates by someone else
                det.enqueued(req, Updated(big(req.name, rv - 1), big(req.name, rv)))

    per_object = retained(events) / len(reqs)
    # the events alone are ~14 KB per object decoded; a dict slot is what is left
    assert per_object < 200, f"{per_object:.0f} B kept per object"
    assert det.footprint()["pending"] == len(reqs)


def test_what_one_object_keeps_does_not_grow_with_its_events() -> None:
    det = detector([], [])

    def updates(n: int) -> None:
        for rv in range(1, n + 1):  # updates that may yet turn out ours: kept as hashes
            det.enqueued(REQ, Updated(big("web", rv), big("web", rv + 1)))

    few = retained(lambda: updates(3))
    det = detector([], [])
    many = retained(lambda: updates(300))
    assert many <= few + 600, f"{few} B after 3 updates, {many} B after 300"
    assert not det.starting(REQ)  # too many undecided events: counted as outside


def test_own_writes_are_bounded_and_forgotten_with_the_object() -> None:
    det = LoopDetector(LoopDetectionOptions(remembered_objects=100), lambda *a: None)
    for i in range(1000):  # written, never watched: no event ever comes back
        for rv in range(20):
            det.own_write(obj("ConfigMap", f"c{i}", 100 * i + rv))
    assert det.footprint()["own_objects"] == 100
    last = obj("ConfigMap", "c999", 99_919)
    det.enqueued(REQ, Deleted(last))
    assert det.footprint()["own_objects"] == 99


def test_an_event_that_beats_our_write_response_is_still_ours() -> None:
    found: list[Any] = []
    det = detector(found, [])
    child = obj("ConfigMap", "web-config", 10, data={"stamp": "0"})
    for i in range(1, 4):
        new = obj("ConfigMap", "web-config", 10 + i, data={"stamp": str(i)})
        det.enqueued(REQ, Updated(child, new))  # the watch was faster ...
        det.own_write(new)  # ... than the write's response
        assert det.starting(REQ)
        child = new
    assert found == [(REQ, ["ConfigMap web-config: data.stamp"])]


def test_tables_are_what_footprint_counts() -> None:
    det = LoopDetector(LoopDetectionOptions(remembered_objects=10), lambda *a: None)
    for i in range(15):
        det.own_write(obj("ConfigMap", f"c{i}", 100 + i))
    det.enqueued(REQ, Added(big("web", 1)))
    tables = det.tables()
    assert set(tables) == set(det.footprint())
    assert {k: len(v) for k, v in tables.items()} == det.footprint()
    assert det.footprint()["own_objects"] == 10
    assert det.footprint()["pending"] == 1
