"""``nodepool-operator demo``'s options and errors: what the command line needs before (and
without) the runner, which needs the demo extra."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nodepool_operator.demo._workload import DEFAULT_PODS


@dataclass(frozen=True)
class DemoOptions:
    """``nodepool-operator demo``'s flags."""

    #: Use this cluster instead of starting a local control plane.
    kubeconfig: Path | None = None
    #: Pods in the burst, four of which must not cause a scale-up.
    pods: int = DEFAULT_PODS
    #: Seconds a simulated VM takes to boot.
    boot_seconds: float = 3.0
    #: Write summary.md and chart.png (and keep the cloud file and operator log) here.
    report: Path | None = None
    #: Leave the control plane and operator running until Ctrl-C.
    keep: bool = False
    #: No live view; progress lines on stderr instead.
    headless: bool = False
    #: End with one JSON line of figures on stdout instead of the summary.
    json: bool = False
    #: Seconds to wait for every fitting pod to be scheduled.
    timeout: float = 300.0
    #: ``simulated``, or ``aws``: AwsCloud against a moto server the demo starts on loopback.
    cloud: Literal["simulated", "aws"] = "simulated"
    #: kube-scheduler's ``NodeResourcesFit`` scoring in the demo's own control plane
    #: (``LeastAllocated``, its default, or the bin-packing ``MostAllocated``); a cluster given
    #: with ``kubeconfig`` keeps its own scheduler, so any other value is refused there.
    scheduler_scoring: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"


class DemoError(Exception):
    """The demo could not run (as opposed to: it ran and the operator misbehaved)."""


class DemoInterrupted(Exception):
    """Ctrl-C or SIGTERM before the demo finished."""
