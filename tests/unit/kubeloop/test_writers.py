"""Naming the other side of a 409 from managedFields summaries."""

from __future__ import annotations

from typing import Any

from kubeloop._writers import Writer, WriterLog, writers_of, writers_since


def entry(manager: str, time: str, operation: str = "Update", sub: str = "") -> dict[str, Any]:
    e: dict[str, Any] = {"manager": manager, "operation": operation, "time": time}
    if sub:
        e["subresource"] = sub
    e["fieldsType"] = "FieldsV1"
    e["fieldsV1"] = {"f:spec": {}}
    return e


def obj(rv: str, *entries: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "uid": uid, "resourceVersion": rv}
    if entries:
        meta["managedFields"] = list(entries)
    return {"metadata": meta}


T1, T2, T3 = "2026-12-01T10:00:01Z", "2026-12-01T10:00:02Z", "2026-12-01T10:00:03Z"


def test_summary_keeps_who_and_when_not_the_field_set() -> None:
    o = obj("5", entry("ctl", T1, sub="status"), entry("bumper", T2))
    assert writers_of(o) == (
        Writer("ctl", "Update", "status", T1),
        Writer("bumper", "Update", "", T2),
    )
    assert writers_of(obj("5")) is None


def test_a_summary_of_entries_not_as_the_server_writes_them_is_text() -> None:
    # a transform's (or a hand-made object's) odd values: named as text, never a crash
    odd = {"manager": ["a", "b"], "operation": "Update", "time": 5}
    assert writers_of({"metadata": {"managedFields": [odd, "not an entry"]}}) == (
        Writer("['a', 'b']", "Update", "", "5"),
    )


def test_writers_since_names_new_and_newer_entries() -> None:
    before = writers_of(obj("5", entry("ctl", T1, sub="status"), entry("bumper", T1)))
    after = writers_of(
        obj(
            "7",
            entry("ctl", T1, sub="status"),
            entry("bumper", T3),
            entry("kubectl", T2, operation="Apply"),
        )
    )
    assert after is not None
    assert [w.manager for w in writers_since(before, after)] == ["bumper", "kubectl"]


def test_same_second_or_unknown_base_falls_back_to_the_newest() -> None:
    same = writers_of(obj("5", entry("ctl", T1, sub="status"), entry("bumper", T2)))
    assert same is not None
    assert [w.manager for w in writers_since(same, same)] == ["bumper"]
    assert [w.manager for w in writers_since(None, same)] == ["bumper"]
    assert writers_since(None, ()) == []


def test_log_is_bounded_by_version_and_forgets() -> None:
    log = WriterLog(limit=2)
    log.record(obj("5", entry("a", T1), uid="u1"))
    log.record(obj("6", entry("b", T1), uid="u2"))
    stripped = obj("5", uid="u1")
    assert log.at(stripped) == (Writer("a", "Update", "", T1),)
    assert log.at(obj("4", uid="u1")) is None, "another version: unknown"
    log.record(obj("7", entry("c", T1), uid="u3"))
    assert len(log) == 2
    assert log.at(stripped) is None, "the oldest entry went first"
    log.refresh(obj("9", entry("z", T2), uid="unknown"))
    assert len(log) == 2, "a write of an object nobody recorded is not kept"
    log.forget(obj("7", uid="u3"))
    assert len(log) == 1
