"""Which of a pool's nodes are older than ``spec.disruption.expireAfter``, and which of those
are replaced now. Pure.

A node's age is its VM's, from the launch (the creation when the cloud says no launch
time): the machine is what ages (patches, leaks, a long-lived kernel), a VM slow to register
is as old as it is, and a Node object recreated by its kubelet would reset a Node's
``creationTimestamp`` but not the VM's launch time.

An expired node is replaced replacement first, as a rolling update with ``maxSurge`` 1: it
is set aside (not counted toward the pool's size, so a replacement is launched), and only
once the pool has as many Ready nodes without it as it wants is it retired (tainted, drained
through the Eviction API, then removed). Karpenter treats expiry as forceful and outside
the budgets; here it goes within the budgets that apply to the ``Drifted`` reason (an old
node is one whose launch no longer matches what a new one would be), counted from the
cluster as every disruption is, so at most as many are set aside at once as the budget
allows, oldest first, and a budget of 0 holds them (the Expiring condition says so).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from nodepool_operator.api import InstanceRecord, format_duration
from nodepool_operator.controllers.nodepool._budget import allowed_disruptions
from nodepool_operator.controllers.nodepool._disruption import disrupting
from nodepool_operator.controllers.nodepool._instances import live, node_of

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["EXPIRED", "EXPIRING", "EXPIRY_REASON", "Expiry", "expiry"]

#: Pool condition type: True while nodes older than expireAfter are being replaced or held.
EXPIRING: Final = "Expiring"
#: Event reason when an expired node is retired (its replacement is Ready).
EXPIRED: Final = "Expired"
#: The budget reason expiry counts against (see the module docstring).
EXPIRY_REASON: Final = "Drifted"
_NAMED = 10


@dataclass(frozen=True, slots=True)
class Expiry:
    """What expiry decides in one pass."""

    aside: tuple[str, ...] = ()
    """Expired records whose replacement is not Ready yet: not counted toward the pool's
    size (so the replacement is launched), not removed."""
    retire: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Expired records to retire now (their replacements are Ready): the Event (reason,
    note) by record."""
    held: tuple[str, ...] = ()
    """Expired nodes the budget holds back this pass."""
    waits: tuple[float, ...] = ()
    """Seconds until the next node expires."""
    message: str = ""
    """The Expiring condition's message (empty: no node expired)."""


def _names(names: Sequence[str]) -> str:
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def expiry(
    obs: Observation,
    records: Sequence[InstanceRecord],
    now: float,
    *,
    want: int,
    skip: Collection[str] = (),
    resting: Collection[str] = (),
) -> Expiry:
    """The expired records of the pool and what to do with each now. ``want``: the pool's
    desired size; ``skip``: records leaving anyway (not expiry's to decide); ``resting``:
    records whose drain timed out a short while ago. An expired one stays aside while it
    rests (not retired again yet), so its Ready replacement is not taken for surplus."""
    ttl = obs.pool.spec.disruption.expire_after
    if ttl is None:
        return Expiry()
    limit = ttl.total_seconds()
    by_instance = obs.by_instance()
    expired: list[tuple[float, str, str]] = []
    waits: list[float] = []
    for r in live(records):
        vm = obs.vms.get(r.instance_id or "")
        node = node_of(r, by_instance)
        if r.name in skip or vm is None or node is None or node.disrupting:
            continue
        born = vm.launched_at or vm.created_at
        if now - born >= limit:
            expired.append((born, r.name, node.name))
        else:
            waits.append(born + limit - now)
    if not expired:
        return Expiry(waits=tuple(waits))
    expired.sort()
    count = disrupting(records, obs.nodes, by_instance)
    budgets = obs.pool.spec.disruption.budgets
    allowed = allowed_disruptions(budgets, len(obs.nodes), count, EXPIRY_REASON)
    chosen, held = expired[:allowed], expired[allowed:]
    chosen_names = {name for _, name, _ in chosen}
    # The pool's Ready nodes without the chosen ones: once they are as many as it wants,
    # every replacement is serving and the chosen can go.
    serving = sum(
        1
        for r in live(records)
        if r.name not in chosen_names
        and r.name not in skip
        and (node := node_of(r, by_instance)) is not None
        and node.ready
        and not node.disrupting
    )
    age = format_duration(ttl)
    retire: dict[str, tuple[str, str]] = {}
    aside: list[str] = []
    for _, name, node_name in chosen:
        if serving >= want and name not in resting:
            note = (
                f"node {node_name} of {name} is older than expireAfter {age} and its "
                "replacement is Ready; draining and removing it"
            )
            retire[name] = (EXPIRED, note)
        else:
            aside.append(name)
    parts = []
    if chosen:
        parts.append(
            f"replacing nodes older than expireAfter {age}, replacement first: "
            + _names([n for _, _, n in chosen])
        )
    if held:
        parts.append(
            f"held by the disruption budgets ({EXPIRY_REASON}): " + _names([n for _, _, n in held])
        )
    return Expiry(
        aside=tuple(aside),
        retire=retire,
        held=tuple(n for _, _, n in held),
        waits=tuple(waits),
        message="; ".join(parts),
    )
