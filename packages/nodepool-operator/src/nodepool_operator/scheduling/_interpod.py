"""The scheduler's filters that depend on other pods: host ports, pod (anti-)affinity and
topology spread (``DoNotSchedule``), as kube-scheduler's NodePorts, InterPodAffinity and
PodTopologySpread plugins decide them.

The simulation's nodes are :class:`Domain`\\ s: existing nodes with the pods bound to them,
and booting or new template nodes with the pods the plan put there. A topology domain is the
set of nodes sharing a label value; each template node gets a hostname of its own, so
"one per hostname" needs one node per pod, and, for a pool with zones, the zone it is planned
in (:mod:`._zones`; every zone the pool can launch into is a domain, even with no node yet).
Any topology key works the same way: a node without the key is in no domain (anti-affinity
ignores it; affinity and spread refuse it, as the scheduler does).

Only the pool's own nodes are seen: pods on other pools' nodes do not count toward a spread or
an affinity here (the scheduler counts them; a spread across pools may need fewer nodes than
planned, never more).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ._fit import FitReason, FitResult, check_node_affinity
from ._template import Taint
from ._views import HostPort, PodAffinityTerm, PodView, SpreadConstraint

__all__ = ["Domain", "check_interpod"]

_FITS = FitResult()


class Domain(Protocol):
    """A node as the inter-pod filters see it."""

    @property
    def name(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> tuple[Taint, ...]: ...
    @property
    def pods(self) -> list[PodView]: ...
    @property
    def ports(self) -> list[HostPort]: ...


def check_interpod(pod: PodView, node: Domain, nodes: Sequence[Domain]) -> FitResult:
    """Whether ``pod`` may go on ``node`` given the pods on ``nodes`` (``node`` among them).

    Filters run in kube-scheduler's order: NodePorts, InterPodAffinity, PodTopologySpread.
    """
    for port in pod.host_ports:
        if any(port.conflicts(used) for used in node.ports):
            return FitResult(FitReason.HOST_PORT_CONFLICT, f"host port {port.protocol}/{port.port}")
    result = _anti_affinity(pod, node, nodes)
    if result:
        result = _affinity(pod, node, nodes)
    if result:
        result = _spread(pod, node, nodes)
    return result


def _same_domain(key: str, value: str, nodes: Sequence[Domain]) -> list[Domain]:
    return [n for n in nodes if n.labels.get(key) == value]


def _anti_affinity(pod: PodView, node: Domain, nodes: Sequence[Domain]) -> FitResult:
    for term in pod.anti_affinity:
        value = node.labels.get(term.topology_key)
        if value is None:
            continue
        for other in _same_domain(term.topology_key, value, nodes):
            for placed in other.pods:
                if term.selects(placed):
                    return _conflict(term, placed)
    # Symmetry: a pod already there may refuse the newcomer.
    for other in nodes:
        for placed in other.pods:
            for term in placed.anti_affinity:
                value = node.labels.get(term.topology_key)
                if (
                    value is not None
                    and other.labels.get(term.topology_key) == value
                    and term.selects(pod)
                ):
                    return _conflict(term, placed)
    return _FITS


def _conflict(term: PodAffinityTerm, placed: PodView) -> FitResult:
    return FitResult(
        FitReason.POD_ANTI_AFFINITY_CONFLICT, f"{term.topology_key} shared with {placed.ref}"
    )


def _affinity(pod: PodView, node: Domain, nodes: Sequence[Domain]) -> FitResult:
    if not pod.affinity:
        return _FITS
    missing: PodAffinityTerm | None = None
    for term in pod.affinity:
        value = node.labels.get(term.topology_key)
        if value is None:
            return FitResult(FitReason.POD_AFFINITY_MISMATCH, f"node has no {term.topology_key}")
        domain = _same_domain(term.topology_key, value, nodes)
        if missing is None and not any(term.selects(p) for n in domain for p in n.pods):
            missing = term
    if missing is None:
        return _FITS
    # The first of a group of pods affine to each other may go anywhere (the scheduler's rule:
    # no pod matches any term anywhere, and the pod matches all its own terms).
    anywhere = any(t.selects(p) for t in pod.affinity for n in nodes for p in n.pods)
    if not anywhere and all(t.selects(pod) for t in pod.affinity):
        return _FITS
    return FitResult(
        FitReason.POD_AFFINITY_MISMATCH, f"no matching pod in its {missing.topology_key}"
    )


def _spread(pod: PodView, node: Domain, nodes: Sequence[Domain]) -> FitResult:
    for constraint in pod.spread:
        result = _one_spread(pod, constraint, node, nodes)
        if not result:
            return result
    return _FITS


def _one_spread(
    pod: PodView, constraint: SpreadConstraint, node: Domain, nodes: Sequence[Domain]
) -> FitResult:
    key = constraint.topology_key
    value = node.labels.get(key)
    if value is None:
        return FitResult(FitReason.TOPOLOGY_SPREAD_VIOLATION, f"node has no {key}")
    counts: dict[str, int] = {}
    for other in nodes:
        other_value = other.labels.get(key)
        if other_value is None or not _eligible(pod, constraint, other):
            continue
        matching = sum(1 for p in other.pods if constraint.counts(p, pod.ref.namespace))
        counts[other_value] = counts.get(other_value, 0) + matching
    counts.setdefault(value, 0)
    lowest = min(counts.values()) if len(counts) >= constraint.min_domains else 0
    itself = 1 if constraint.counts(pod, pod.ref.namespace) else 0
    skew = counts[value] + itself - lowest
    if skew > constraint.max_skew:
        return FitResult(
            FitReason.TOPOLOGY_SPREAD_VIOLATION, f"{key} skew {skew} > {constraint.max_skew}"
        )
    return _FITS


def _eligible(pod: PodView, constraint: SpreadConstraint, node: Domain) -> bool:
    """Whether ``node`` counts as a domain for ``pod``'s spread (node inclusion policies)."""
    if constraint.honor_node_affinity and not check_node_affinity(pod, node.labels, node.name):
        return False
    if constraint.honor_taints:
        return all(t.effect == "PreferNoSchedule" or pod.tolerates(t) for t in node.taints)
    return True
