"""Autoscaler Events: each scale write once, each distinct not-triggered reason once."""

from __future__ import annotations

from nodepool_operator.controllers.autoscaler._report import (
    Note,
    Reported,
    Subject,
    not_triggered,
    scaled,
)
from nodepool_operator.controllers.autoscaler._texts import NotTriggered
from nodepool_operator.scheduling import PodRef

KEYS = {PodRef("prod", n): f"uid-{n}" for n in ("a", "b", "c")}


def too_big(*names: str) -> NotTriggered:
    return NotTriggered("TooBig", "memory 120Gi > 96Gi", tuple(PodRef("prod", n) for n in names))


def who(notes: tuple[Note, ...]) -> list[tuple[Subject, str]]:
    return [(n.subject, n.key) for n in notes]


def test_scale_writes_are_reported_on_the_autoscaler_and_the_pool() -> None:
    up = scaled("big", up=True, summary="scale up 0 -> 3: 7 pods need 3 new nodes")
    down = scaled("big", up=False, summary="scale down 3 -> 1: empty nodes unneeded")
    assert [(n.subject, n.reason, n.note, n.action) for n in (*up, *down)] == [
        (s, "TriggeredScaleUp", "NodePool big: scale up 0 -> 3: 7 pods need 3 new nodes", "ScaleUp")
        for s in (Subject.AUTOSCALER, Subject.NODEPOOL)
    ] + [
        (s, "ScaleDown", "NodePool big: scale down 3 -> 1: empty nodes unneeded", "ScaleDown")
        for s in (Subject.AUTOSCALER, Subject.NODEPOOL)
    ]
    assert all(n.aggregate_by == n.note for n in (*up, *down))


def test_a_reason_is_reported_when_it_appears_not_on_every_look() -> None:
    notes, seen = not_triggered(Reported(), [too_big("a")], KEYS)
    assert [(n.subject, n.reason) for n in notes] == [
        (Subject.AUTOSCALER, "NotTriggerScaleUp"),
        (Subject.POD, "NotTriggerScaleUp"),
    ]
    assert notes[1].key == "uid-a"
    assert notes[1].note == "pod didn't trigger scale-up: TooBig: memory 120Gi > 96Gi"
    notes, seen = not_triggered(seen, [too_big("a")], KEYS)
    assert notes == ()
    # a second pod: the group's note changes (it names the pods), the first pod's does not
    notes, seen = not_triggered(seen, [too_big("a", "b")], KEYS)
    assert who(notes) == [(Subject.AUTOSCALER, ""), (Subject.POD, "uid-b")]


def test_a_reason_that_went_away_and_came_back_is_reported_again() -> None:
    _, seen = not_triggered(Reported(), [too_big("a")], KEYS)
    _, seen = not_triggered(seen, [], KEYS)
    notes, seen = not_triggered(seen, [too_big("a")], KEYS)
    assert len(notes) == 2
    # a restart forgets what was reported: each current reason once more
    notes, _ = not_triggered(Reported(), [too_big("a")], KEYS)
    assert len(notes) == 2


def test_pods_not_among_the_candidates_get_no_event() -> None:
    notes, seen = not_triggered(Reported(), [too_big("a", "z")], KEYS)
    assert who(notes) == [(Subject.AUTOSCALER, ""), (Subject.POD, "uid-a")]
    assert dict(seen.pod_notes) == {"uid-a": too_big("a").pod_note}
