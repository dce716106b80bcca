"""DaemonSet overhead: what the DaemonSets that would run on a pool's nodes take from each.

A "96 GB" node that runs a logging agent and a CNI pod does not offer 96 GB to pods, and a pod
that fits the VM but not the VM minus its DaemonSets must not make the pool grow: the new node
would not take it either (cluster-autoscaler and Karpenter both subtract this overhead from the
node template).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ._fit import check_constraints
from ._pods import get_mapping, get_text, pod_view
from ._quantity import Resources
from ._template import Taint
from ._views import PodView

__all__ = ["DaemonSetView", "daemonset_overhead", "daemonset_view"]


@dataclass(frozen=True, slots=True)
class DaemonSetView:
    """A DaemonSet as the overhead sees it: its uid and the pod it runs on every node."""

    uid: str
    name: str
    pod: PodView


def daemonset_view(daemonset: Mapping[str, object]) -> DaemonSetView:
    """Read a DaemonSet (an API object); its pod is ``spec.template``.

    Raises:
        ValueError: a malformed quantity in its pod template, naming the DaemonSet.
    """
    meta = get_mapping(daemonset, "metadata")
    name = f"{get_text(meta, 'namespace')}/{get_text(meta, 'name')}"
    template = get_mapping(get_mapping(daemonset, "spec"), "template")
    try:
        pod = pod_view(template)
    except ValueError as exc:
        raise ValueError(f"daemonset {name}: {exc}") from exc
    return DaemonSetView(get_text(meta, "uid"), name, pod)


def daemonset_overhead(
    daemonsets: Iterable[DaemonSetView],
    labels: Mapping[str, str],
    taints: Iterable[Taint],
    *,
    present: Collection[str] = (),
) -> Resources:
    """The requests of the DaemonSets whose pods would land on a node with ``labels`` and
    ``taints`` (their node selector, node affinity and tolerations allow it), one pod each.

    ``present`` names DaemonSets (by uid) that already have a pod on the node: those pods are
    counted among the node's pods already, so they are left out here. A booting node whose
    DaemonSet pods are not there yet is charged for them all.
    """
    node_taints = tuple(taints)
    total = Resources()
    for daemonset in daemonsets:
        if daemonset.uid in present:
            continue
        if check_constraints(daemonset.pod, labels, node_taints):
            total += daemonset.pod.requests
    return total
