"""The oracles' pure logic: normalising, comparing runs, subset matching, stability."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeloop.testing._faultlog import FaultLog, LogEntry
from kubeloop.testing.oracles import (
    Difference,
    Normalizer,
    NotStable,
    OpCount,
    RunRecord,
    State,
    assert_no_differences,
    compare_operations,
    compare_runs,
    compare_states,
    eventually_stable,
    nondeterministic_paths,
    normalise,
    operations_from_log,
    subset_mismatches,
)


def _cm(name: str, data: dict[str, str], *, rv: str = "1", uid: str = "u") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": "2026-12-01T00:00:00Z",
            "managedFields": [{"manager": "x"}],
            "ownerReferences": [{"kind": "Pool", "name": "p", "uid": uid}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"},
        },
        "data": data,
        "status": {"conditions": [{"type": "Ready", "lastTransitionTime": rv}]},
    }


def test_normalise_drops_what_differs_between_correct_runs() -> None:
    out = normalise(_cm("c", {"k": "v"}))
    assert out["metadata"] == {
        "name": "c",
        "namespace": "ns",
        "ownerReferences": [{"kind": "Pool", "name": "p"}],
        "annotations": {"a": "b"},
    }
    assert out["status"] == {"conditions": [{"type": "Ready"}]}
    assert out["data"] == {"k": "v"}
    extra = Normalizer(also_drop=("data.k",), status=False)(_cm("c", {"k": "v", "j": "w"}))
    assert extra["data"] == {"j": "w"}
    assert "status" not in extra


def _state(**objects: dict[str, Any]) -> State:
    return State({("configmaps", "", name): normalise(obj) for name, obj in objects.items()})


def test_compare_states_reports_missing_extra_and_changed_fields() -> None:
    ref = _state(a=_cm("a", {"k": "1"}), b=_cm("b", {}))
    bad = _state(a=_cm("a", {"k": "2"}, rv="9", uid="other"), c=_cm("c", {}))
    diffs = compare_states(ref, bad)
    assert [(d.key[2], d.kind, d.path) for d in diffs] == [
        ("a", "field", "data.k"),
        ("b", "missing", ""),
        ("c", "extra", ""),
    ]
    assert str(diffs[0]) == "configmaps a: data.k: reference '1', faulty '2'"
    assert compare_states(ref, bad, ignore=["data"])[0].kind == "missing"


def test_identical_runs_have_no_differences() -> None:
    ref = RunRecord(_state(a=_cm("a", {"k": "1"})), {("configmaps", "", "a"): OpCount(1, 0)})
    same = RunRecord(
        _state(a=_cm("a", {"k": "1"}, rv="77", uid="x")), {("configmaps", "", "a"): OpCount(1, 0)}
    )
    assert compare_runs(ref, same) == []
    assert_no_differences([])


def test_recreated_objects_are_caught_even_when_the_end_state_matches() -> None:
    key = ("configmaps", "", "a")
    diffs = compare_operations({key: OpCount(1, 0)}, {key: OpCount(2, 1)})
    assert [(d.kind, d.reference, d.faulty) for d in diffs] == [
        ("creates", 1, 2),
        ("deletes", 0, 1),
    ]
    assert str(diffs[0]) == "configmaps a: creates 2 times (reference 1)"
    with pytest.raises(AssertionError, match="2 difference") as err:
        assert_no_differences(diffs)
    assert "deletes 1 times (reference 0)" in str(err.value)


def test_learned_mask_ignores_fields_that_differ_without_faults() -> None:
    one = _state(a={**_cm("a", {"k": "1"}), "spec": {"token": "x", "list": [1, 2]}})
    two = _state(a={**_cm("a", {"k": "1"}), "spec": {"token": "y", "list": [1, 3]}})
    mask = nondeterministic_paths(one, two)
    assert mask == {("spec", "token"), ("spec", "list", "*")}
    bad = _state(a={**_cm("a", {"k": "2"}), "spec": {"token": "z", "list": [1, 4]}})
    assert [d.path for d in compare_states(one, bad, ignore=mask)] == ["data.k"]


def _write(seq: int, verb: str, name: str, status: int = 201) -> LogEntry:
    return LogEntry(
        seq=seq,
        client="op",
        user="op",
        user_agent="",
        method="",
        path="",
        query="",
        verb=verb,
        resource="configmaps",
        subresource=None,
        namespace="ns",
        name=name,
        started=0.0,
        started_wall=0.0,
        status=status,
        resource_version=str(seq + 10),
    )


def test_operations_from_the_proxy_log_count_accepted_creates_and_deletes() -> None:
    log = FaultLog()
    for e in (
        _write(0, "create", "a"),
        _write(1, "delete", "a", 200),
        _write(2, "create", "a"),
        _write(3, "create", "b", 409),  # AlreadyExists: not a create
        _write(4, "update", "b", 200),
    ):
        log._append(e)
    ops = operations_from_log(log, resources=["configmaps"])
    assert ops == {("configmaps", "", "a"): OpCount(2, 1)}
    assert operations_from_log(log, resources=["pods"]) == {}
    by_ns = operations_from_log(log, by_namespace=True)
    assert list(by_ns) == [("configmaps", "ns", "a")]


def test_subset_mismatches_name_the_field() -> None:
    actual = {"spec": {"n": 3, "items": [{"a": 1}, {"a": 2}]}, "status": {"ready": 2}}
    assert subset_mismatches(actual, {"spec": {"n": 3}, "status": {"ready": 2}}) == []
    assert subset_mismatches(actual, {"spec": {"items": [{"a": 1}, {"a": 2}]}}) == []
    assert subset_mismatches(actual, {"status": {"ready": 3}}) == [
        "status.ready: expected 3, got 2"
    ]
    assert subset_mismatches(actual, {"status": {"gone": 1}}) == [
        "status.gone: missing (expected 1)"
    ]
    assert subset_mismatches(actual, {"spec": {"items": [{"a": 1}]}}) == [
        "spec.items: expected [{'a': 1}], got [{'a': 1}, {'a': 2}]"
    ]


async def test_eventually_stable_waits_for_the_match_and_the_window() -> None:
    answers = iter([["a: 1 != 2"], ["a: 1 != 2"], [], [], [], [], [], [], [], []])
    result = await eventually_stable(
        lambda: next(answers), within=5, stable_for=0.05, interval=0.02
    )
    assert result.stable_checks >= 2
    assert result.checks >= 4


async def test_eventually_stable_fails_with_what_still_differs() -> None:
    with pytest.raises(NotStable, match="not reached within") as err:
        await eventually_stable(
            lambda: ["pool a: status.ready: expected 3, got 2"],
            within=0.1,
            stable_for=1,
            interval=0.02,
        )
    assert err.value.mismatches == ["pool a: status.ready: expected 3, got 2"]
    assert not err.value.broke


async def test_eventually_stable_fails_when_a_match_breaks() -> None:
    answers = iter([True, True, False])

    async def check() -> bool:
        await asyncio.sleep(0)
        return next(answers)

    with pytest.raises(NotStable, match="then stopped holding") as err:
        await eventually_stable(check, within=5, stable_for=10, interval=0.01)
    assert err.value.broke
    assert err.value.mismatches == ["the check returned False"]


def test_difference_strings_for_missing_and_extra() -> None:
    assert str(Difference(("pods", "ns", "p"), "missing")) == (
        "pods ns/p: missing after the faulty run (present in the reference)"
    )
    assert (
        str(Difference(("pods", "", "p"), "extra")) == "pods p: present after the faulty run only"
    )


def test_recorder_invariants_see_every_transition() -> None:
    from typing import cast

    from kubeloop import CONFIGMAPS, Client
    from kubeloop.testing.oracles import WatchRecorder, never_decreases

    rec = WatchRecorder(cast(Client, None), [CONFIGMAPS], namespace="ns")
    rec.add_invariant(never_decreases("status.observedGeneration"))

    def pool(gen: int | None) -> dict[str, Any]:
        status = {} if gen is None else {"observedGeneration": gen}
        return {"metadata": {"name": "p", "namespace": "ns"}, "status": status}

    for kind, gen, rv in [
        ("ADDED", None, "1"),
        ("MODIFIED", 1, "2"),
        ("MODIFIED", 2, "3"),
        ("MODIFIED", 1, "4"),  # the regression
        ("MODIFIED", 3, "5"),
        ("MODIFIED", None, "6"),  # lost altogether
        ("DELETED", None, "7"),
    ]:
        rec._apply(CONFIGMAPS, kind, pool(gen), rv)
    assert [str(v) for v in rec.violations] == [
        "configmaps p at resourceVersion 4: status.observedGeneration went from 2 to 1",
        "configmaps p at resourceVersion 6: status.observedGeneration was 3 and is gone",
    ]
    assert rec.operations[("configmaps", "", "p")].creates == 1
    with pytest.raises(AssertionError, match="2 invariant violation"):
        rec.assert_no_violations()
