"""``nodepool-operator demo``: the operator end to end on a local control plane.

It starts a local cluster (etcd, kube-apiserver, kube-scheduler, kube-controller-manager and
kwok; or uses ``--kubeconfig``), runs the operator in-process with the simulated cloud and its
VMs' kubelets, applies a NodePool of 96 GiB nodes and an Autoscaler for ``prod`` and
``money-maker``, creates a burst of pods (see :mod:`._workload`), and watches until every pod
that fits is scheduled and running. A second act (:mod:`._scaledown`) then deletes part of the
workload under a PodDisruptionBudget and watches the pool drain and shrink. It shows a live
terminal view, prints a summary or one JSON line, and with ``--report DIR`` writes
``summary.md`` and ``chart.png``.

Modules: ``_workload`` (what is applied), ``_clusterview`` (the demo's watches), ``_sample``
(one look at the world), ``_apiactivity`` (the operator's writes, from its metrics),
``_figures`` (the result in numbers), ``_timeline``, ``_liveview``, ``_report``, ``_chart``
(matplotlib), ``_scaledown`` (the second act), ``_options`` (the flags) and ``_driver`` (the
script; it and ``_clouds`` are the only modules that need the demo extra besides ``_chart``).
"""

from typing import TYPE_CHECKING, Any

from nodepool_operator.demo._apiactivity import ApiActivity, api_activity
from nodepool_operator.demo._figures import MEANINGS, Figures
from nodepool_operator.demo._options import DemoError, DemoInterrupted, DemoOptions
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._workload import DEFAULT_PODS, Workload

if TYPE_CHECKING:
    from nodepool_operator.demo._driver import run_demo

__all__ = [
    "DEFAULT_PODS",
    "MEANINGS",
    "ApiActivity",
    "DemoError",
    "DemoInterrupted",
    "DemoOptions",
    "DemoResult",
    "Figures",
    "Workload",
    "api_activity",
    "run_demo",
]


def __getattr__(name: str) -> Any:
    """``run_demo`` is imported on first use: it needs the demo extra (kubeloop's envtest for
    the local control plane, matplotlib for the chart), while the command line needs the
    options above even where the extra is not installed (``nodepool-operator --help``)."""
    if name == "run_demo":
        from nodepool_operator.demo._driver import run_demo

        return run_demo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
