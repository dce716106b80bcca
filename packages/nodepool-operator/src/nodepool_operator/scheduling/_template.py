"""The node template: what a node of a pool will look like before it exists.

Scale-up decisions are made against a template (cluster-autoscaler's ``TemplateNodeInfo``), so a
pool at zero nodes can still answer "would this pod fit?". The template is built from the pool's
settings alone, never from a live node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ._quantity import QuantityLike, Resources, parse_bytes, parse_cpu

__all__ = ["DEFAULT_MAX_PODS", "NodeShape", "NodeTemplate", "Taint", "node_shape"]

DEFAULT_MAX_PODS = 110
"""kubelet's default ``--max-pods``."""

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint. ``effect`` is ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""

    key: str
    effect: str
    value: str = ""

    def __post_init__(self) -> None:
        if self.effect not in _EFFECTS:
            raise ValueError(f"taint {self.key!r}: effect {self.effect!r} is not one of {_EFFECTS}")

    @classmethod
    def from_api(cls, taint: Mapping[str, object]) -> Taint:
        """Build from an API taint: ``{"key": "gpu", "value": "1", "effect": "NoSchedule"}``."""
        key, effect, value = (taint.get(name) for name in ("key", "effect", "value"))
        return cls(*(v if isinstance(v, str) else "" for v in (key, effect, value)))

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    """An empty node of a pool, as the scheduler would see it.

    Attributes:
        name: how messages call the node type, e.g. ``"mem96.large"``.
        allocatable: what pods may request on an empty node.
        labels: the node's labels.
        taints: the node's taints.
    """

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    daemonset_overhead: Resources = field(default_factory=Resources)
    """What DaemonSet pods take on every node of the pool; already left out of
    ``allocatable``, kept to say why a pod that fits the VM does not fit the node."""

    @classmethod
    def from_shape(
        cls, name: str, shape: NodeShape, *, daemonset_overhead: Resources | None = None
    ) -> NodeTemplate:
        """The template of a pool whose Nodes register as ``shape``, DaemonSets subtracted."""
        overhead = daemonset_overhead or Resources()
        return cls(
            name=name,
            allocatable=shape.allocatable - overhead,
            labels=dict(shape.labels),
            taints=shape.taints,
            daemonset_overhead=overhead,
        )

    @classmethod
    def from_pool(
        cls,
        name: str,
        *,
        cpu: QuantityLike,
        memory: QuantityLike,
        disk: QuantityLike = 0,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint | Mapping[str, object]] = (),
        max_pods: int = DEFAULT_MAX_PODS,
        extended: Mapping[str, QuantityLike] | None = None,
        reserved_fraction: float = 0.0,
        daemonset_overhead: Resources | None = None,
        os: str = "linux",
        arch: str = "amd64",
    ) -> NodeTemplate:
        """Build the template from pool settings: ``cpu=16, memory="96Gi", disk="100Gi"``.

        By default allocatable equals the VM's size: nothing is held back. A real node keeps
        kube-reserved, system-reserved and an eviction threshold (a "96 GB" VM shows perhaps
        89 GiB), so a pod near the VM size may fit the template but not the node. Pass
        ``reserved_fraction`` (e.g. ``0.07``) to hold back that share of cpu, memory and disk, and
        ``daemonset_overhead`` for what DaemonSet pods take on every node.

        ``kubernetes.io/os`` and ``kubernetes.io/arch`` are added because the kubelet sets them on
        every node and many charts select on them; ``labels`` may override them.

        Raises:
            ValueError: on a malformed quantity, a bad taint, or a fraction outside ``[0, 1)``.
        """
        if not 0.0 <= reserved_fraction < 1.0:
            raise ValueError(f"reserved_fraction must be in [0, 1), got {reserved_fraction}")
        if max_pods < 1:
            raise ValueError(f"max_pods must be at least 1, got {max_pods}")
        keep = 1 - Fraction(str(reserved_fraction))  # str(): 0.07 means 7/100, not the float
        capacity = Resources(
            cpu=math.floor(parse_cpu(cpu) * keep),
            memory=math.floor(parse_bytes(memory) * keep),
            ephemeral_storage=math.floor(parse_bytes(disk) * keep),
            pods=max_pods,
            extended=tuple(sorted((k, parse_bytes(v)) for k, v in (extended or {}).items())),
        )
        allocatable = capacity - (daemonset_overhead or Resources())
        node_labels = {"kubernetes.io/os": os, "kubernetes.io/arch": arch, **(labels or {})}
        node_taints = tuple(t if isinstance(t, Taint) else Taint.from_api(t) for t in taints)
        return cls(name=name, allocatable=allocatable, labels=node_labels, taints=node_taints)


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What every Node of a pool registers with, decided from the pool's settings alone.

    The one source of a pool node's labels, taints and allocatable: the Node the VM registers
    and the Autoscaler's :class:`NodeTemplate` are both built from it, so the simulation and
    the scheduler see the same node (a pool whose ``spec.labels`` sets ``kubernetes.io/arch``
    gets that arch on its Nodes *and* in its template).

    Attributes:
        labels: every label but the per-node ``kubernetes.io/hostname``.
        taints: the pool's taints.
        resources: ``status.capacity`` (and ``allocatable``: nothing is reserved) as API
            quantities, e.g. ``{"cpu": "16", "memory": "96Gi", "pods": "110"}``.
    """

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    resources: Mapping[str, str]

    @property
    def allocatable(self) -> Resources:
        return Resources.from_resource_list(self.resources)

    def node_labels(self, hostname: str) -> dict[str, str]:
        """The labels of one Node, ``kubernetes.io/hostname`` included."""
        return {**self.labels, "kubernetes.io/hostname": hostname}

    def api_taints(self) -> list[dict[str, str]]:
        """The taints as a Node's ``spec.taints``."""
        out: list[dict[str, str]] = []
        for taint in self.taints:
            entry = {"key": taint.key, "effect": taint.effect}
            if taint.value:
                entry["value"] = taint.value
            out.append(entry)
        return out


def node_shape(
    *,
    resources: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    fixed_labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint | Mapping[str, object]] = (),
    os: str = "linux",
    arch: str = "amd64",
) -> NodeShape:
    """The shape of a pool's Nodes.

    Label precedence, lowest first: the kubelet's ``kubernetes.io/os``/``arch`` (``os``,
    ``arch``), the pool's ``labels`` (which may set those two: the simulated kubelet runs what
    the pool declares), then ``fixed_labels`` (pool membership, instance type, scope), which
    nothing overrides.

    Raises:
        ValueError: a malformed quantity in ``resources`` or a bad taint.
    """
    merged = {"kubernetes.io/os": os, "kubernetes.io/arch": arch, **(labels or {})}
    merged.update(fixed_labels or {})
    node_taints = tuple(t if isinstance(t, Taint) else Taint.from_api(t) for t in taints)
    Resources.from_resource_list(resources)  # fail here, naming the quantity, not later
    return NodeShape(labels=merged, taints=node_taints, resources=dict(resources))
