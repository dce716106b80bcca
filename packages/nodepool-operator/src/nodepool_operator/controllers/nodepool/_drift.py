"""Which of a pool's nodes drifted: their launch no longer matches what a node launched now
would be. Pure.

What a VM was launched with is recorded on the VM itself at its create
(:mod:`._launch_record`: a hash of its node class's launch fields); its AMI is the cloud's
own record of the VM (EC2's ImageId). A node drifted when, against what the pool would
launch now (:class:`Launch`):

- its AMI differs from the one its class resolves to now (an SSM parameter that moved, a
  new ``amiId``): ``ImageDrift``;
- its class hash differs from the class's now (an edited node class): ``NodeClassDrift``;
- its instance type is no longer one of the pool's ``instanceType`` and ``instanceTypes``:
  ``InstanceTypeDrift``.

Left out on purpose: the pool's labels and taints (the controller applies them to running
Nodes in place, :mod:`._node_sync`), the class's subnets (a subnet added or removed would
otherwise roll every node; a node's subnet stays valid), and the AMI selector itself (an
``amiId`` switched to a parameter holding the same AMI is no drift: the AMIs are compared).

A VM without the record (launched by an operator from before drift, or adopted) has not
drifted: upgrading the operator never rolls a pool. A hash of another version is not
compared either (a change of what the hash covers is not a change of the class).
Drifted nodes are replaced replacement first within the budgets of reason ``Drifted``
(:mod:`._expiry` decides that for expired and drifted nodes together).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kubeloop import Object
from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers.nodepool._events import Event, normal
from nodepool_operator.controllers.nodepool._intent import DELETING
from nodepool_operator.controllers.nodepool._launch_record import CLASS_HASH_TAG, HASH_VERSION

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = [
    "DRIFTED",
    "DRIFTED_ANNOTATION",
    "Drift",
    "Launch",
    "detected",
    "drift_mark",
    "drift_of",
    "drifted",
    "marks",
]

#: The Node's annotation marking it drifted; its value is the reason (read back after a
#: restart, and by people: ``kubectl get nodes -o yaml``).
DRIFTED_ANNOTATION: Final = "node.kubeloop.dev/drifted"
#: Pool condition type and Event reason; also the disruption budgets' reason.
DRIFTED: Final = "Drifted"


@dataclass(frozen=True, slots=True)
class Launch:
    """What a node of the pool would be launched with now."""

    class_hash: str
    types: frozenset[str]
    """The instance types the pool may launch."""
    image_id: str | None = None
    """The AMI its class resolves to now; None when not known (no class, or the cloud
    could not say): no node drifts by its image then."""
    recheck: float | None = None
    """Seconds until the image is resolved anew (an SSM parameter moves with no event)."""


@dataclass(frozen=True, slots=True)
class Drift:
    """Why one node drifted."""

    reason: str
    """``ImageDrift``, ``NodeClassDrift`` or ``InstanceTypeDrift``."""
    message: str


def drift_of(vm: Instance, launch: Launch) -> Drift | None:
    """Whether ``vm`` (launched with the record) drifted from ``launch``, and why."""
    recorded = vm.tags.get(CLASS_HASH_TAG)
    if not recorded:
        return None  # launched before drift was recorded: never rolled for an upgrade
    if launch.image_id is not None and vm.image_id and vm.image_id != launch.image_id:
        return Drift("ImageDrift", f"runs {vm.image_id}, its class resolves to {launch.image_id}")
    if recorded.partition(":")[0] == HASH_VERSION and recorded != launch.class_hash:
        return Drift("NodeClassDrift", "its node class changed since its launch")
    if vm.instance_type not in launch.types:
        return Drift("InstanceTypeDrift", f"{vm.instance_type} is no longer a type of the pool")
    return None


def drift_mark(node: Object) -> str:
    """The drift reason a Node is marked with ("" when none)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DRIFTED_ANNOTATION) or "")


def _live(records: Sequence[InstanceRecord]) -> list[InstanceRecord]:
    return [r for r in records if r.instance_id and r.state != DELETING]


def drifted(
    obs: Observation, records: Sequence[InstanceRecord], skip: Collection[str] = ()
) -> dict[str, Drift]:
    """The live records of the pool whose Node drifted, by record name; none when what a
    node would be launched with now is not known (:attr:`Observation.launch`). A Node
    marked ``ImageDrift`` stays drifted while its class's image cannot be resolved (the
    mark is read back from the cluster, so a restart with the parameter store unreachable
    does not forget it)."""
    launch = obs.launch
    if launch is None:
        return {}
    by_instance = obs.by_instance()
    out: dict[str, Drift] = {}
    for r in _live(records):
        vm = obs.vms.get(r.instance_id or "")
        node = by_instance.get(r.instance_id or "")
        if r.name in skip or vm is None or node is None:
            continue
        found = drift_of(vm, launch)
        if found is None and launch.image_id is None and node.drifted == "ImageDrift":
            found = Drift("ImageDrift", "marked drifted by its image (not resolved now)")
        if found is not None:
            out[r.name] = found
    return out


def marks(
    obs: Observation, records: Sequence[InstanceRecord], found: Mapping[str, Drift]
) -> dict[str, str]:
    """The Nodes whose drift mark must change: the reason to set, or "" to clear it (no
    longer drifted, e.g. the class edited back). Nodes being disrupted keep theirs."""
    if obs.launch is None:
        return {}
    by_instance = obs.by_instance()
    out: dict[str, str] = {}
    for r in _live(records):
        node = by_instance.get(r.instance_id or "")
        if node is None or node.disrupting:
            continue
        want = found[r.name].reason if r.name in found else ""
        if node.drifted != want:
            out[node.name] = want
    return out


def detected(
    obs: Observation,
    records: Sequence[InstanceRecord],
    found: Mapping[str, Drift],
    changed: Mapping[str, str],
) -> list[Event]:
    """A ``DriftDetected`` Event for each record whose Node is newly marked (``changed``, by
    :func:`marks`): once per node and reason, as the mark is read back on later passes."""
    by_instance = obs.by_instance()
    out = []
    for r in records:
        node = by_instance.get(r.instance_id or "")
        if r.name in found and node is not None and changed.get(node.name):
            why = found[r.name]
            note = f"node {node.name} of {r.name} drifted: {why.reason}, {why.message}"
            out.append(normal("DriftDetected", note, about=r.name))
    return out
