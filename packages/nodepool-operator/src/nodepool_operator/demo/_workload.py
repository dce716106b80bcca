"""What the demo applies: one NodePool of 96 GiB nodes, its Autoscaler, and a burst of pods.

The burst mixes pods that should make the pool grow with four that must not:

* ``fits``: 28Gi, 12Gi and 4Gi pods in ``prod`` and ``money-maker``;
* ``too-big``: 120Gi, more than any node of the pool holds;
* ``unwatched``: a 4Gi pod in ``dev``, a namespace the Autoscaler does not watch;
* ``no-matching-node``: a nodeSelector (``gpu=true``) no node of the pool carries;
* ``missing-secret``: a 4Gi pod mounting a Secret that does not exist.

The sizes are chosen so the outcome does not depend on the order the scheduler binds pods in.
First-fit-decreasing packs the fitting pods on 3 nodes (28+28+28+12 twice, then the rest), which
is also the lower bound. And the scheduler, which spreads pods rather than packing them, cannot
strand a fitting pod on those 3 nodes either: a 28Gi pod is stranded only when every node has
more than 96-28 = 68Gi in use, i.e. more than 204Gi in all, but everything that can ever bind
(the fitting pods plus the two small extras) minus that pod is 220+8-28 = 200Gi. So 3 nodes is
the right answer for any binding order, and a fourth node means something scaled for a pod it
should not have.

The unwatched and missing-Secret pods are small on purpose: once the pool's nodes exist the
scheduler may bind them into spare room (it checks neither namespaces nor Secrets), as it would
in a real cluster, where the missing Secret then stalls the pod in ContainerCreating. They must
not *cause* a node; they may still land on one. The demo reports them apart from the fitting pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from nodepool_operator.api import AUTOSCALERS, MAX_POOL_NODES, NODEPOOLS
from nodepool_operator.scheduling import NodeTemplate, lower_bound, plan_scale_up, pod_view

#: Every object the demo creates carries this label, so its view and clean-up ignore the rest.
DEMO_LABEL: Final = "demo.kubeloop.dev/role"
#: The label the NodePool controller puts on its Nodes (docs/ownership.md).
POOL_LABEL: Final = "kubeloop.dev/nodepool"
POOL_NAME: Final = "mem96"
WATCHED_NAMESPACES: Final = ("prod", "money-maker")
UNWATCHED_NAMESPACE: Final = "dev"
MISSING_SECRET: Final = "demo-credentials"


class Role(StrEnum):
    """Why a pod is in the burst: it should drive scale-up, or why it must not."""

    FITS = "fits"
    TOO_BIG = "too-big"
    UNWATCHED = "unwatched"
    NO_MATCHING_NODE = "no-matching-node"
    MISSING_SECRET = "missing-secret"

    @property
    def explanation(self) -> str:
        return _EXPLANATIONS[self]


_EXPLANATIONS = {
    Role.FITS: "fits a node of the pool",
    Role.TOO_BIG: "bigger than a node of the pool",
    Role.UNWATCHED: f"in namespace {UNWATCHED_NAMESPACE}, which the Autoscaler does not watch",
    Role.NO_MATCHING_NODE: "nodeSelector gpu=true, which no node of the pool has",
    Role.MISSING_SECRET: f"mounts Secret {MISSING_SECRET}, which does not exist",
}


@dataclass(frozen=True)
class PodGroup:
    """``count`` identical pods named ``<prefix>-<i>``."""

    prefix: str
    namespace: str
    memory: str
    cpu: str
    role: Role = Role.FITS
    count: int = 1

    def names(self) -> list[str]:
        """``<prefix>-0`` ... ``<prefix>-<count-1>``; a lone must-not-trigger pod is just
        ``<prefix>``."""
        if self.count == 1 and self.role is not Role.FITS:
            return [self.prefix]
        return [f"{self.prefix}-{i}" for i in range(self.count)]


#: Pods that must not cause a scale-up, one of each kind.
NOT_TRIGGERING: Final = (
    PodGroup("too-big-120gi", "prod", "120Gi", "2", Role.TOO_BIG),
    PodGroup("unwatched-4gi", UNWATCHED_NAMESPACE, "4Gi", "500m", Role.UNWATCHED),
    PodGroup("wants-gpu", "prod", "4Gi", "500m", Role.NO_MATCHING_NODE),
    PodGroup("needs-secret", "money-maker", "4Gi", "500m", Role.MISSING_SECRET),
)
#: The fitting pods' sizes (memory, cpu) and their weight in the mix: the seeds' 28 GiB pods,
#: and smaller ones that fill the room three 28 GiB pods leave on a 96 GiB node.
_MIX: Final = (("28Gi", "2", 6), ("12Gi", "1", 3), ("4Gi", "500m", 4))
#: Each namespace's pods are named after a workload in it.
_APPS: Final = {"prod": "web", "money-maker": "batch"}
#: The default burst: 13 pods that fit (6 of 28Gi, 3 of 12Gi, 4 of 4Gi), 4 that must not.
DEFAULT_PODS: Final = 17


def mixed_burst(pods: int = DEFAULT_PODS) -> tuple[PodGroup, ...]:
    """``pods`` pods: the four of :data:`NOT_TRIGGERING`, the rest fitting pods in the
    proportions of :data:`_MIX`, split between the watched namespaces.

    Only the default size comes with the guarantee of the module docstring (3 nodes whatever
    the binding order); other sizes keep the proportions, not the guarantee.

    Raises:
        ValueError: ``pods`` leaves no room for a fitting pod.
    """
    fitting = pods - len(NOT_TRIGGERING)
    if fitting < 1:
        raise ValueError(f"need at least {len(NOT_TRIGGERING) + 1} pods, got {pods}")
    weights = sum(weight for _, _, weight in _MIX)
    counts = [round(fitting * weight / weights) for _, _, weight in _MIX[:-1]]
    counts.append(fitting - sum(counts))
    groups = []
    for (memory, cpu, _), count in zip(_MIX, counts, strict=True):
        # Half in each watched namespace, the odd one in the first.
        for i, namespace in enumerate(WATCHED_NAMESPACES):
            share = count // len(WATCHED_NAMESPACES) + (
                1 if i < count % len(WATCHED_NAMESPACES) else 0
            )
            if share:
                prefix = f"{_APPS[namespace]}-{memory.lower()}"
                groups.append(PodGroup(prefix, namespace, memory, cpu, count=share))
    return (*groups, *NOT_TRIGGERING)


@dataclass(frozen=True)
class PoolShape:
    """The pool's nodes; ``memory`` and ``cpu`` are written into the NodePool spec."""

    instance_type: str = "mem96.large"
    memory: str = "96Gi"
    cpu: str = "12"
    max_nodes: int = 10


#: On EC2 (moto): a real type with 96 GiB (48 vCPUs; the spec keeps cpu at 12, so the pods
#: pack exactly as on the simulated cloud).
EC2_INSTANCE_TYPE: Final = "c5.12xlarge"


@dataclass(frozen=True)
class Workload:
    """The demo's objects as API manifests, and what a perfect run ends with."""

    shape: PoolShape = field(default_factory=PoolShape)
    burst: tuple[PodGroup, ...] = field(default_factory=mixed_burst)
    #: The Autoscaler's period. The seeds' default is 5m; the demo does not depend on it,
    #: because the Autoscaler reacts to pod events through its watch, not to the period.
    frequency: str = "30s"
    #: The AwsNodeClass the pool names (on EC2), or None.
    node_class: str | None = None

    @classmethod
    def sized(cls, pods: int = DEFAULT_PODS, *, ec2: bool = False) -> Workload:
        """The workload with a burst of ``pods`` (:func:`mixed_burst`), the pool's maxNodes
        raised if the fitting pods need more than the default 10 nodes. ``ec2``: an EC2
        instance type and a node class named after the pool."""
        workload = cls(burst=mixed_burst(pods))
        if ec2:
            workload = replace(
                workload,
                shape=replace(workload.shape, instance_type=EC2_INSTANCE_TYPE),
                node_class=POOL_NAME,
            )
        needed = workload.nodes_first_fit()
        if needed > workload.shape.max_nodes:
            workload = replace(workload, shape=replace(workload.shape, max_nodes=needed))
        return workload

    def namespaces(self) -> list[str]:
        return sorted({g.namespace for g in self.burst})

    def nodepool(self) -> dict[str, Any]:
        pool: dict[str, Any] = {
            "apiVersion": NODEPOOLS.api_version,
            "kind": NODEPOOLS.kind,
            "metadata": {"name": POOL_NAME, "labels": {DEMO_LABEL: "pool"}},
            "spec": {
                "instanceType": self.shape.instance_type,
                "memory": self.shape.memory,
                "cpu": self.shape.cpu,
                "minNodes": 0,
                "maxNodes": self.shape.max_nodes,
                "targetNodes": 0,
            },
        }
        if self.node_class is not None:
            pool["spec"]["nodeClassRef"] = {"name": self.node_class}
        return pool

    def autoscaler(self) -> dict[str, Any]:
        return {
            "apiVersion": AUTOSCALERS.api_version,
            "kind": AUTOSCALERS.kind,
            "metadata": {"name": POOL_NAME, "labels": {DEMO_LABEL: "autoscaler"}},
            "spec": {
                "nodePoolRef": {"name": POOL_NAME},
                "namespaces": list(WATCHED_NAMESPACES),
                "frequency": self.frequency,
            },
        }

    def pods(self) -> list[dict[str, Any]]:
        return [_pod(g, name) for g in self.burst for name in g.names()]

    def template(self) -> NodeTemplate:
        """A node of the pool as the scheduling simulation sees it (nothing reserved)."""
        spec = self.nodepool()["spec"]
        return NodeTemplate.from_pool(
            spec["instanceType"],
            cpu=spec["cpu"],
            memory=spec["memory"],
            labels={POOL_LABEL: POOL_NAME},
        )

    def roles(self) -> dict[tuple[str, str], Role]:
        """``(namespace, name) -> role`` of every pod of the burst."""
        return {(g.namespace, name): g.role for g in self.burst for name in g.names()}

    def fitting_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if p["metadata"]["labels"][DEMO_LABEL] == Role.FITS]

    def nodes_lower_bound(self) -> int:
        """The fewest nodes that could hold the fitting pods (``scheduling.lower_bound``)."""
        return lower_bound(self.fitting_pods(), self.template())

    def nodes_first_fit(self) -> int:
        """How many nodes first-fit-decreasing opens for the fitting pods, from zero."""
        plan = plan_scale_up(
            [pod_view(p) for p in self.fitting_pods()],
            template=self.template(),
            current_target=0,
            max_nodes=MAX_POOL_NODES,
        )
        return plan.new_nodes


def _pod(group: PodGroup, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "app",
        # Never pulled: there is no kubelet. A real image name keeps the manifest honest.
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": group.cpu, "memory": group.memory}},
    }
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if group.role is Role.NO_MATCHING_NODE:
        spec["nodeSelector"] = {"gpu": "true"}
    if group.role is Role.MISSING_SECRET:
        spec["volumes"] = [
            {"name": "credentials", "secret": {"secretName": MISSING_SECRET, "optional": False}}
        ]
        container["volumeMounts"] = [{"name": "credentials", "mountPath": "/etc/credentials"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": group.namespace,
            "labels": {DEMO_LABEL: str(group.role)},
        },
        "spec": spec,
    }


def role_of(pod: Mapping[str, Any]) -> Role | None:
    """The demo role of a pod, or None for a pod the demo did not create."""
    value = pod.get("metadata", {}).get("labels", {}).get(DEMO_LABEL)
    try:
        return Role(value) if value is not None else None
    except ValueError:
        return None
