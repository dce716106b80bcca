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

Drifted nodes (:mod:`._drift`) are replaced the same way and under the same budget, in one
decision with the expired ones (expired first, then drifted, each oldest first), so the two
never take the budget twice; the Drifted condition counts them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from nodepool_operator.api import InstanceRecord, format_duration
from nodepool_operator.controllers.nodepool._budget import allowed_disruptions
from nodepool_operator.controllers.nodepool._disruption import disrupting
from nodepool_operator.controllers.nodepool._drift import DRIFTED, Drift
from nodepool_operator.controllers.nodepool._instances import live, node_of, serving
from nodepool_operator.controllers.nodepool.records import PoolNode

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
    """Expired or drifted nodes the budget holds back this pass."""
    waits: tuple[float, ...] = ()
    """Seconds until the next node expires."""
    message: str = ""
    """The Expiring condition's message (empty: no node expired)."""
    drifting: str = ""
    """The Drifted condition's message (empty: no node drifted)."""
    drift_aside: tuple[str, ...] = ()
    """Of :attr:`aside`, those replaced because they drifted (not expired)."""


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
    drifted: Mapping[str, Drift] | None = None,
) -> Expiry:
    """The expired and ``drifted`` records of the pool and what to do with each now.
    ``want``: the pool's desired size; ``skip``: records leaving anyway (not expiry's to
    decide); ``resting``: records whose drain timed out a short while ago. An expired or
    drifted one stays aside while it rests (not retired again yet), so its Ready
    replacement is not taken for surplus."""
    drifted = drifted or {}
    ttl = obs.pool.spec.disruption.expire_after
    limit = ttl.total_seconds() if ttl is not None else None
    by_instance = obs.by_instance()
    # (expired first, born, record, node): expired before drifted, each oldest first
    due: list[tuple[int, float, str, str]] = []
    waits: list[float] = []
    for r in live(records):
        vm = obs.vms.get(r.instance_id or "")
        node = node_of(r, by_instance)
        if r.name in skip or vm is None or node is None or node.disrupting:
            continue
        born = vm.launched_at or vm.created_at
        if limit is not None and now - born >= limit:
            due.append((0, born, r.name, node.name))
            continue
        if limit is not None:
            waits.append(born + limit - now)
        if r.name in drifted:
            due.append((1, born, r.name, node.name))
    if not due:
        return Expiry(waits=tuple(waits))
    due.sort()
    count = disrupting(records, obs.nodes, by_instance)
    budgets = obs.pool.spec.disruption.budgets
    allowed = allowed_disruptions(budgets, len(obs.nodes), count, EXPIRY_REASON)
    chosen, held = due[:allowed], due[allowed:]
    chosen_names = {name for _, _, name, _ in chosen}
    # The pool's Ready nodes without the chosen ones: once they are as many as it wants,
    # every replacement is serving and the chosen can go.
    ready = serving(records, by_instance, leaving={*chosen_names, *skip})
    age = format_duration(ttl) if ttl is not None else ""
    retire: dict[str, tuple[str, str]] = {}
    aside: list[str] = []
    for drift, _, name, node_name in chosen:
        if ready >= want and name not in resting:
            if drift:
                why = f"drifted ({drifted[name].reason}: {drifted[name].message})"
                retire[name] = (DRIFTED, f"node {node_name} of {name} {why}{_REPLACED}")
            else:
                why = f"is older than expireAfter {age}"
                retire[name] = (EXPIRED, f"node {node_name} of {name} {why}{_REPLACED}")
        else:
            aside.append(name)
    drift_names = {name for d, _, name, _ in chosen if d}
    return Expiry(
        aside=tuple(aside),
        drift_aside=tuple(n for n in aside if n in drift_names),
        retire=retire,
        held=tuple(n for _, _, _, n in held),
        waits=tuple(waits),
        message=_message(
            f"replacing nodes older than expireAfter {age}, replacement first: ",
            [n for d, _, _, n in chosen if not d],
            [n for d, _, _, n in held if not d],
        ),
        drifting=_drift_message(drifted, by_instance, records, chosen, held),
    )


_REPLACED = " and its replacement is Ready; draining and removing it"


def _message(doing: str, chosen: Sequence[str], held: Sequence[str]) -> str:
    parts = []
    if chosen:
        parts.append(doing + _names(chosen))
    if held:
        parts.append(f"held by the disruption budgets ({EXPIRY_REASON}): " + _names(held))
    return "; ".join(parts)


def _drift_message(
    drifted: Mapping[str, Drift],
    by_instance: Mapping[str, PoolNode],
    records: Sequence[InstanceRecord],
    chosen: Sequence[tuple[int, float, str, str]],
    held: Sequence[tuple[int, float, str, str]],
) -> str:
    """``<n> node(s) drifted (<node>: <reason>, ...)``, then which are being replaced and
    which the budgets hold (a drifted node that also expired is counted, and replaced as
    expired)."""
    if not drifted:
        return ""
    nodes = {
        r.name: node.name
        for r in records
        if r.name in drifted and (node := node_of(r, by_instance)) is not None
    }
    found = [f"{nodes[name]}: {drifted[name].reason}" for name in sorted(drifted) if name in nodes]
    if not found:
        return ""
    head = f"{len(found)} node(s) drifted ({_names(found)})"
    rest = _message(
        "replacing, replacement first: ",
        [n for d, _, _, n in chosen if d],
        [n for d, _, _, n in held if d],
    )
    return f"{head}; {rest}" if rest else head
