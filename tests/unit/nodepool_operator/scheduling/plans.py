"""The planner over pods written as API dicts, as these tests write them (it takes views)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodepool_operator.scheduling import PodView, ScaleUpPlan, plan_scale_up, pod_view


def plan_pods(pods: Iterable[Mapping[str, Any] | PodView], **options: Any) -> ScaleUpPlan:
    """:func:`plan_scale_up` of the pods' views."""
    return plan_scale_up([pod_view(p) for p in pods], **options)
