from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from kubeloop._conditions import (
    Condition,
    condition,
    format_time,
    get_condition,
    is_false,
    is_true,
    needs_reconcile,
    observed_generation_current,
    remove_condition,
    set_condition,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


class TestFormatTime:
    def test_seconds_precision_utc(self) -> None:
        assert format_time(T0) == "2024-05-01T12:00:00Z"

    def test_converts_offsets_to_utc(self) -> None:
        cest = timezone(timedelta(hours=2))
        assert format_time(datetime(2024, 5, 1, 14, 0, 0, tzinfo=cest)) == "2024-05-01T12:00:00Z"

    def test_rejects_naive(self) -> None:
        with pytest.raises(ValueError, match="naive"):
            format_time(datetime(2024, 5, 1))


class TestSetCondition:
    def test_adds_new_condition(self) -> None:
        conds: list[Condition] = []
        assert set_condition(conds, "Ready", "False", "Provisioning", "creating VMs", 3, T0)
        assert conds == [
            {
                "type": "Ready",
                "status": "False",
                "observedGeneration": 3,
                "lastTransitionTime": "2024-05-01T12:00:00Z",
                "reason": "Provisioning",
                "message": "creating VMs",
            }
        ]

    def test_same_values_report_no_change(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Provisioned", "ok", 1, T0)
        assert not set_condition(conds, "Ready", "True", "Provisioned", "ok", 1, T1)
        assert conds[0]["lastTransitionTime"] == "2024-05-01T12:00:00Z"

    def test_transition_time_stable_across_reason_message_generation(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "False", "Provisioning", "1 of 3", 1, T0)
        assert set_condition(conds, "Ready", "False", "Registering", "2 of 3", 2, T1)
        cond = conds[0]
        assert cond["reason"] == "Registering"
        assert cond["message"] == "2 of 3"
        assert cond["observedGeneration"] == 2
        assert cond["lastTransitionTime"] == "2024-05-01T12:00:00Z"

    def test_transition_time_moves_on_status_flip(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "False", "Provisioning", "", now=T0)
        assert set_condition(conds, "Ready", "True", "Provisioning", "", now=T1)
        assert conds[0]["status"] == "True"
        assert conds[0]["lastTransitionTime"] == "2024-05-01T12:05:00Z"

    def test_none_generation_removes_stored_one(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Done", "", 4, T0)
        assert set_condition(conds, "Ready", "True", "Done", "", None, T1)
        assert "observedGeneration" not in conds[0]
        assert not set_condition(conds, "Ready", "True", "Done", "", None, T1)

    def test_leaves_other_conditions_alone(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Done", now=T0)
        set_condition(conds, "example.com/Degraded", "False", "Healthy", now=T0)
        set_condition(conds, "Ready", "False", "Broken", now=T1)
        assert [c["type"] for c in conds] == ["Ready", "example.com/Degraded"]
        assert conds[1]["lastTransitionTime"] == "2024-05-01T12:00:00Z"

    def test_fills_missing_transition_time(self) -> None:
        conds: list[Condition] = [{"type": "Ready", "status": "True", "reason": "X", "message": ""}]
        assert set_condition(conds, "Ready", "True", "X", now=T0)
        assert conds[0]["lastTransitionTime"] == "2024-05-01T12:00:00Z"

    def test_default_now_is_current_time(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Done")
        stamp = datetime.strptime(conds[0]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
        assert abs(stamp.replace(tzinfo=UTC) - datetime.now(UTC)) < timedelta(minutes=1)


class TestValidation:
    @pytest.mark.parametrize(
        "reason", ["", "1Starts", "has space", "Ends,", "Ends:", "dash-ed", "x" * 1025]
    )
    def test_bad_reason(self, reason: str) -> None:
        with pytest.raises(ValueError, match="invalid reason"):
            set_condition([], "Ready", "True", reason)

    @pytest.mark.parametrize("reason", ["A", "Provisioned", "Wait_For:Node,Pool", "x9_"])
    def test_good_reason(self, reason: str) -> None:
        assert condition("Ready", "True", reason)["reason"] == reason

    @pytest.mark.parametrize("type_", ["", "-Ready", "Ready-", "Bad/Type", "a b", "x" * 317])
    def test_bad_type(self, type_: str) -> None:
        with pytest.raises(ValueError, match="invalid condition type"):
            condition(type_, "True", "Ok")

    @pytest.mark.parametrize("type_", ["Ready", "example.com/Ready", "Scaling.In_Progress"])
    def test_good_type(self, type_: str) -> None:
        assert condition(type_, "True", "Ok")["type"] == type_

    def test_bad_status(self) -> None:
        with pytest.raises(ValueError, match="want 'True', 'False' or 'Unknown'"):
            set_condition([], "Ready", "true", "Ok")  # type: ignore[arg-type]

    def test_bad_generation(self) -> None:
        with pytest.raises(ValueError, match="observedGeneration"):
            condition("Ready", "True", "Ok", observed_generation=-1)

    def test_invalid_call_leaves_list_untouched(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Ok", now=T0)
        before = [dict(c) for c in conds]
        with pytest.raises(ValueError, match="invalid reason"):
            set_condition(conds, "Ready", "False", "not valid", now=T1)
        assert conds == before


class TestLookups:
    def test_get_remove_is_true_is_false(self) -> None:
        conds: list[Condition] = []
        set_condition(conds, "Ready", "True", "Ok", now=T0)
        set_condition(conds, "Degraded", "False", "Ok", now=T0)
        assert get_condition(conds, "Ready") is conds[0]
        assert get_condition(conds, "Missing") is None
        assert get_condition(None, "Ready") is None
        assert is_true(conds, "Ready")
        assert not is_true(conds, "Degraded")
        assert is_false(conds, "Degraded")
        assert not is_true(conds, "Missing")
        assert not is_false(conds, "Missing")
        assert remove_condition(conds, "Ready")
        assert not remove_condition(conds, "Ready")
        assert [c["type"] for c in conds] == ["Degraded"]


def cr(generation: int | None, observed: int | None, **meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "pool", **meta}, "status": {}}
    if generation is not None:
        out["metadata"]["generation"] = generation
    if observed is not None:
        out["status"]["observedGeneration"] = observed
    return out


class TestGenerations:
    def test_current(self) -> None:
        assert observed_generation_current(cr(3, 3))
        assert not needs_reconcile(cr(3, 3))

    def test_behind(self) -> None:
        assert not observed_generation_current(cr(4, 3))
        assert needs_reconcile(cr(4, 3))

    def test_missing_status_or_generation_means_not_current(self) -> None:
        assert not observed_generation_current(cr(1, None))
        assert not observed_generation_current({"metadata": {"generation": 1}})
        assert not observed_generation_current(cr(None, None))
        assert needs_reconcile({"metadata": {"generation": 1}})

    def test_deletion_needs_reconcile(self) -> None:
        assert needs_reconcile(cr(3, 3, deletionTimestamp="2024-05-01T12:00:00Z"))
