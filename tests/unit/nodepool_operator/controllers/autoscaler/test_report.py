"""Autoscaler Events: each scale write once, each distinct not-triggered reason once."""

from __future__ import annotations

from typing import Any

from nodepool_operator.controllers._decision import NotTriggered
from nodepool_operator.controllers._report import Reporter
from nodepool_operator.controllers._scale import ScaleOutcome
from nodepool_operator.scheduling import PodRef


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def normal(
        self,
        obj: dict[str, Any],
        reason: str,
        note: str,
        *,
        action: str = "",
        aggregate_by: str = "",
    ) -> None:
        self.events.append((obj["metadata"]["name"], reason, note))


SCALER = {"metadata": {"name": "as"}}
POOL = {"metadata": {"name": "big"}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}"}}


PODS = {PodRef("prod", n): pod(n) for n in ("a", "b", "c")}


def too_big(*names: str) -> NotTriggered:
    return NotTriggered("TooBig", "memory 120Gi > 96Gi", tuple(PodRef("prod", n) for n in names))


def test_scale_writes_are_reported_on_the_autoscaler_and_the_pool() -> None:
    recorder = Recorder()
    report = Reporter(recorder)
    report.scaled(SCALER, POOL, ScaleOutcome(0, 3), "scale up 0 -> 3: 7 pods need 3 new nodes")
    report.scaled(SCALER, POOL, ScaleOutcome(3, 3), "nothing written")
    report.scaled(SCALER, POOL, ScaleOutcome(3, 1), "scale down 3 -> 1: empty nodes unneeded")
    assert recorder.events == [
        ("as", "TriggeredScaleUp", "NodePool big: scale up 0 -> 3: 7 pods need 3 new nodes"),
        ("big", "TriggeredScaleUp", "NodePool big: scale up 0 -> 3: 7 pods need 3 new nodes"),
        ("as", "ScaleDown", "NodePool big: scale down 3 -> 1: empty nodes unneeded"),
        ("big", "ScaleDown", "NodePool big: scale down 3 -> 1: empty nodes unneeded"),
    ]


def test_a_reason_is_reported_when_it_appears_not_on_every_look() -> None:
    recorder = Recorder()
    report = Reporter(recorder)
    report.not_triggered(SCALER, [too_big("a")], PODS)
    assert [(o, r) for o, r, _ in recorder.events] == [
        ("as", "NotTriggerScaleUp"),
        ("a", "NotTriggerScaleUp"),
    ]
    assert recorder.events[1][2] == "pod didn't trigger scale-up: TooBig: memory 120Gi > 96Gi"
    recorder.events.clear()
    report.not_triggered(SCALER, [too_big("a")], PODS)
    assert recorder.events == []
    # a second pod: the group's note changes (it names the pods), the first pod's does not
    report.not_triggered(SCALER, [too_big("a", "b")], PODS)
    assert [o for o, _, _ in recorder.events] == ["as", "b"]


def test_a_reason_that_went_away_and_came_back_is_reported_again() -> None:
    recorder = Recorder()
    report = Reporter(recorder)
    report.not_triggered(SCALER, [too_big("a")], PODS)
    report.not_triggered(SCALER, [], PODS)
    recorder.events.clear()
    report.not_triggered(SCALER, [too_big("a")], PODS)
    assert len(recorder.events) == 2
    report.forget("as")
    recorder.events.clear()
    report.not_triggered(SCALER, [too_big("a")], PODS)
    assert len(recorder.events) == 2
