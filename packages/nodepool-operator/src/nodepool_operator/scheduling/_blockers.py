"""What keeps a node from being removed: the pods (and node annotations) that block it.

A pure function of typed records, for every path that removes a node. Two kinds of blocker:

* **holds**, asked for explicitly, that apply to every removal the operator starts itself:
  a pod annotated ``kubeloop.dev/do-not-disrupt: "true"`` or ``karpenter.sh/do-not-disrupt:
  "true"``, or ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``; a Node annotated
  with either do-not-disrupt key (or cluster-autoscaler's ``scale-down-disabled: "true"``);
* **default blockers**, cluster-autoscaler's, that apply to *voluntary* removals (scale-down:
  nobody asked for this node to go, so a pod that would be lost or could not come back
  elsewhere keeps it): a pod no controller owns (nothing would recreate it), a pod with local
  storage (``emptyDir`` on disk, ``hostPath``: its data dies with the node), a kube-system pod
  no PodDisruptionBudget covers. Each is switchable per pool (:class:`DefaultBlockers`), and a
  pod annotated ``safe-to-evict: "true"`` lifts them all, as in cluster-autoscaler.

DaemonSet and mirror pods never block: they are not evicted either, they go with the node
(:func:`~._views.is_workload`). Terminating pods are already leaving and do not block.

The reasons carry cluster-autoscaler's names (``NotReplicated``, ``LocalStorageRequested``,
``UnmovableKubeSystemPod``, ``NotSafeToEvictAnnotation``), so its operators read them as usual.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from ._pods import PodRef, get_mapping, get_text, label_selector
from ._views import SAFE_TO_EVICT, LabelSelector, PodView

__all__ = [
    "KUBE_SYSTEM",
    "DefaultBlockers",
    "PdbView",
    "Unremovable",
    "UnremovableReason",
    "held_by_budgets",
    "needs_budgets",
    "node_blocker",
    "pdb_view",
    "pod_blocker",
]

KUBE_SYSTEM: Final = "kube-system"


class UnremovableReason(StrEnum):
    NODE_ANNOTATED = "NodeDoNotDisrupt"
    """The Node itself is annotated do-not-disrupt (or scale-down-disabled)."""
    DO_NOT_DISRUPT = "DoNotDisruptAnnotation"
    """A pod is annotated do-not-disrupt ``"true"`` (kubeloop's or Karpenter's)."""
    NOT_SAFE_TO_EVICT = "NotSafeToEvictAnnotation"
    """A pod is annotated ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``."""
    NOT_REPLICATED = "NotReplicated"
    """A pod no controller owns: evicted, it would be gone for good."""
    LOCAL_STORAGE = "LocalStorageRequested"
    """A pod keeps data on the node (``emptyDir`` not in memory, ``hostPath``)."""
    UNMOVABLE_KUBE_SYSTEM = "UnmovableKubeSystemPod"
    """A kube-system pod no PodDisruptionBudget covers."""


@dataclass(frozen=True, slots=True)
class DefaultBlockers:
    """Which default blockers a pool applies to voluntary removals (all on by default, as
    cluster-autoscaler's ``--skip-nodes-with-local-storage`` / ``--skip-nodes-with-system-pods``
    and its always-on "no controller" rule)."""

    pods_without_controller: bool = True
    pods_with_local_storage: bool = True
    kube_system_pods_without_pdb: bool = True


@dataclass(frozen=True, slots=True)
class PdbView:
    """A PodDisruptionBudget as the blockers read it: which pods it covers, and how many of
    them may be evicted now."""

    namespace: str
    selector: LabelSelector | None
    """``None`` (no selector) covers no pod; an empty selector covers its whole namespace."""
    disruptions_allowed: int = 0
    """``status.disruptionsAllowed``, as the disruption controller last computed it for this
    generation of the budget (0 until it has: the Eviction API refuses until then)."""

    def covers(self, pod: PodView) -> bool:
        return (
            self.selector is not None
            and pod.ref.namespace == self.namespace
            and self.selector.matches(pod.labels)
        )


def pdb_view(pdb: Mapping[str, object]) -> PdbView:
    """Read a PodDisruptionBudget (an API object) into a :class:`PdbView`."""
    meta = get_mapping(pdb, "metadata")
    spec = get_mapping(pdb, "spec")
    status = get_mapping(pdb, "status")
    allowed = status.get("disruptionsAllowed")
    seen = status.get("observedGeneration")
    current = (
        isinstance(allowed, int) and isinstance(seen, int) and seen >= _int(meta.get("generation"))
    )
    return PdbView(
        get_text(meta, "namespace"),
        label_selector(spec.get("selector")),
        max(0, int(allowed)) if current and isinstance(allowed, int) else 0,
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def held_by_budgets(pods: Iterable[PodView], budgets: Sequence[PdbView]) -> bool:
    """Whether a PodDisruptionBudget refuses to evict one of ``pods`` (a node's) now: it
    covers more of them than it allows disruptions, or one is covered by two budgets (the
    Eviction API refuses such a pod outright). Pods not evicted (DaemonSet, mirror) or already
    terminating do not count. A scale-down takes the nodes that can be drained now before
    the ones that would wait on a budget."""
    moving = [p for p in pods if p.workload and not p.terminating]
    covered: dict[int, int] = {}
    for pod in moving:
        mine = [i for i, b in enumerate(budgets) if b.covers(pod)]
        if len(mine) > 1:
            return True
        for i in mine:
            covered[i] = covered.get(i, 0) + 1
    return any(n > budgets[i].disruptions_allowed for i, n in covered.items())


@dataclass(frozen=True, slots=True)
class Unremovable:
    """An unremovable node and why: the reason, the pod (``None`` for the Node's own
    annotation)."""

    node: str
    reason: UnremovableReason
    pod: PodRef | None
    detail: str
    """E.g. ``is annotated karpenter.sh/do-not-disrupt`` or ``has no controller``."""

    @property
    def note(self) -> str:
        """One line for an Event or a log, e.g. ``node n1: pod default/web is annotated
        kubeloop.dev/do-not-disrupt``."""
        if self.pod is None:
            return f"node {self.node} {self.detail}"
        return f"node {self.node}: pod {self.pod} {self.detail}"


def needs_budgets(pods: Iterable[PodView], switches: DefaultBlockers) -> bool:
    """Whether judging ``pods`` needs kube-system's PodDisruptionBudgets: only then are they
    read, so a pool without kube-system pods costs no request."""
    return switches.kube_system_pods_without_pdb and any(
        p.workload and p.ref.namespace == KUBE_SYSTEM and not p.safe_to_evict for p in pods
    )


def pod_blocker(
    pod: PodView,
    *,
    voluntary: bool,
    switches: DefaultBlockers = DefaultBlockers(),
    budgets: Sequence[PdbView] = (),
) -> tuple[UnremovableReason, str] | None:
    """Why ``pod`` keeps its node, with a detail; ``None`` if it may be evicted.

    ``voluntary``: the removal is one nobody asked for (scale-down), so the default blockers
    apply too. ``budgets``: the PodDisruptionBudgets of the pod's namespace (only kube-system's
    are read).
    """
    if not pod.workload or pod.terminating:
        return None
    if pod.hold == SAFE_TO_EVICT:
        return UnremovableReason.NOT_SAFE_TO_EVICT, f'is annotated {pod.hold}: "false"'
    if pod.hold:
        return UnremovableReason.DO_NOT_DISRUPT, f'is annotated {pod.hold}: "true"'
    if not voluntary or pod.safe_to_evict:
        return None
    if switches.pods_without_controller and not pod.controlled:
        return (
            UnremovableReason.NOT_REPLICATED,
            "has no controller: evicted, it would not come back",
        )
    if switches.pods_with_local_storage and pod.local_storage:
        volumes = ", ".join(pod.local_storage)
        return UnremovableReason.LOCAL_STORAGE, f"has local storage (volume {volumes})"
    if (
        switches.kube_system_pods_without_pdb
        and pod.ref.namespace == KUBE_SYSTEM
        and not any(b.covers(pod) for b in budgets)
    ):
        return (
            UnremovableReason.UNMOVABLE_KUBE_SYSTEM,
            "is in kube-system with no PodDisruptionBudget",
        )
    return None


def node_blocker(
    node: str,
    pods: Iterable[PodView],
    *,
    hold: str = "",
    voluntary: bool,
    switches: DefaultBlockers = DefaultBlockers(),
    budgets: Sequence[PdbView] = (),
) -> Unremovable | None:
    """What keeps ``node`` (its own ``hold`` annotation, then its pods by name), or ``None``.

    One blocker is reported per node, the same one on every look (the Node's annotation, else
    the first blocking pod by namespace and name), so Events and status stay stable.
    """
    if hold:
        detail = f'is annotated {hold}: "true"'
        return Unremovable(node, UnremovableReason.NODE_ANNOTATED, None, detail)
    for pod in sorted(pods, key=lambda p: p.ref):
        found = pod_blocker(pod, voluntary=voluntary, switches=switches, budgets=budgets)
        if found is not None:
            return Unremovable(node, found[0], pod.ref, found[1])
    return None
