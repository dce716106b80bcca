"""What a pass over a pool does, decided from what it read: pure functions, no I/O and no
clock (``now`` comes in), so every branch is tested as a table (tests/unit/nodepool_operator/
controllers/nodepool/).

:func:`decide` is the pass's plan (:class:`Decision`): the records as they will be written
before any cloud call (adoptions, retirements, new intents), the Nodes to taint first, the
Events, and when to look again. The convergence that follows (:mod:`.act`) asks the
functions below at each step whose input is the answer of a call made in that pass: what to
do with a Node being retired (:func:`termination`, :func:`before_drain`, :func:`after_drain`),
which records follow their VM (:func:`adoption`), what is garbage (:func:`garbage`), the
status (:func:`status`) and when to requeue (:func:`requeue_after`). A deleted pool has its
own pair: :func:`plan_deletion` and :func:`deletion_outcome`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from nodepool_operator.api import DisruptionStatus, InstanceRecord, NodePool
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers._blocked import (
    SCALE_DOWN_BLOCKED,
    blocked_nodes,
    keep_blocked,
    switches,
)
from nodepool_operator.controllers._node_manifest import DISRUPTING_TAINT
from nodepool_operator.controllers._reserve import RESERVATION_BACKSTOP
from nodepool_operator.controllers.nodepool._budget import VOLUNTARY_REASONS, allowed_disruptions
from nodepool_operator.controllers.nodepool._drain import TERMINATING_POLL, DrainStatus
from nodepool_operator.controllers.nodepool._drain_deadline import (
    GRACE_EXPIRED,
    Condition,
    deletion_condition,
    grace_expired_note,
    remaining,
)
from nodepool_operator.controllers.nodepool._intent import CREATING, DELETING, new_intents
from nodepool_operator.controllers.nodepool._plan import Plan, desired_nodes, plan
from nodepool_operator.controllers.nodepool._pool_status import (
    CloudFailure,
    PoolStatus,
    pool_status,
)
from nodepool_operator.controllers.nodepool._repair import Unhealthy, decide_repair
from nodepool_operator.controllers.nodepool.records import NodePods, PoolNode
from nodepool_operator.scheduling import (
    ScaleDownNode,
    Unremovable,
    held_by_budgets,
    removal_order,
)
from nodepool_operator.settings import OperatorSettings

if TYPE_CHECKING:
    from nodepool_operator.controllers.nodepool.observe import Deleted, Observation

# While VMs boot: poll when the next one should be running, within these bounds.
MIN_POLL, MAX_POLL = 0.2, 5.0
# A VM past its expected boot time, or an intent to replace: look again soon.
SOON = 1.0
# A drain in progress that named no wait of its own: look again in (kubectl drain's 5 s).
# Each drain pass says when it wants the next (_drain.py: pods terminating, a
# PodDisruptionBudget refusing, a do-not-disrupt pod holding the node).
DRAIN_POLL = 5.0


@dataclass(frozen=True, slots=True)
class Event:
    """An Event on the pool (and, when ``node`` is set, the same on that Node)."""

    type: Literal["Normal", "Warning"]
    reason: str
    note: str
    about: str = ""
    """Keeps distinct findings (one per node) apart instead of aggregating them."""
    node: str = ""
    node_action: str = ""
    action: str = "Reconcile"


def warning(
    reason: str, note: str, *, about: str = "", node: str = "", action: str = "Reconcile"
) -> Event:
    """A Warning on the pool; with ``node``, the same on that Node (as ``action``)."""
    return Event("Warning", reason, note, about, node, action if node else "", "Reconcile")


def normal(reason: str, note: str, *, action: str = "Reconcile") -> Event:
    return Event("Normal", reason, note, action=action)


# -- the records ------------------------------------------------------------------------------


def live(records: Sequence[InstanceRecord]) -> list[InstanceRecord]:
    """Records of VMs that exist and stay: an id, not being removed."""
    return [r for r in records if r.instance_id and r.state != DELETING]


def desired(pool: NodePool) -> int:
    spec = pool.spec
    return desired_nodes(spec.target_nodes, spec.min_nodes, spec.max_nodes)


def node_of(r: InstanceRecord, by_instance: Mapping[str, PoolNode]) -> PoolNode | None:
    """The Node ``r``'s VM registered, found by providerID."""
    return by_instance.get(r.instance_id) if r.instance_id else None


def update(
    records: Sequence[InstanceRecord], name: str, **changes: Any
) -> tuple[InstanceRecord, ...]:
    """``records`` with the one named ``name`` changed."""
    return tuple(replace(r, **changes) if r.name == name else r for r in records)


def scaled_down(
    r: InstanceRecord, by_instance: Mapping[str, PoolNode], vms: Mapping[str, Instance]
) -> bool:
    """Whether ``r`` is being removed by a scale-down: marked deleting, its VM alive and its
    Node Ready and not deleted by someone (the other reasons to go: VM gone, Node deleted,
    never registered, not Ready)."""
    node = node_of(r, by_instance)
    alive = r.instance_id is not None and r.instance_id in vms
    return r.state == DELETING and alive and node is not None and node.scaling_down


def ready_records(
    records: Sequence[InstanceRecord], by_instance: Mapping[str, PoolNode]
) -> set[str]:
    """Records registered as a Ready node of a running VM."""
    ready = set()
    for r in live(records):
        node = node_of(r, by_instance)
        if r.state == "running" and node is not None and node.ready:
            ready.add(r.name)
    return ready


def judged_nodes(obs: Observation) -> set[str]:
    """The Nodes whose pods the pass must read: all of the pool's when a scale-down may be
    looked at (more VMs than desired, or a scale-down under way whose choice a blocker may
    now hold); none otherwise."""
    records = obs.pool.status.instances
    by_instance = obs.by_instance()
    retiring = any(scaled_down(r, by_instance, obs.vms) for r in records)
    if len(live(records)) > desired(obs.pool) or retiring:
        return set(obs.nodes)
    return set()


def choosing(obs: Observation) -> bool:
    """Whether the pass has Nodes to choose for a scale-down (more live VMs than desired):
    then whose pods a PodDisruptionBudget lets go now is read too."""
    return len(live(obs.pool.status.instances)) > desired(obs.pool)


# -- the plan ---------------------------------------------------------------------------------


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
class Leaving:
    """Records that must be replaced, and what the repair threshold holds back."""

    why: Mapping[str, tuple[str, str]]
    """The Event (reason, note) that says why, by record."""
    waits: tuple[float, ...] = ()
    repair_blocked: str = ""
    repair_held: tuple[str, ...] = ()


def repair_toleration(pool: NodePool, settings: OperatorSettings) -> float:
    toleration = pool.spec.disruption.repair.toleration
    return toleration.total_seconds() if toleration is not None else settings.node_repair_seconds


def leaving(
    obs: Observation,
    records: Sequence[InstanceRecord],
    now: float,
    settings: OperatorSettings,
) -> Leaving:
    """Records that must be replaced: VM gone, Node deleted by someone, no Node registered
    within ``registration_timeout_seconds``, or unhealthy past the repair toleration
    (:mod:`._repair`: one at a time, none while too much of the pool is unhealthy)."""
    by_instance = obs.by_instance()
    why: dict[str, tuple[str, str]] = {}
    waits: list[float] = []
    unhealthy: list[Unhealthy] = []
    timeout = settings.registration_timeout_seconds
    for r in live(records):
        vm = obs.vms.get(r.instance_id or "")
        if vm is None:
            why[r.name] = ("VMGone", f"the VM of {r.name} is gone; replacing it")
            continue
        node = node_of(r, by_instance)
        if node is not None and node.deleting:
            why[r.name] = ("NodeDeleted", f"node {node.name} of {r.name} was deleted; replacing it")
        elif node is None and vm.state == "running":
            due = (vm.launched_at or vm.created_at) + timeout - now
            if due <= 0:
                note = f"VM {vm.id} ({r.name}) registered no Node within {timeout:g}s; replacing it"
                why[r.name] = ("RegistrationTimeout", note)
            else:
                waits.append(due)
        elif node is not None and vm.state == "running" and node.unhealthy is not None:
            unhealthy.append(Unhealthy(r.name, node.name, *node.unhealthy))
    for r in records:  # the ones being repaired count, and are the one at a time
        node = node_of(r, by_instance)
        alive = r.instance_id is not None and r.instance_id in obs.vms
        if r.state != DELETING or node is None or not alive or node.deleting:
            continue
        if node.unhealthy is not None:
            unhealthy.append(Unhealthy(r.name, node.name, *node.unhealthy, repairing=True))
    toleration = repair_toleration(obs.pool, settings)
    pool_nodes = sum(1 for r in live(records) if node_of(r, by_instance) is not None)
    pool_nodes += sum(1 for u in unhealthy if u.repairing)
    decided = decide_repair(
        unhealthy,
        pool_nodes=pool_nodes,
        toleration=toleration,
        max_unhealthy_percent=obs.pool.spec.disruption.repair.max_unhealthy_percent,
        now=now,
    )
    for u in decided.replace:
        note = (
            f"node {u.node} of {u.record} unhealthy ({u.why}) for more than "
            f"{toleration:g}s; draining and replacing it"
        )
        why[u.record] = ("NodeRepair", note)
    if decided.wait is not None:
        waits.append(decided.wait)
    return Leaving(why, tuple(waits), decided.message, decided.held)


def resting(
    obs: Observation, records: Sequence[InstanceRecord], now: float
) -> tuple[frozenset[str], tuple[float, ...]]:
    """The live records whose Node's scale-down drain timed out less than
    :data:`._drain_deadline.RECHECK_SECONDS` ago, and when each may be chosen again."""
    by_instance = obs.by_instance()
    names, waits = set(), []
    for r in live(records):
        node = node_of(r, by_instance)
        rest = node.resting(now) if node is not None else 0.0
        if rest > 0:
            names.add(r.name)
            waits.append(rest)
    return frozenset(names), tuple(waits)


@dataclass(frozen=True, slots=True)
class Removal:
    """A scale-down's view of the pool, by record."""

    order: tuple[str, ...] = ()
    """The live records that have a Node, best to remove first, blocked ones last."""
    blocked: Mapping[str, Unremovable] = field(default_factory=dict)
    """What keeps each blocked Node from a scale-down, by record."""
    removable: tuple[str, ...] = ()
    """Records whose Node can go now without leaving a pod without a place, best first."""
    empty: frozenset[str] = frozenset()
    """Records whose Node runs no workload pod (a scale-down of it is reason ``Empty``)."""


def _untainted(node: ScaleDownNode) -> ScaleDownNode:
    """``node`` without the disrupting taint: as it would be if kept."""
    return replace(node, taints=tuple(t for t in node.taints if t.key != DISRUPTING_TAINT.key))


def removal(
    obs: Observation, records: Sequence[InstanceRecord], *, keeping: bool = False
) -> Removal:
    """The live records that have a Node, best to remove first (one rule with the
    Autoscaler's scale-down: :func:`~nodepool_operator.scheduling.removal_order`, the Nodes
    the Autoscaler named unneeded first among those that can go, and of those the ones whose
    pods a PodDisruptionBudget lets go now before the ones it would hold, blocked Nodes
    last), what
    blocks each Node (the scale-down's own choices included: a blocker may
    turn up after the choice), and which live ones can go now.

    ``keeping``: as if the blocked Nodes being scaled down were kept (untainted, their room
    there for the pods of the others), to find what can go instead of them."""
    by_instance = obs.by_instance()
    live_names = {r.name for r in live(records)}
    record_of: dict[str, str] = {}
    for r in records:
        node = node_of(r, by_instance)
        if node is not None and (r.name in live_names or scaled_down(r, by_instance, obs.vms)):
            record_of[node.name] = r.name
    judged: list[NodePods] = [
        obs.pods[name] for name in obs.nodes if name in record_of and name in obs.pods
    ]
    nodes = [p.view for p in judged]
    empty = frozenset(record_of[p.view.name] for p in judged if p.empty)
    holds = {name: n.hold for name, n in obs.nodes.items()}
    blocked = blocked_nodes(nodes, holds, switches=switches(obs.pool), budgets=obs.budgets)
    candidates = [n for n in nodes if record_of[n.name] in live_names]
    if keeping:
        candidates += [
            _untainted(n)
            for n in nodes
            if record_of[n.name] not in live_names and n.name in blocked
        ]
    named = {name for name, n in obs.nodes.items() if n.unneeded}
    held = {n.name for n in candidates if held_by_budgets(n.pods, obs.budgets)}
    order = removal_order(candidates, threshold=1.0, blockers=blocked, prefer=named, held=held)
    return Removal(
        order=tuple(record_of[d.node] for d in order if record_of[d.node] in live_names),
        blocked={record_of[name]: why for name, why in blocked.items()},
        removable=tuple(record_of[d.node] for d in order if d.removable),
        empty=empty,
    )


def keep_held(
    obs: Observation, records: Sequence[InstanceRecord], resting: Collection[str]
) -> tuple[tuple[InstanceRecord, ...], list[Event], frozenset[str]]:
    """Nodes chosen for a scale-down that a blocker now holds go back to the pool when
    another Node can go instead (:func:`._blocked.keep_blocked`); the plan that follows then
    picks that one. The records, the Events, and the records whose Node is empty."""
    by_instance = obs.by_instance()
    retiring = [r.name for r in records if scaled_down(r, by_instance, obs.vms)]
    if not retiring:
        return tuple(records), [], frozenset()
    seen = removal(obs, records, keeping=True)
    alternatives = [name for name in seen.removable if name not in resting]
    kept = keep_blocked(retiring, seen.blocked, alternatives)
    by_name = {r.name: r for r in records}
    out = tuple(records)
    events = []
    for name in kept:
        r = by_name[name]
        vm = obs.vms.get(r.instance_id or "")
        out = update(out, name, state=vm.state if vm is not None else "running")
        note = f"{seen.blocked[name].note}; kept, another node is removed instead"
        node = node_of(r, by_instance)
        events.append(
            warning(SCALE_DOWN_BLOCKED, note, node=node.name if node else "", action="ScaleDown")
        )
    return out, events, seen.empty


def disrupting(
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> int:
    """The pool's Nodes being disrupted, as the cluster says (taint, deletionTimestamp) or as
    this pass decided (a record marked deleting whose Node is not tainted yet)."""
    chosen = {
        node.name
        for r in records
        if r.state == DELETING and (node := node_of(r, by_instance)) is not None
    }
    return sum(1 for name, n in nodes.items() if n.disrupting or name in chosen)


def disruption_status(
    pool: NodePool,
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> DisruptionStatus:
    """``status.disruption``: Nodes being disrupted, and how many more may start now for any
    reason (the least over the reasons a budget can name)."""
    count = disrupting(records, nodes, by_instance)
    budgets = pool.spec.disruption.budgets
    allowed = min(
        allowed_disruptions(budgets, len(nodes), count, reason, None)
        for reason in VOLUNTARY_REASONS
    )
    return DisruptionStatus(disrupting=count, allowed=allowed)


def within_budget(
    obs: Observation,
    records: Sequence[InstanceRecord],
    decided: Plan,
    leaving: Collection[str],
    empty: Collection[str],
) -> tuple[Plan, tuple[str, ...]]:
    """``decided`` with its voluntary removals of registered Nodes cut to what
    ``spec.disruption.budgets`` allows now (:mod:`._budget`), the Nodes already being
    disrupted counted from the cluster (taint or deletionTimestamp), so a restart changes
    nothing. A VM with no Node yet and what is leaving anyway (VM gone, Node deleted, not
    Ready) are not budgeted; the surplus held back goes on a later pass. Also the held."""
    by_instance = obs.by_instance()
    budgets = obs.pool.spec.disruption.budgets
    count, pool_nodes = disrupting(records, obs.nodes, by_instance), len(obs.nodes)
    by_name = {r.name: r for r in records}
    retire: list[str] = []
    held: list[str] = []
    for name in decided.retire:
        if name in leaving or node_of(by_name[name], by_instance) is None:
            retire.append(name)
            continue
        reason = "Empty" if name in empty else "Underutilized"
        if allowed_disruptions(budgets, pool_nodes, count, reason, None) > 0:
            retire.append(name)
            count += 1
        else:
            held.append(name)
    return replace(decided, retire=tuple(retire)), tuple(held)


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
    decided = plan(records, want, gone=gone.why, order=order, keep=keep)
    decided, held = within_budget(obs, records, decided, gone.why, empty)
    by_instance = obs.by_instance()
    before = len(live(records))
    base = Decision(
        records=records,
        record=adopted or bool(kept_events),
        events=tuple(events),
        waits=gone.waits + rest_waits,
        resting=rest,
        repair_blocked=gone.repair_blocked,
        repair_held=gone.repair_held,
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
        if name in gone.why:
            reason, note = gone.why[name]
            events.append(warning(reason, note, about=name))
    if decided.add:
        records += tuple(new_intents(obs.pool.metadata.name, decided.add, taken=set(by_name)))
        events.append(
            normal("ScalingUp", f"{before} -> {want} nodes: creating {decided.add} VM(s)")
        )
    surplus = [n for n in decided.retire if n not in gone.why]
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


def untaint(
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
) -> tuple[str, ...]:
    """Nodes tainted for removal whose record is not being retired, and not deleted."""
    retiring = set()
    for r in records:
        node = node_of(r, by_instance) if r.state == DELETING else None
        if node is not None:
            retiring.add(node.name)
    return tuple(
        name
        for name, node in nodes.items()
        if name not in retiring and not node.deleting and node.tainted
    )


# -- a record being retired ---------------------------------------------------------------------


def termination(node: PoolNode | None, alive: bool) -> Literal["drain", "remove"]:
    """Whether a retiring record's Node is drained before its VM goes, as Karpenter's
    termination does. A Node whose VM is gone, or that someone deleted while it is not
    Ready, is not (its pods could never finish terminating; the pod garbage collector
    deletes pods bound to a Node that no longer exists). A Node being repaired (not Ready)
    is, for at most drainTimeout."""
    if node is not None and alive and (node.ready or not node.deleting):
        return "drain"
    return "remove"


def before_drain(node: PoolNode, now: float) -> Literal["give_up", "taint", "drain"]:
    """A scale-down's Node found untainted while it rests: given up already, the record's
    write lost (a crash): keep it, do not re-taint. Otherwise taint it first if it is not."""
    if node.scaling_down and not node.tainted and node.resting(now):
        return "give_up"
    return "drain" if node.tainted else "taint"


class Verdict(Enum):
    DONE = "done"
    """Drained: its VM and Node go."""
    WAIT = "wait"
    """Still draining: look again later."""
    GIVE_UP = "give_up"
    """A scale-down past drainTimeout: the Node is kept, untainted, and rests."""
    FORCE = "force"
    """A repair past drainTimeout: its kubelet is unreachable, so evicted pods may never
    finish terminating; the Node goes with them (as a pool deletion past its grace)."""


def after_drain(node: PoolNode, status: DrainStatus, timeout: timedelta, now: float) -> Verdict:
    """What one round of draining ``node`` leads to."""
    if status.done:
        return Verdict.DONE
    overdue = remaining(node.disrupting_since, timeout, now) <= 0
    if node.scaling_down and overdue:
        return Verdict.GIVE_UP
    if not node.scaling_down and overdue and not node.ready:
        return Verdict.FORCE
    return Verdict.WAIT


# -- the rest of a pass ---------------------------------------------------------------------------


def to_restart(
    records: Sequence[InstanceRecord], vms: Mapping[str, Instance]
) -> list[tuple[str, Instance]]:
    """Live records whose VM was stopped (outside the operator): start it."""
    out = []
    for r in live(records):
        vm = vms.get(r.instance_id or "")
        if vm is not None and vm.state == "stopped":
            out.append((r.name, vm))
    return out


@dataclass(frozen=True, slots=True)
class Adoption:
    record: str
    vm: Instance
    node: PoolNode | None
    """Its Node, to bring in line with the pool (None: not registered, or deleted)."""
    registered: bool
    """Its Node registered since the last pass (a ``Registered`` Event)."""
    node_name: str | None


def adoption(
    records: Sequence[InstanceRecord],
    vms: Mapping[str, Instance],
    by_instance: Mapping[str, PoolNode],
) -> list[Adoption]:
    """A live record's Node, found by providerID, is the pool's; the record follows its VM's
    state. A record whose VM is gone is left to the next pass (it retires it)."""
    out = []
    for r in live(records):
        vm = vms.get(r.instance_id or "")
        if vm is None:
            continue
        node = node_of(r, by_instance)
        synced = node if node is not None and not node.deleting else None
        out.append(
            Adoption(
                record=r.name,
                vm=vm,
                node=synced,
                registered=synced is not None and r.node_name is None,
                node_name=node.name if node is not None else None,
            )
        )
    return out


def backstop_due(node: PoolNode, now: float, landing_grace: float) -> float | None:
    """Seconds until a reserved Node's reservation is lifted by the backstop (≤ 0: now), or
    None when it has none or is not Ready. The Autoscaler lifts it once its planned pods are
    bound; should none do it, the Node opens :data:`RESERVATION_BACKSTOP` landing graces after
    it became Ready, so a pool never keeps a node no pod may use."""
    if not node.reserved or not node.ready:
        return None
    return RESERVATION_BACKSTOP * landing_grace - (node.ready_for(now) or 0.0)


@dataclass(frozen=True, slots=True)
class Garbage:
    vms: tuple[Instance, ...] = ()
    """VMs tagged for the pool that no record knows, past the grace period."""
    wait: float | None = None
    """Seconds until the next such VM's grace period ends."""
    nodes: tuple[str, ...] = ()
    """Nodes of the pool whose VM is neither recorded nor alive."""


def garbage(
    records: Sequence[InstanceRecord],
    listed: Sequence[Instance],
    removed: Collection[str],
    nodes: Mapping[str, PoolNode],
    now: float,
    grace: float,
) -> Garbage:
    """What no record knows: VMs tagged with the pool's uid older than ``grace`` (a VM just
    created may not be recorded yet), and Nodes labelled for the pool (a leaked VM's Node
    stays until that VM is adopted or collected)."""
    known = {r.instance_id for r in records if r.instance_id} | set(removed)
    intents = {r.name for r in records if not r.instance_id}  # ids not back yet
    vms, wait = [], math.inf
    for vm in listed:
        if vm.id in known or vm.name in intents:
            continue
        age = now - vm.created_at
        if age < grace:
            wait = min(wait, grace - age)
        else:
            vms.append(vm)
    recorded = {r.instance_id for r in records if r.instance_id}
    alive = {vm.id for vm in listed if vm.id not in removed}
    orphans = tuple(
        name
        for name, node in nodes.items()
        if node.instance_id not in recorded
        and node.instance_id not in alive
        and name not in intents
    )
    return Garbage(tuple(vms), None if wait == math.inf else wait, orphans)


def status(
    pool: NodePool,
    records: Sequence[InstanceRecord],
    nodes: Mapping[str, PoolNode],
    by_instance: Mapping[str, PoolNode],
    *,
    failure: CloudFailure | None,
    dropped: frozenset[str],
    held: Sequence[str],
    repair_blocked: str,
) -> PoolStatus:
    """The pool's status after (or during) a pass."""
    spec = pool.spec
    return pool_status(
        name=pool.metadata.name,
        generation=pool.metadata.generation,
        target=spec.target_nodes,
        desired=desired(pool),
        min_nodes=spec.min_nodes,
        records=records,
        ready=ready_records(records, by_instance),
        failure=failure,
        dropped=dropped,
        held=held,
        repair_blocked=repair_blocked,
        disruption=disruption_status(pool, records, nodes, by_instance),
    )


def requeue_after(
    *,
    pool: NodePool,
    records: Sequence[InstanceRecord],
    vms: Mapping[str, Instance],
    waits: Sequence[float],
    draining: bool,
    drain_wait: float | None,
    gc_wait: float | None,
    gate_remaining: float | None,
    resting: bool,
    now: float,
    settings: OperatorSettings,
) -> float:
    """When to look at the pool again: the soonest of what is due, and after one garbage
    grace period when idle (to look for leaked VMs again)."""
    out = [settings.gc_grace_seconds, *(max(w, MIN_POLL) for w in waits)]
    if draining:
        out.append(DRAIN_POLL if drain_wait is None else max(drain_wait, MIN_POLL))
    booting = [
        vm
        for r in live(records)
        if (vm := vms.get(r.instance_id or "")) is not None and vm.state == "pending"
    ]
    if booting:
        eta = min(vm.created_at for vm in booting) + settings.boot_seconds - now
        out.append(min(max(eta if eta > 0 else SOON, MIN_POLL), MAX_POLL))
    if gc_wait is not None:
        out.append(max(gc_wait, MIN_POLL))
    if gate_remaining is not None:
        out.append(max(gate_remaining, MIN_POLL))
    elif not booting and len(live(records)) != desired(pool) and not resting:
        out.append(SOON)  # e.g. an intent dropped for a spent token
    return min(out)


# -- a pool being deleted -----------------------------------------------------------------------


Step = Literal["drain", "force", "remove"]


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """One pass over a deleted pool's Nodes, all at once (each Node's pods are paced by
    their PodDisruptionBudgets, not by the pool)."""

    expired: bool
    """``terminationGracePeriod`` is over: Nodes go with the pods left on them."""
    left: float
    """Seconds of it left."""
    taint: tuple[str, ...] = ()
    """Nodes to taint before any is drained: a pod evicted from one must not land on
    another about to be drained (it would be evicted twice)."""
    steps: tuple[tuple[PoolNode, Step], ...] = ()
    """Each Node and what happens to it: drained (then removed once no workload pod is
    left), removed with the pods still on it (counted first), or removed at once."""


def plan_deletion(deleted: Deleted, now: float) -> DeletionPlan:
    """Taint, evict, and delete each Node and its VM once no workload pod is left, as a
    scale-down does; only the pods' own holds apply (as for ``kubectl delete node``). A Node
    that is not Ready or whose VM is gone is not drained (its pods could never finish
    terminating). Past the grace period, each Node goes with the pods left on it (the pod
    garbage collector deletes pods bound to a Node that is gone)."""
    left = remaining(deleted.deleted_at, deleted.grace, now)
    expired = left <= 0

    def drainable(node: PoolNode) -> bool:
        return node.instance_id in deleted.alive and node.ready

    taint = (
        () if expired else tuple(n.name for n in deleted.nodes if drainable(n) and not n.tainted)
    )
    steps: list[tuple[PoolNode, Step]] = []
    for node in deleted.nodes:
        if not drainable(node):
            steps.append((node, "remove"))
        else:
            steps.append((node, "force" if expired else "drain"))
    return DeletionPlan(expired=expired, left=left, taint=taint, steps=tuple(steps))


def waiting_for(node_name: str, status: DrainStatus) -> str:
    """What a drain waits for, in words that do not change from one pass to the next while
    it waits for the same thing (the pool's Deleting condition is not rewritten each pass)."""
    if status.blocked_by is not None:
        return status.message
    if status.pdb_blocked:
        return f"node {node_name}: {status.pdb_blocked} pod(s) held by a PodDisruptionBudget"
    return f"node {node_name}: pods terminating"


def untainted_wait(node_name: str) -> tuple[str, float]:
    """A Node the taint patch missed (changed under it, or gone): taint it on a fresh read
    first; what it waits for, and when to look again."""
    return f"node {node_name}: pods terminating", TERMINATING_POLL


@dataclass(frozen=True, slots=True)
class DeletionOutcome:
    terminate: tuple[str, ...]
    """VM ids to terminate now (all but those of Nodes still draining)."""
    condition: Condition | None
    """The pool's Deleting condition to write, if any."""
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    """Still draining: look again then. None: the finalizer goes."""


def deletion_outcome(
    deleted: Deleted,
    decided: DeletionPlan,
    draining: Mapping[str, tuple[str, str]],
    waits: Sequence[float],
    forced: Mapping[str, int],
) -> DeletionOutcome:
    """After the pass over a deleted pool's Nodes: which VMs go, the condition, the Events,
    and whether the finalizer goes. ``draining``: each Node still draining (its VM's id and
    what it waits for); ``forced``: the pods left per Node past the grace period."""
    keep = {instance_id for instance_id, _ in draining.values()}
    terminate = tuple(sorted(deleted.ids - keep))
    grace = deleted.grace
    if draining:
        notes = {node: note for node, (_, note) in draining.items()}
        return DeletionOutcome(
            terminate,
            deletion_condition(notes, grace, expired=False),
            requeue_after=max(min([*waits, decided.left]), MIN_POLL),
        )
    events: list[Event] = []
    condition = None
    if forced:
        events.append(
            Event("Warning", GRACE_EXPIRED, grace_expired_note(grace, forced), action="Delete")
        )
        notes = {node: f"node {node}: {n} pod(s) not evicted" for node, n in forced.items()}
        condition = deletion_condition(notes, grace, expired=True)
    note = f"deleted {len(deleted.nodes)} node(s) and {len(deleted.ids)} VM(s)"
    events.append(normal("Deleted", note, action="Delete"))
    return DeletionOutcome(terminate, condition, tuple(events))
