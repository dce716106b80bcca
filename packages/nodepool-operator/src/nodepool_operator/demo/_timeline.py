"""The run as a story: what changed between consecutive samples, with the time it was seen."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nodepool_operator.demo._sample import Sample


@dataclass(frozen=True)
class Milestone:
    """Something seen to change ``t`` seconds after the burst.

    ``detail`` marks the Autoscaler's running commentary (its latest decision, its note on
    each pod): the report shows it, the terminal summary leaves it out.
    """

    t: float
    text: str
    detail: bool = False


def milestones(samples: Iterable[Sample]) -> list[Milestone]:
    """Scale decisions, target and readiness changes, and pods bound, in order.

    Changes are seen at the sampling rate, so two quick changes of one field between samples
    show as one.
    """
    found: list[Milestone] = []
    previous: Sample | None = None
    for s in samples:
        before = previous if previous is not None else Sample(t=s.t)
        for note in s.scale_events[len(before.scale_events) :]:
            found.append(Milestone(s.t, f"autoscaler scaled: {note}"))
        if s.last_decision and s.last_decision != before.last_decision:
            found.append(Milestone(s.t, f"autoscaler decided: {s.last_decision}", detail=True))
        if s.target_nodes != before.target_nodes:
            found.append(Milestone(s.t, f"targetNodes {before.target_nodes} -> {s.target_nodes}"))
        if s.scale_operation != before.scale_operation:
            found.append(Milestone(s.t, f"scaleOperation {s.scale_operation}"))
        if s.vms != before.vms:
            found.append(Milestone(s.t, f"VMs {before.vms} -> {s.vms}"))
        if s.ready_nodes != before.ready_nodes:
            found.append(Milestone(s.t, f"ready nodes {before.ready_nodes} -> {s.ready_nodes}"))
        for pod, note in s.not_triggered.items():
            if before.not_triggered.get(pod) != note:
                found.append(Milestone(s.t, f"autoscaler on {pod}: {note}", detail=True))
        for pod in sorted(set(s.extras_bound) - set(before.extras_bound)):
            found.append(Milestone(s.t, f"{pod} bound into spare room (it did not ask for it)"))
        if s.converged and not before.converged:
            found.append(Milestone(s.t, f"all {s.fitting.scheduled} fitting pods scheduled"))
        previous = s
    return found
