"""Everything a demo run produced, handed from the driver to the summary, report and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodepool_operator.demo._figures import Figures
from nodepool_operator.demo._sample import Sample
from nodepool_operator.demo._workload import Workload


@dataclass(frozen=True)
class DemoResult:
    """One run: its figures, every sample taken, and where each pod ended up."""

    workload: Workload
    figures: Figures
    samples: tuple[Sample, ...]
    #: ``(namespace, name) -> node name`` ("" while unbound) at the end of the run.
    pod_nodes: dict[tuple[str, str], str]
    #: The cloud's own record at the very end of the run, after the second act: its name and
    #: :meth:`CloudSnapshot.to_json` (VMs by state, calls by method). The report's
    #: ``cloud.json`` is this record and its summary counts calls from it, so the two agree.
    cloud_record: dict[str, Any] = field(default_factory=dict)
    boot_seconds: float = 3.0
    #: kube-scheduler's scoring in the demo's own control plane; None on a given cluster.
    scheduler_scoring: str | None = "LeastAllocated"
    #: Every fitting pod was bound before the timeout.
    converged: bool = True
    timeout: float = 300.0
    #: Seconds after the burst when the second act (scale-down) began; None if it did not.
    scale_down_at: float | None = None
    #: The Autoscaler's ``status.unremovableNodes`` in the second act, one line each.
    unremovable: tuple[str, ...] = ()
    #: The pool's ``spec.disruption`` as the API server held it at the end.
    disruption: dict[str, Any] = field(default_factory=dict)
    #: The pool's ``status.disruption`` at the end, when the operator reports one.
    disruption_status: dict[str, Any] = field(default_factory=dict)

    @property
    def cloud_calls(self) -> dict[str, int]:
        """Cloud API calls by method, as the cloud counted them by the end of the run."""
        return dict(self.cloud_record.get("calls") or {})

    @property
    def ok(self) -> bool:
        """Every fitting pod was bound, and no VM was duplicated or leaked.

        More nodes than the lower bound is reported but not a failure: for bursts other than
        the default, the scheduler's binding order can strand a pod and make a further node
        the right call (see :mod:`._workload`).
        """
        f = self.figures
        return self.converged and f.duplicate_vms == 0 and f.leaked_vms == 0
