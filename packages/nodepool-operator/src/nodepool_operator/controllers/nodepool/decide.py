"""What a pass over a live pool plans, decided from what it read: pure, no I/O and no clock
(``now`` comes in), so every branch is tested as a table (tests/unit/nodepool_operator/
controllers/nodepool/).

:func:`decide` is the recipe of the pass's plan (:class:`Decision`): adopt the VMs tagged for
the pool that no record knows, find the records that must be replaced (:mod:`._leaving`),
keep a blocked scale-down choice when another Node can go instead and rank the surplus
(:mod:`._surplus`), cut its removals to the disruption budgets (:mod:`._disruption`), then
record the retirements and the new intents (:mod:`._intent`), with the Events
(:mod:`._events`) and the Nodes to taint first. The records as they will be written come
before any cloud call.

The convergence that follows (:mod:`.act`) asks, at each step whose input is the answer of a
call made in that pass, the module of that step: a Node being retired (:mod:`._retire`),
the records that follow their VM and what is garbage (:mod:`._upkeep`), the status and when to
requeue (:mod:`._outcome`); a deleted pool has its own pair (:mod:`._deletion`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nodepool_operator.api import InstanceRecord
from nodepool_operator.controllers.nodepool._disruption import within_budget
from nodepool_operator.controllers.nodepool._drift import detected, drifted, marks
from nodepool_operator.controllers.nodepool._events import Event, normal, warning
from nodepool_operator.controllers.nodepool._expiry import expiry
from nodepool_operator.controllers.nodepool._instances import desired, live, node_of, update
from nodepool_operator.controllers.nodepool._intent import CREATING, DELETING, new_intents
from nodepool_operator.controllers.nodepool._leaving import leaving, resting
from nodepool_operator.controllers.nodepool._plan import plan
from nodepool_operator.controllers.nodepool._pool_status import CloudFailure
from nodepool_operator.controllers.nodepool._surplus import keep_held, removal, untaint
from nodepool_operator.settings import OperatorSettings

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Observation

__all__ = ["Decision", "adopt_unknown", "create_gate", "decide"]


def adopt_unknown(
    obs: Observation, records: Sequence[InstanceRecord]
) -> tuple[tuple[InstanceRecord, ...], list[Event]]:
    """Record VMs tagged for the pool that no record knows, up to the desired count, so that
    they serve before any is garbage-collected or a new one is launched."""
    known_ids = {r.instance_id for r in records if r.instance_id}
    names = {r.name for r in records}
    room = desired(obs.pool) - len(live(records)) - sum(1 for r in records if r.state == CREATING)
    out = list(records)
    events = []
    for vm in obs.listed:
        if room <= 0:
            break
        if vm.id in known_ids or vm.name in names or vm.state == "terminated":
            continue
        out.append(InstanceRecord(name=vm.name, instance_id=vm.id, state=vm.state))
        names.add(vm.name)
        room -= 1
        events.append(normal("Adopted", f"VM {vm.id} ({vm.name}) tagged for the pool"))
    return tuple(out), events


@dataclass(frozen=True, slots=True)
class Decision:
    """The plan of one pass over a live pool, recorded before anything is done."""

    records: tuple[InstanceRecord, ...]
    """The records as planned: written in one status write before any cloud call."""
    record: bool = False
    """Whether they changed (adopted, kept, retired, added): write them first."""
    taint: tuple[str, ...] = ()
    """Nodes chosen for removal now: tainted before the plan is recorded, so no pod is
    bound to them from then on (Karpenter's ``karpenter.sh/disrupted``)."""
    untaint: tuple[str, ...] = ()
    """Nodes tainted for removal whose record is not retiring (a crash between the taint and
    the record, or the target raised again): schedulable again."""
    events: tuple[Event, ...] = ()
    waits: tuple[float, ...] = ()
    """Seconds until something seen is due (a registration, a repair, a rest)."""
    resting: frozenset[str] = frozenset()
    """Live records whose Node's scale-down drain timed out a short while ago."""
    repair_blocked: str = ""
    repair_held: tuple[str, ...] = ()
    expiring: str = ""
    """Which nodes older than expireAfter are replaced or held (the Expiring condition)."""
    expiry_held: tuple[str, ...] = ()
    """Expired or drifted nodes the disruption budgets hold back this pass."""
    drifting: str = ""
    """How many nodes drifted, which are replaced or held (the Drifted condition)."""
    drift_marks: Mapping[str, str] = field(default_factory=dict)
    """Nodes whose drift mark changes: the reason to annotate, "" to remove it."""
    budget_held: tuple[str, ...] = ()
    """Surplus records the disruption budgets hold back this pass."""
    add: int = 0
    retire: tuple[str, ...] = ()
    live_before: int = 0
    held: CloudFailure | None = None
    """A recent refusal holding the creates back (the create gate): reported, not asked
    again yet."""

    @property
    def creates(self) -> tuple[str, ...]:
        """The recorded intents to create now (none while a refusal holds)."""
        if self.held is not None:
            return ()
        return tuple(r.name for r in self.records if r.state == CREATING)


def create_gate(
    records: Sequence[InstanceRecord], holding: CloudFailure | None
) -> CloudFailure | None:
    """The refusal the create gate remembers for this pool and spec, when there is anything
    to create (a pool with nothing to create is not Degraded by an old refusal)."""
    if any(r.state == CREATING for r in records):
        return holding
    return None


def _recheck(obs: Observation) -> tuple[float, ...]:
    """When the pool's image is resolved anew (drift), if that is what it waits for."""
    launch = obs.launch
    return (launch.recheck,) if launch is not None and launch.recheck is not None else ()


def decide(
    obs: Observation,
    now: float,
    settings: OperatorSettings,
    holding: CloudFailure | None = None,
) -> Decision:
    """The pass's plan: adopt, find what leaves, keep blocked choices, rank the surplus,
    cut it to the budgets, record the retirements and the new intents. ``holding``: the
    create gate's remembered refusal for this pool and spec, if any."""
    records, events = adopt_unknown(obs, obs.pool.status.instances)
    adopted = bool(events)
    gone = leaving(obs, records, now, settings)
    rest, rest_waits = resting(obs, records, now)
    records, kept_events, empty = keep_held(obs, records, rest)
    events += kept_events
    want = desired(obs.pool)
    order: tuple[str, ...] = ()
    keep: frozenset[str] = rest
    if len(live(records)) > want:
        seen = removal(obs, records)
        order, empty = seen.order, empty | seen.empty
        if rest:
            # A drain timed out: the next candidate is a Node that can go now; with none,
            # the surplus waits for the rest to end rather than strand another's pods.
            keep = rest | (frozenset(seen.order) - frozenset(seen.removable))
    # Expiry and drift are budgeted by themselves (:mod:`._expiry`): their retirements
    # join what leaves. A Node newly drifted is marked, with an Event.
    drift = drifted(obs, records, skip=frozenset(gone.why))
    marked = marks(obs, records, drift)
    events += detected(obs, records, drift, marked)
    old = expiry(
        obs, records, now, want=want, skip=frozenset(gone.why), resting=rest, drifted=drift
    )
    why = {**gone.why, **old.retire}
    decided = plan(records, want, gone=why, order=order, keep=keep, aside=old.aside)
    decided, held = within_budget(obs, records, decided, why, empty)
    by_instance = obs.by_instance()
    before = len(live(records))
    base = Decision(
        records=records,
        record=adopted or bool(kept_events),
        events=tuple(events),
        waits=gone.waits + rest_waits + old.waits + _recheck(obs),
        resting=rest,
        repair_blocked=gone.repair_blocked,
        repair_held=gone.repair_held,
        expiring=old.message,
        expiry_held=old.held,
        drifting=old.drifting,
        drift_marks=marked,
        budget_held=held,
        live_before=before,
    )
    if decided.empty:
        return replace(
            base,
            untaint=untaint(records, obs.nodes, by_instance),
            held=create_gate(records, holding),
        )
    by_name = {r.name: r for r in records}
    taint = []
    for name in decided.retire:
        node = node_of(by_name[name], by_instance) if name not in gone.why else None
        if node is not None and not node.deleting:
            taint.append(node.name)
    for name in decided.retire:
        records = update(records, name, state=DELETING)
        if name in old.retire:
            reason, note = old.retire[name]
            events.append(normal(reason, note, about=name))
        elif name in gone.why:
            reason, note = gone.why[name]
            events.append(warning(reason, note, about=name))
    if decided.add:
        records += tuple(new_intents(obs.pool.metadata.name, decided.add, taken=set(by_name)))
        events.append(
            normal("ScalingUp", f"{before} -> {want} nodes: creating {decided.add} VM(s)")
        )
        if any(n not in old.drift_aside for n in old.aside):
            note = f"{old.message}: launching the replacement(s) before any drain"
            events.append(normal("Expiring", note))
        if old.drift_aside:
            note = f"{old.drifting}: launching the replacement(s) before any drain"
            events.append(normal("Drifting", note))
    surplus = [n for n in decided.retire if n not in why]
    if surplus:
        note = f"{before} -> {want} nodes: removing {', '.join(surplus)}"
        events.append(normal("ScalingDown", note))
    return replace(
        base,
        records=records,
        record=True,
        taint=tuple(taint),
        untaint=untaint(records, obs.nodes, by_instance),
        events=tuple(events),
        add=decided.add,
        retire=decided.retire,
        held=create_gate(records, holding),
    )
