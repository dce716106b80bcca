"""Which of a pool's nodes the cloud is about to take (their Node marked by the interruption
queue: :mod:`.._interrupted`), and which of those are drained now. Pure.

An interrupted node is replaced the way an expired one is (:mod:`._expiry`), replacement
first while time allows: it is set aside (not counted toward the pool's size, so a
replacement is launched) and retired (tainted, drained through the Eviction API honouring
PodDisruptionBudgets, then VM and Node) once the pool has as many Ready nodes without it as
it wants. Time allows while more than :data:`DRAIN_RESERVE` seconds are left before its VM
goes; after that it is retired whatever the replacement, so its pods leave through the
Eviction API before EC2 stops the machine under them. A spot warning's two minutes leave
half a minute for the replacement; a scheduled change's days leave all the time it needs;
a VM already stopping or terminated is drained at once.

Interruptions are not budgeted (the cloud decides, not the operator: Karpenter's forceful
disruption), and a blocker on a pod does not hold them back (:attr:`.records.PoolNode.
scaling_down` is False): the VM goes anyway.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from nodepool_operator.api import InstanceRecord
from nodepool_operator.controllers.nodepool._instances import live, node_of, serving

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["DRAIN_RESERVE", "INTERRUPTED", "Interruptions", "interruptions"]

#: Event reason when an interrupted node is retired.
INTERRUPTED: Final = "Interrupted"
#: Seconds before its VM goes by which an interrupted node is drained whether or not its
#: replacement is Ready: time for its pods' own grace periods (30 s by default) and a
#: PodDisruptionBudget's turn or two.
DRAIN_RESERVE: Final = 90.0


@dataclass(frozen=True, slots=True)
class Interruptions:
    """What the interruptions decide in one pass."""

    aside: tuple[str, ...] = ()
    """Interrupted records whose replacement is not Ready yet and whose VM has time left."""
    retire: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Interrupted records to retire now: the Event (reason, note) by record."""
    waits: tuple[float, ...] = ()
    """Seconds until an aside one must be drained whatever its replacement."""


def interruptions(
    obs: Observation,
    records: Sequence[InstanceRecord],
    now: float,
    *,
    want: int,
    skip: Collection[str] = (),
) -> Interruptions:
    """The interrupted records of the pool and what to do with each now. ``want``: the
    pool's desired size; ``skip``: records leaving anyway (VM gone, Node deleted...)."""
    by_instance = obs.by_instance()
    hit = []
    for r in live(records):
        node = node_of(r, by_instance)
        if r.name in skip or node is None or node.deleting or node.interrupted is None:
            continue
        hit.append((r.name, node.name, node.interrupted.kind, node.interrupted.deadline))
    if not hit:
        return Interruptions()
    names = {name for name, *_ in hit}
    ready = serving(records, by_instance, leaving={*names, *skip})
    retire: dict[str, tuple[str, str]] = {}
    aside: list[str] = []
    waits: list[float] = []
    for name, node_name, kind, deadline in sorted(hit, key=lambda h: h[3]):
        left = deadline - now
        if ready >= want:
            why = "its replacement is Ready"
        elif left <= DRAIN_RESERVE:
            why = f"{max(left, 0):.0f}s left, too little to wait for a replacement"
        else:
            aside.append(name)
            waits.append(left - DRAIN_RESERVE)
            continue
        note = f"node {node_name} of {name}: {kind}, its VM goes; {why}: draining it"
        retire[name] = (INTERRUPTED, note)
    return Interruptions(aside=tuple(aside), retire=retire, waits=tuple(waits))
