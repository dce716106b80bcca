"""The Autoscaler's Events, as data: each scale write, and each distinct reason pods did not
trigger one.

Reasons are reported when they appear, not on every look. The recorder would aggregate the
repeats into one Event's ``series``, but that is still a PATCH per Event every 30 s, and with
one Event per pending pod a pool at its limit would keep the apiserver busy for nothing.
What was reported is remembered per Autoscaler (:class:`Reported`, part of its memory): after a
restart each current reason is reported once more.

Pure: the decision lists :class:`Note` values; :mod:`.act` hands them to the recorder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from nodepool_operator.controllers.autoscaler._texts import NotTriggered
from nodepool_operator.scheduling import PodRef

__all__ = [
    "NOT_TRIGGER_SCALE_UP",
    "SCALE_DOWN",
    "TRIGGERED_SCALE_UP",
    "Note",
    "Reported",
    "Subject",
    "not_triggered",
    "scaled",
]

# Event reasons, cluster-autoscaler's names.
TRIGGERED_SCALE_UP: Final = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP: Final = "NotTriggerScaleUp"
SCALE_DOWN: Final = "ScaleDown"


class Subject(StrEnum):
    """Which object an Event is about."""

    AUTOSCALER = "Autoscaler"
    NODEPOOL = "NodePool"
    NODE = "Node"
    """A Node of the pool, by name (:attr:`Note.key`)."""
    POD = "Pod"
    """A pending pod, by key (uid; :attr:`Note.key`)."""


@dataclass(frozen=True, slots=True)
class Note:
    """One Event to record."""

    subject: Subject
    reason: str
    note: str
    action: str
    warning: bool = False
    aggregate_by: str = ""
    key: str = ""
    """The Node's name or the pod's key, for those subjects."""


@dataclass(frozen=True, slots=True)
class Reported:
    """What the last look reported: the Autoscaler's notes, and each pod's note by key."""

    notes: frozenset[str] = frozenset()
    pod_notes: Mapping[str, str] = field(default_factory=dict)


def scaled(pool: str, *, up: bool, summary: str) -> tuple[Note, ...]:
    """A write to the pool's target and what it was for, on the Autoscaler and the pool."""
    reason, action = (TRIGGERED_SCALE_UP, "ScaleUp") if up else (SCALE_DOWN, "ScaleDown")
    note = f"NodePool {pool}: {summary}"
    # each write its own Event, not a series of the first
    return tuple(
        Note(subject, reason, note, action, aggregate_by=note)
        for subject in (Subject.AUTOSCALER, Subject.NODEPOOL)
    )


def not_triggered(
    reported: Reported, groups: Iterable[NotTriggered], keys: Mapping[PodRef, str]
) -> tuple[tuple[Note, ...], Reported]:
    """NotTriggerScaleUp: one Event per group on the Autoscaler, one on each pod (of ``keys``);
    only those not reported at the last look. Returns them and what is reported now."""
    out: list[Note] = []
    notes: set[str] = set()
    pod_notes: dict[str, str] = {}
    for group in groups:
        notes.add(group.note)
        if group.note not in reported.notes:
            # each distinct reason is its own Event (the recorder would otherwise fold notes
            # with the same Event reason into one series)
            out.append(
                Note(
                    Subject.AUTOSCALER,
                    NOT_TRIGGER_SCALE_UP,
                    group.note,
                    "ScaleUp",
                    aggregate_by=group.note,
                )
            )
        for ref in group.pods:
            key = keys.get(ref)
            if key is None:
                continue
            pod_notes[key] = group.pod_note
            if reported.pod_notes.get(key) != group.pod_note:
                out.append(
                    Note(
                        Subject.POD,
                        NOT_TRIGGER_SCALE_UP,
                        group.pod_note,
                        "ScaleUp",
                        aggregate_by=group.pod_note,
                        key=key,
                    )
                )
    # Only what is current is kept: memory follows the pending pods, and a reason that went
    # away and came back is reported again.
    return tuple(out), Reported(frozenset(notes), pod_notes)
