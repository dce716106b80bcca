"""What a pass over a pool must change in its recorded intents: which VMs to retire and how
many to add. Pure, so the scale-down order can be tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from nodepool_operator.api import InstanceRecord
from nodepool_operator.controllers.nodepool._intent import DELETING


@dataclass(frozen=True, slots=True)
class Plan:
    retire: tuple[str, ...] = ()
    """Records to mark ``deleting``: VMs that are gone, then the surplus, in that order."""
    add: int = 0
    """How many new intents to record."""

    @property
    def empty(self) -> bool:
        return not self.retire and not self.add


def desired_nodes(target: int, min_nodes: int, max_nodes: int) -> int:
    """``targetNodes`` clamped into ``[minNodes, maxNodes]`` (spec is never rewritten)."""
    return max(min_nodes, min(target, max_nodes))


def plan(
    records: Sequence[InstanceRecord],
    desired: int,
    *,
    gone: Collection[str] = (),
    order: Sequence[str] = (),
    keep: Collection[str] = (),
    aside: Collection[str] = (),
) -> Plan:
    """Retire what is ``gone`` (its VM terminated or unknown to the cloud) and the surplus
    over ``desired``, or add the missing.

    ``order`` ranks the records that have a registered Node, best to remove first
    (:func:`~nodepool_operator.scheduling.removal_order`: empty nodes, then the least
    utilised whose pods fit on the nodes that stay, then the busy ones). Surplus goes in this
    order: records with no Node yet (VMs still booting, or never created), newest first, as
    they serve nobody; then the ranked ones in rank order. Records already ``deleting`` are
    neither counted nor chosen: their removal is under way. Records in ``keep`` (a Node
    whose scale-down drain just timed out) count but are not chosen: the surplus waits for
    them rather than draining them again at once. Records ``aside`` (expired, their
    replacement not Ready yet: :mod:`._expiry`) are neither counted nor chosen, so their
    replacement is added while they keep serving.
    """
    retire = [r.name for r in records if r.state != DELETING and r.name in gone]
    live = [
        r for r in records if r.state != DELETING and r.name not in gone and r.name not in aside
    ]
    if len(live) < desired:
        return Plan(retire=tuple(retire), add=desired - len(live))
    surplus = len(live) - desired
    rank = {name: i for i, name in enumerate(order)}

    def key(i: int) -> tuple[int, int]:
        name = live[i].name
        return (rank[name], 0) if name in rank else (-1, -i)

    best_first = [i for i in sorted(range(len(live)), key=key) if live[i].name not in keep]
    retire += [live[i].name for i in best_first[:surplus]]
    return Plan(retire=tuple(retire))
