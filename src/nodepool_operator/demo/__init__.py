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
(matplotlib), ``_scaledown`` (the second act) and ``_driver`` (the script).
"""

from nodepool_operator.demo._driver import DemoError, DemoInterrupted, DemoOptions, run_demo
from nodepool_operator.demo._figures import MEANINGS, Figures
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._workload import DEFAULT_PODS, Workload

__all__ = [
    "DEFAULT_PODS",
    "MEANINGS",
    "DemoError",
    "DemoInterrupted",
    "DemoOptions",
    "DemoResult",
    "Figures",
    "Workload",
    "run_demo",
]
