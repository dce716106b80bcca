"""The Autoscaler's Events: each scale write, and each distinct reason pods did not trigger one.

Reasons are reported when they appear, not on every look. The recorder would aggregate the
repeats into one Event's ``series``, but that is still a PATCH per Event every 30 s, and with
one Event per pending pod a pool at its limit would keep the apiserver busy for nothing.
What was reported is remembered per Autoscaler, in memory: after a restart each current
reason is reported once more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from kubeloop import Object
from nodepool_operator.controllers._decision import NotTriggered
from nodepool_operator.controllers._scale import ScaleOutcome
from nodepool_operator.scheduling import PodRef

__all__ = ["NOT_TRIGGER_SCALE_UP", "SCALE_DOWN", "TRIGGERED_SCALE_UP", "Reporter"]

# Event reasons, cluster-autoscaler's names.
TRIGGERED_SCALE_UP: Final = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP: Final = "NotTriggerScaleUp"
SCALE_DOWN: Final = "ScaleDown"


class Recorder(Protocol):
    """What the Reporter needs of :class:`kubeloop.EventRecorder`."""

    def normal(
        self, obj: Object, reason: str, note: str, *, action: str = "", aggregate_by: str = ""
    ) -> None: ...


@dataclass
class _Reported:
    notes: frozenset[str] = frozenset()
    pod_notes: dict[str, str] = field(default_factory=dict)


class Reporter:
    """Events about Autoscalers, their pools and their pods."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._reported: dict[str, _Reported] = {}

    def scaled(self, scaler: Object, pool: Object, outcome: ScaleOutcome, summary: str) -> None:
        """A write to the pool's target and what it was for, on the Autoscaler and the pool."""
        if not outcome.written:
            return
        up = outcome.after > outcome.before
        reason, action = (TRIGGERED_SCALE_UP, "ScaleUp") if up else (SCALE_DOWN, "ScaleDown")
        note = f"NodePool {pool['metadata']['name']}: {summary}"
        for obj in (scaler, pool):  # each write its own Event, not a series of the first
            self._recorder.normal(obj, reason, note, action=action, aggregate_by=note)

    def not_triggered(
        self, scaler: Object, groups: Iterable[NotTriggered], pods: Mapping[PodRef, Object]
    ) -> None:
        """NotTriggerScaleUp: one Event per group on the Autoscaler, one on each pod; only
        those not reported at the last look."""
        seen = self._reported.setdefault(scaler["metadata"]["name"], _Reported())
        notes: set[str] = set()
        pod_notes: dict[str, str] = {}
        for group in groups:
            notes.add(group.note)
            if group.note not in seen.notes:
                # each distinct reason is its own Event (the recorder would otherwise
                # fold notes with the same Event reason into one series)
                self._recorder.normal(
                    scaler,
                    NOT_TRIGGER_SCALE_UP,
                    group.note,
                    action="ScaleUp",
                    aggregate_by=group.note,
                )
            for ref in group.pods:
                pod = pods.get(ref)
                if pod is None:
                    continue
                key = pod["metadata"].get("uid") or str(ref)
                pod_notes[key] = group.pod_note
                if seen.pod_notes.get(key) != group.pod_note:
                    self._recorder.normal(
                        pod,
                        NOT_TRIGGER_SCALE_UP,
                        group.pod_note,
                        action="ScaleUp",
                        aggregate_by=group.pod_note,
                    )
        # Only what is current is kept: memory follows the pending pods, and a reason that
        # went away and came back is reported again.
        seen.notes, seen.pod_notes = frozenset(notes), pod_notes

    def forget(self, scaler: str) -> None:
        self._reported.pop(scaler, None)
