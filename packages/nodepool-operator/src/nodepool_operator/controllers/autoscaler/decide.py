"""Decide: what one Autoscaler does about what it observed. Pure: an
:class:`~.observe.Observation`, the Autoscaler's :class:`Memory` and the time in, a
:class:`Decision` out (the one target write, the Events, the status, the reservation patches
and the memory to keep). Nothing here reads the API or the clock.

The steps, as cluster-autoscaler and Karpenter order them:

1. set aside the candidates that wait on a missing Secret, ConfigMap or claim, or below the
   priority cutoff (:mod:`._pending`), those a planned new node did not take, those still
   settling onto new Ready nodes (:mod:`._landing`) and those another Autoscaler watching
   their namespace scales for (:mod:`._choice`: weight, then least waste, then name);
2. follow the pool's in-flight nodes (:mod:`._provision`): when they made no progress for the
   max provision time, the target goes back to the registered nodes and scale-up backs off;
3. plan by simulation (:func:`~nodepool_operator.scheduling.plan_scale_up`): room on the
   pool's nodes, then its booting nodes (target minus registered), then new template nodes,
   within the smaller of the two maxNodes; a plan that needs new nodes raises the target
   (not while backing off); else, with scale-down on, nodes unneeded for
   ``scaleDownUnneededTime`` lower it (nodes a blocker keeps never are, :mod:`._blocked`),
   each named on its Node first so the NodePool controller removes those
   (:mod:`.._unneeded`); when no node is unneeded by the threshold rule, with
   ``scaleDownConsolidation`` on, those a consolidation frees are (the pool's pods on fewer
   nodes, as many at once as its disruption budget allows:
   :func:`~nodepool_operator.scheduling.consolidate`); when no node can go that way though the
   pool is above its optimum, a replacement: nodes traded for fewer new ones, the target raised
   first and lowered once the new nodes are Ready (:mod:`._replacing`);
4. tell: the status (:mod:`._status`), TriggeredScaleUp / ScaleDown / NotTriggerScaleUp /
   ProvisionTimedOut / ScaleDownBlocked Events, each distinct one once (:mod:`._report`);
5. for a pool with ``reserveNewNodes`` (deprecated), let each planned pod onto its reserved
   node and open a reserved node once its pods are bound (:mod:`._reserve`).

After the target write, :func:`nominate` nominates each pod the plan put on a new node to that
node once it has registered (:mod:`._nominations`: a write to the pod's status, the default).

One pass writes at most one target: a provisioning timeout's lowering excludes a raise or a
scale-down in the same pass (the next pass plans against the lowered target).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Final

from nodepool_operator.api import MAX_POOL_NODES, NodePool
from nodepool_operator.controllers._blocked import SCALE_DOWN_BLOCKED, blocked_nodes, switches
from nodepool_operator.controllers._node_fields import JsonPatch, NodeFields, node_fields
from nodepool_operator.controllers._node_manifest import open_for, ready_for
from nodepool_operator.controllers._reserve import (
    Reservation,
    lets_on,
    lift_due,
    lift_patch,
)
from nodepool_operator.controllers._unneeded import mark_patch, rest_left, unmark_patch
from nodepool_operator.controllers.autoscaler._choice import option, served_elsewhere
from nodepool_operator.controllers.autoscaler._landing import Landing
from nodepool_operator.controllers.autoscaler._nominations import (
    Nomination,
    in_queue_order,
    lead_kind,
    nominations,
)
from nodepool_operator.controllers.autoscaler._provision import (
    Provisioning,
    observe,
    requested,
    timed_out,
)
from nodepool_operator.controllers.autoscaler._replacing import (
    REST_FACTOR,
    Layout,
    Replacing,
    layout,
    replace_note,
    replace_text,
    under_way,
)
from nodepool_operator.controllers.autoscaler._report import (
    Note,
    Reported,
    Subject,
    not_triggered,
    scaled,
)
from nodepool_operator.controllers.autoscaler._status import (
    PROVISION_TIMED_OUT,
    PROVISIONING,
    PROVISIONING_OK,
    READY,
    WATCHING,
    ConditionChange,
    StatusChange,
    unremovable,
)
from nodepool_operator.controllers.autoscaler._texts import (
    NotTriggered,
    decision_text,
    next_unneeded_due,
    scale_down_target,
    scale_down_text,
    set_aside,
    track_unneeded,
)
from nodepool_operator.controllers.autoscaler.observe import Observation, PendingPod
from nodepool_operator.controllers.nodepool import allowed_disruptions
from nodepool_operator.scheduling import (
    ZONE_KEY,
    Booting,
    Consolidation,
    Existing,
    FitReason,
    New,
    PodRef,
    PodView,
    RemovalReason,
    Replacement,
    ScaleUpPlan,
    Unremovable,
    consolidate,
    crowded_out,
    held_by_budgets,
    plan_scale_up,
    removal_order,
    with_volume_zones,
)

__all__ = [
    "Clock",
    "Decision",
    "Grant",
    "Knobs",
    "Lift",
    "Mark",
    "Memory",
    "Nominated",
    "Nomination",
    "TargetWrite",
    "Why",
    "decide",
    "nominate",
    "settle",
]


@dataclass
class Memory:
    """What one Autoscaler's reconciles remember between runs. Lost on a restart, harmlessly:
    the next look plans again, empty nodes start their unneeded time again, in-flight nodes
    get a full provision time again, not-taken pods one more node and each current reason
    one more Event."""

    planned_at: float | None = None
    unneeded_since: dict[str, float] = field(default_factory=dict)
    provisioning: Provisioning = field(default_factory=Provisioning)
    landing: Landing = field(default_factory=Landing)
    reservation: Reservation = field(default_factory=Reservation)
    blocked: dict[str, Unremovable] = field(default_factory=dict)
    """What keeps each blocked node of the pool from scale-down, as last reported."""
    reported: Reported = field(default_factory=Reported)
    gathering: tuple[float, int] | None = None
    """Until when (on the controller's clock) a pass found a burst still gathering, with the
    Autoscaler's generation it read: see ``AutoscalerController._still_gathering``."""
    replacing: Replacing | None = None
    """A consolidation's replacement under way (:mod:`._replacing`)."""
    replace_after: float | None = None
    """No replacement starts before then: one was dropped (:data:`._replacing.REST_FACTOR`)."""
    replace_failed: Layout | None = None
    """The pool's workload when a replacement was dropped with the pool no smaller: none
    starts again while it is the same (:func:`._replacing.layout`)."""

    def copy(self) -> Memory:
        """A copy a decision may change without touching this one: its containers are new,
        what they hold is immutable (so no deep copy of the node template each pass)."""
        landing, reservation = self.landing, self.reservation
        return replace(
            self,
            unneeded_since=dict(self.unneeded_since),
            landing=replace(
                landing,
                awaiting=dict(landing.awaiting),
                not_taken=set(landing.not_taken),
                settling=set(landing.settling),
            ),
            reservation=replace(
                reservation,
                slots=list(reservation.slots),
                names=dict(reservation.names),
                granted=set(reservation.granted),
            ),
            blocked=dict(self.blocked),
        )


@dataclass(frozen=True, slots=True)
class Knobs:
    """The operator's settings a decision depends on (seconds)."""

    batch_window: float = 1.0
    landing_grace: float = 30.0
    gate_hold: float = 5.0
    """How long the first Ready gated node of a scale-up waits for the others' before the
    gates fall (together; :mod:`._nominations`)."""
    max_node_provision: float = 900.0
    scale_up_backoff: float = 300.0
    utilization_threshold: float = 0.5


@dataclass(frozen=True, slots=True)
class Clock:
    """Now: ``mono`` on the monotonic clock the memory's times use; ``wall`` on the wall
    clock (Node Ready times, ``lastScaleTime``)."""

    mono: float
    wall: datetime


class Why(StrEnum):
    """What a target write is for."""

    SCALE_UP = "ScaleUp"
    SCALE_DOWN = "ScaleDown"
    PROVISION_TIMEOUT = "ProvisionTimedOut"
    REPLACE = "Replace"
    """A raise for a consolidation's new nodes, the nodes they replace drained after."""


@dataclass(frozen=True, slots=True)
class TargetWrite:
    """Set the pool's target from ``expected`` (what the decision was made from) to
    ``desired``; ``summary``: what for, as logged. ``zone_targets``: the pool's
    ``spec.zoneTargets`` to write with it, in the same write (``None``: left as they are)."""

    expected: int
    desired: int
    why: Why
    summary: str
    zone_targets: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """Let pod ``pod`` (key; ``view``: the pod as observed) onto reserved node ``node``: the
    act adds the toleration of that node (:func:`.._reserve.toleration_patch`)."""

    pod: str
    node: str
    view: PodView


@dataclass(frozen=True, slots=True)
class Lift:
    """Open reserved Node ``node`` (reserved as ``name``) to every pod."""

    node: str
    name: str
    patch: JsonPatch


@dataclass(frozen=True, slots=True)
class Nominated:
    """What :func:`nominate` asks of the act: the nominations, then the gated nodes to open
    once every nomination took, and the seconds until a slot's grace ends (``None``: none
    counting down)."""

    writes: tuple[Nomination, ...]
    opens: tuple[Lift, ...]
    due: float | None
    held: tuple[tuple[str, str], ...] = ()
    """(pod key, node) the nominations stand for once the nodes are open."""


@dataclass(frozen=True, slots=True)
class Mark:
    """Name Node ``node`` unneeded (``on``, since ``since``, seconds since the epoch) or take
    the name off (:mod:`.._unneeded`), written before the target. ``fields``: the Node as the
    cache has it, which the guarded patch is built from (:meth:`patch`)."""

    node: str
    on: bool
    since: float
    fields: NodeFields

    def patch(self, fields: NodeFields | None = None) -> JsonPatch:
        """The JSON patch, from ``fields`` (a fresher read) or the cache's."""
        node = self.fields if fields is None else fields
        return mark_patch(node, self.since) if self.on else unmark_patch(node)


@dataclass(frozen=True, slots=True)
class Decision:
    """What one pass does. ``memory`` is what to remember once the writes are made
    (:func:`settle` adds what the reservation patches achieved)."""

    target: TargetWrite | None
    status: StatusChange
    events: tuple[Note, ...]
    grants: tuple[Grant, ...]
    lifts: tuple[Lift, ...]
    memory: Memory
    requeue_after: float
    plan: ScaleUpPlan
    marks: tuple[Mark, ...] = ()


def decide(obs: Observation, memory: Memory, now: Clock, knobs: Knobs) -> Decision:
    """The pass's decision; ``memory`` is not changed (the decision carries the new one)."""
    m = memory.copy()
    m.planned_at = now.mono
    keys = {p.ref: p.key for p in obs.candidates}
    landing_due, aside, eligible, settling = _set_aside(obs, m, now.mono, knobs)
    timeout = _follow_provisioning(obs, m, now.mono, knobs)
    plan, write = _scale(
        obs, m, eligible, now, knobs, may_write=timeout is None, settling=bool(settling)
    )
    outcome = _outcome(obs, m, plan, write, timeout, keys, memory.blocked, now)
    said, m.reported = not_triggered(m.reported, (*_plan_groups(plan), *aside), keys)
    grants, lifts, lift_in = _hold_reservations(obs, m, now, knobs)
    backing_off = m.provisioning.backing_off(now.mono)
    text = decision_text(
        plan.summary,
        plan.current_target,
        aside,
        planned=bool(plan.placements or plan.unschedulable),
        head=outcome.head,
        settling=len(settling),
        consolidation=_replace_note(obs, m, now.mono),
    )
    return Decision(
        target=outcome.write,
        status=_status(obs, text, outcome.scaled_at, m, backing_off, knobs),
        events=(*outcome.events, *said),
        grants=grants,
        lifts=lifts,
        memory=m,
        requeue_after=_requeue(obs, m, now.mono, knobs, lift_in, landing_due),
        plan=plan,
        marks=_marks(obs, m, now),
    )


def settle(memory: Memory, granted: Sequence[tuple[str, str]], opened: Sequence[str]) -> Memory:
    """``memory`` after the reservation patches: the tolerations written (pod key, node), the
    reserved nodes opened (by reserved name)."""
    memory.reservation.granted.update(granted)
    memory.reservation.forget(opened)
    return memory


# --- step 1: who drives the plan ----------------------------------------------------------


def _set_aside(
    obs: Observation, m: Memory, now: float, knobs: Knobs
) -> tuple[float | None, tuple[NotTriggered, ...], list[PendingPod], set[PodRef]]:
    """The landing guard's next due time, the groups set aside, the pods left to plan for,
    and the refs of pods settling onto new Ready nodes."""
    pods = {p.key: p for p in obs.candidates}
    stuck = [(p.ref, why) for p in obs.candidates if (why := obs.lookup.blocker(p.view))]
    if obs.template != m.landing.template:  # verdicts were for another node template
        m.landing = Landing(template=obs.template)
    landing_due = m.landing.look(
        candidates=pods.keys(),
        ready=obs.nodes.ready,
        registered=obs.nodes.registered,
        now=now,
        grace=knobs.landing_grace,
    )
    # Interchangeable pods: the scheduler may have bound others to the planned nodes.
    held = m.landing.excluded(pods) | m.landing.waiting(pods)
    m.landing.release(u for u in held if crowded_out(pods[u].view, obs.nodes.room))
    not_taken = sorted(pods[u].ref for u in m.landing.excluded(pods))
    settling = {pods[u].ref for u in m.landing.waiting(pods)}
    left_out = {ref for ref, _ in stuck} | set(not_taken) | settling
    eligible = [p for p in obs.candidates if p.ref not in left_out]
    elsewhere: dict[tuple[str, str], list[PodRef]] = {}
    if obs.rivals:  # alone, the pods do not even pass through the choice
        own = option(obs.scaler, obs.pool, obs.template, obs.nodes.registered)
        views = [_with_volumes(p, obs) for p in eligible]
        elsewhere = served_elsewhere(views, own, obs.rivals)
    if elsewhere:
        theirs = {ref for refs in elsewhere.values() for ref in refs}
        eligible = [p for p in eligible if p.ref not in theirs]
    aside: tuple[NotTriggered, ...] = ()
    if not_taken:
        detail = "a new node planned for it became Ready and did not take it"
        aside = (NotTriggered(str(FitReason.NOT_TAKEN), detail, tuple(not_taken)),)
    served = tuple(
        NotTriggered(reason, detail, tuple(sorted(refs)))
        for (reason, detail), refs in sorted(elsewhere.items())
    )
    return landing_due, (*aside, *set_aside(stuck), *served), eligible, settling


# --- step 2: in-flight nodes --------------------------------------------------------------


def _follow_provisioning(
    obs: Observation, m: Memory, now: float, knobs: Knobs
) -> tuple[TargetWrite, str] | None:
    """Follow the pool's in-flight nodes; when they have made no progress for the max
    provision time, stop counting them: the target goes back to the registered nodes and
    scale-up backs off. Returns that write and the decision's head."""
    spec = obs.pool.spec
    effective = max(obs.target, spec.min_nodes)
    registered = obs.nodes.registered
    m.provisioning = observe(
        m.provisioning, in_flight=effective - registered, registered=registered, now=now
    )
    refusing = cloud_refusing(obs.pool)
    # the pool says the cloud refuses its nodes: the wait has failed now, not at its end
    timeout = 0.0 if refusing else knobs.max_node_provision
    failed = timed_out(m.provisioning, now=now, timeout=timeout, backoff=knobs.scale_up_backoff)
    if failed is None:
        return None
    m.provisioning = failed
    m.reservation.drop_unnamed()  # their VMs will not come
    desired = max(registered, spec.min_nodes)
    after = desired if desired < obs.target and not obs.moved else obs.target
    wait = (failed.backoff_until or now) - now
    why = (
        f"are refused by the cloud ({refusing})"
        if refusing
        else f"did not register within {knobs.max_node_provision:g}s"
    )
    note = (
        f"NodePool {obs.pool_name}: {effective - registered} requested node(s) {why}; no "
        f"longer counted as in flight, target {obs.target} -> {after}, scale-up backed off "
        f"for {wait:g}s"
    )
    head = f"provisioning timed out: target {obs.target} -> {after}, scale-up backed off"
    return TargetWrite(obs.target, desired, Why.PROVISION_TIMEOUT, note), head


#: The NodePool's Degraded reasons that say the cloud will not launch its nodes now: every
#: type the pool may use is out of capacity or over a limit (the NodePool controller falls
#: back to another type by itself while one is left).
REFUSING_REASONS: Final = frozenset({"CapacityUnavailable", "QuotaExceeded"})


def cloud_refusing(pool: NodePool) -> str | None:
    """The pool's own word that its in-flight nodes are not coming (its ``Degraded``
    condition, for its current spec, with a capacity or quota reason): then the wait has
    failed now, not after the max provision time. None when it says nothing of the kind.
    Read here, where the plan holds the pool, not handed to another module."""
    generation = pool.metadata.generation or 0
    for c in pool.status.conditions:
        if (
            c.type == "Degraded"
            and c.status == "True"
            and c.reason in REFUSING_REASONS
            and c.observed_generation == generation
        ):
            return f"{c.reason}: {c.message}"
    return None


def _timeout_notes(note: str) -> tuple[Note, ...]:
    return tuple(
        Note(subject, PROVISION_TIMED_OUT, note, "ScaleUp", warning=True)
        for subject in (Subject.AUTOSCALER, Subject.NODEPOOL)
    )


# --- step 3: the plan and the target ------------------------------------------------------


def _plan(obs: Observation, pods: Sequence[PendingPod], m: Memory, now: float) -> ScaleUpPlan:
    """The plan against ``max(target, minNodes)``, the size the NodePool controller keeps. A
    pool backing off after a failed provisioning has no nodes in flight: its phantom nodes
    must not hide the need."""
    effective = max(obs.target, obs.pool.spec.min_nodes)
    return plan_scale_up(
        [_with_volumes(p, obs) for p in pods],
        template=obs.template,
        existing_nodes=obs.nodes.room,
        in_flight=0 if m.provisioning.backing_off(now) else effective - obs.nodes.registered,
        current_target=effective,
        max_nodes=min(obs.pool.spec.max_nodes, obs.scaler.spec.max_nodes or MAX_POOL_NODES),
        zones=obs.pool.status.zones,
        zone_targets=obs.pool.spec.zone_targets,
    )


def _with_volumes(pod: PendingPod, obs: Observation) -> PodView:
    """The pod's view with the zones of its bound volumes, when a pool with zones plans."""
    zones = obs.lookup.zones_of(pod.view) if obs.pool.status.zones else []
    return with_volume_zones(pod.view, zones) if zones else pod.view


def _zone_targets(obs: Observation, plan: ScaleUpPlan) -> dict[str, int] | None:
    """The pool's ``spec.zoneTargets`` after ``plan``'s raise, or ``None`` when they stay as
    they are: the zones the plan needs, and the targets of before still unmet (by the
    registered nodes there) while nodes are in flight, which the NodePool controller is
    still launching into those zones."""
    before = dict(obs.pool.spec.zone_targets)
    after = dict(plan.zone_targets)
    if obs.target > obs.nodes.registered:
        registered: dict[str, int] = {}
        for node in obs.nodes.room:
            zone = node.labels.get(ZONE_KEY)
            if zone is not None:
                registered[zone] = registered.get(zone, 0) + 1
        for zone, count in before.items():
            if count > registered.get(zone, 0):
                after[zone] = max(after.get(zone, 0), count)
    return None if after == before else dict(sorted(after.items()))


def _scale(
    obs: Observation,
    m: Memory,
    pods: Sequence[PendingPod],
    clock: Clock,
    knobs: Knobs,
    *,
    may_write: bool,
    settling: bool = False,
) -> tuple[ScaleUpPlan, TargetWrite | None]:
    """Raise the target if the plan needs new nodes (not while backing off); else, with
    scale-down on, lower it when nodes have been unneeded long enough (not after someone else
    moved the target), never while pods are ``settling`` onto new Ready nodes: they are left
    out of the plan, and the node that looks empty is the one they are about to land on."""
    now = clock.mono
    plan = _plan(obs, pods, m, now)
    if plan.scale_up:
        m.unneeded_since.clear()
        m.replacing = None  # its new nodes take the pods instead; the drain is decided anew
        if m.provisioning.backing_off(now) or not may_write:
            return plan, None
        return plan, TargetWrite(
            obs.target,
            plan.desired_target,
            Why.SCALE_UP,
            plan.summary,
            _zone_targets(obs, plan),
        )
    if not obs.scaler.spec.scale_down_enabled:
        m.unneeded_since.clear()
        m.blocked.clear()
        m.replacing = None
        return plan, None
    # Empty nodes, and nodes below the utilisation threshold whose pods the simulation
    # places on the others, blocked ones never: the rule the NodePool controller removes
    # nodes by.
    m.blocked = blocked_nodes(
        obs.nodes.candidates, obs.holds, switches=switches(obs.pool), budgets=obs.budgets
    )
    # a node whose pods a PodDisruptionBudget lets go now is picked before one it would
    # hold, as the NodePool controller removes them; a node whose drain timed out a short
    # while ago is picked last and not unneeded: the NodePool controller would not take it
    wall = clock.wall.timestamp()
    resting = {name for name, t in obs.drain_timed_out.items() if rest_left(t, wall) > 0}
    held = {n.name for n in obs.nodes.candidates if held_by_budgets(n.pods, obs.budgets)}
    order = removal_order(
        obs.nodes.candidates,
        threshold=knobs.utilization_threshold,
        blockers=m.blocked,
        held=held | resting,
    )
    unneeded = tuple(d.node for d in order if d.removable and d.node not in resting)
    unneeded_time = obs.scaler.spec.scale_down_unneeded_time
    consolidation = None
    rest = now + REST_FACTOR * unneeded_time.total_seconds()
    m.replacing, ended = under_way(
        m.replacing, target=obs.target, candidates={n.name for n in obs.nodes.candidates}
    )
    if ended:  # before its drain: a provisioning timeout, a hand on the target
        m.replace_after = rest
    # not settled: its new nodes boot or are not open yet (the NodePool controller would find
    # no place there for the drained pods, and remove the empty new node instead), a lowering
    # is not yet taken up (its budget is in use: the consolidation would free nothing), or
    # one of its nodes drains
    if m.replacing is not None and not _settled(obs):
        # a node registered but never Ready is not in flight: this bounds the wait
        if now - m.replacing.since <= knobs.max_node_provision:
            return plan, None  # its new nodes come, or one of its nodes drains
        m.replacing, m.replace_after = None, rest  # they never became usable
    if m.replacing is not None:
        # Ready: the nodes named first, the new ones empty (not unneeded: the pods go there)
        consolidation = _consolidation(obs, m, held | resting)
        unneeded = consolidation.free
        if not set(m.replacing.drain) & set(unneeded):
            # the room was taken meanwhile (the scheduler put the moved pods elsewhere)
            if obs.target >= m.replacing.start:
                m.replace_failed = layout(obs.nodes.candidates)
            m.replacing, m.replace_after = None, rest
    elif not unneeded and obs.scaler.spec.scale_down_consolidation:
        consolidation = _consolidation(obs, m, held | resting, grow=_grow(obs, m, now))
        unneeded = consolidation.free
        if (replacement := consolidation.replacement) is not None:
            write = _replace(
                obs,
                m,
                replacement,
                now,
                optimum=consolidation.optimum,
                may_write=may_write,
                pods_need_room=bool(plan.placements) or settling,
            )
            return plan, write
    # a replacement's nodes the budget leaves for later keep their times (and names)
    later = m.replacing.drain if m.replacing is not None else ()
    m.unneeded_since = track_unneeded(m.unneeded_since, (*unneeded, *later), now)
    desired = scale_down_target(
        target=obs.target,
        min_nodes=obs.pool.spec.min_nodes,
        nodes=replace(obs.nodes, empty=unneeded),
        unneeded_since=m.unneeded_since,
        now=now,
        unneeded_seconds=unneeded_time.total_seconds(),
        pods_need_room=bool(plan.placements) or settling,
    )
    if desired is None or not may_write or obs.moved:
        return plan, None
    if m.replacing is not None:  # its nodes the NodePool controller leaves go next
        wrote = (*m.replacing.wrote, m.replacing.target)
        m.replacing = replace(m.replacing, target=desired, wrote=wrote)
    optimum = consolidation.optimum if consolidation is not None else None
    summary = scale_down_text(obs.target, desired, unneeded_time, optimum=optimum)
    return plan, TargetWrite(obs.target, desired, Why.SCALE_DOWN, summary)


def _replace_note(obs: Observation, m: Memory, now: float) -> str | None:
    """What ``lastDecision`` says of replacements (:func:`._replacing.replace_note`): the one
    under way, or what holds the next back while scale-down is on."""
    if not obs.scaler.spec.scale_down_enabled:
        return None
    return replace_note(
        m.replacing,
        resting=m.replace_after is not None and now < m.replace_after,
        failed=m.replace_failed is not None and m.replace_failed == layout(obs.nodes.candidates),
    )


def _grow(obs: Observation, m: Memory, now: float) -> int:
    """How many nodes a replacement may add now: up to the smaller maxNodes; none while
    scale-up backs off, after a replacement was dropped, or while the pool's workload is
    the one a replacement failed for (:mod:`._replacing`)."""
    if m.provisioning.backing_off(now) or (m.replace_after is not None and now < m.replace_after):
        return 0
    if m.replace_failed is not None and m.replace_failed == layout(obs.nodes.candidates):
        return 0
    most = min(obs.pool.spec.max_nodes, obs.scaler.spec.max_nodes or MAX_POOL_NODES)
    return max(0, most - obs.target)


def _replace(
    obs: Observation,
    m: Memory,
    replacement: Replacement,
    now: float,
    *,
    optimum: int,
    may_write: bool,
    pods_need_room: bool,
) -> TargetWrite | None:
    """Track the nodes ``replacement`` drains as unneeded; once all of them have been for
    ``scaleDownUnneededTime`` on a settled pool with no pod waiting for room, raise the
    target by its new nodes and remember it under way (:mod:`._replacing`). ``optimum``:
    the fewest nodes the pool's pods need, as told."""
    m.unneeded_since = track_unneeded(m.unneeded_since, replacement.drain, now)
    unneeded_time = obs.scaler.spec.scale_down_unneeded_time
    seconds = unneeded_time.total_seconds()
    due = all(now - m.unneeded_since[name] >= seconds for name in replacement.drain)
    if not due or not _settled(obs) or pods_need_room or not may_write or obs.moved:
        return None
    desired = obs.target + replacement.new_nodes
    m.replacing = Replacing(replacement.drain, desired, obs.target, now)
    summary = replace_text(obs.target, desired, replacement.drain, unneeded_time, optimum)
    return TargetWrite(obs.target, desired, Why.REPLACE, summary)


def _settled(obs: Observation) -> bool:
    """Every Node of the target registered, Ready and open for pods, none leaving."""
    nodes = obs.nodes
    return nodes.registered == obs.target == nodes.ready and not nodes.leaving and not nodes.opening


def _consolidation(obs: Observation, m: Memory, kept: set[str], *, grow: int = 0) -> Consolidation:
    """The pool's pods on fewer nodes (:func:`~nodepool_operator.scheduling.consolidate`),
    when no node is unneeded by the threshold rule: the nodes whose pods all have a place on
    the others, no more than the pool's disruption budget lets go now, nor below minNodes
    (the moved pods land where the scheduler puts them, so the next ones are chosen from the
    cluster as it then is). Blocked nodes and ``kept`` ones (a budget holds a pod of theirs,
    a drain timed out) stay; the nodes named before come first, so the choice holds while
    the cluster does. ``grow``: how many new nodes a replacement may add (0: none)."""
    nodes = obs.nodes
    allowed = allowed_disruptions(
        obs.pool.spec.disruption.budgets,
        nodes.registered + nodes.leaving,
        nodes.leaving,
        str(RemovalReason.UNDERUTILIZED),
    )
    # never a node named that minNodes would keep: the target would not go down for it
    limit = min(allowed, max(0, obs.target - obs.pool.spec.min_nodes))
    return consolidate(
        nodes.candidates,
        template=obs.template,
        blockers=m.blocked,
        held=kept,
        prefer=m.unneeded_since.keys(),
        limit=limit,
        zones=obs.pool.status.zones,
        grow=grow,
    )


def _marks(obs: Observation, m: Memory, now: Clock) -> tuple[Mark, ...]:
    """Name the nodes unneeded for ``scaleDownUnneededTime`` (those a lowering counts) for
    the NodePool controller, and take the name off a node open for pods again and no longer
    unneeded (a node being drained keeps it: it goes with the node)."""
    seconds = obs.scaler.spec.scale_down_unneeded_time.total_seconds()
    due = {name: t for name, t in m.unneeded_since.items() if now.mono - t >= seconds}
    wall = now.wall.timestamp()
    marks = [
        Mark(name, True, wall - (now.mono - since), node_fields(obs.raw.nodes[name]))
        for name, since in sorted(due.items())
        if name not in obs.marked and name in obs.raw.nodes
    ]
    open_nodes = {node.name for node in obs.nodes.candidates}
    marks += [
        Mark(name, False, 0.0, node_fields(obs.raw.nodes[name]))
        for name in sorted(obs.marked)
        if name in open_nodes and name not in due and name in obs.raw.nodes
    ]
    return tuple(marks)


def _plan_groups(plan: ScaleUpPlan) -> tuple[NotTriggered, ...]:
    return tuple(NotTriggered(str(g.reason), g.detail, g.pods) for g in plan.unschedulable)


def _on_new_capacity(plan: ScaleUpPlan, keys: Mapping[PodRef, str]) -> list[str]:
    """The keys of the pods ``plan`` put on booting or new nodes."""
    return [
        keys[p.pod] for p in plan.placements if p.pod in keys and not isinstance(p.node, Existing)
    ]


def _new_node_slots(
    plan: ScaleUpPlan, keys: Mapping[PodRef, str], kind: type[New | Booting] = New
) -> list[tuple[str, ...]]:
    """The keys of the pods ``plan`` put on each new node (or each booting node: ``kind``),
    in those nodes' order; a node of that kind the plan put no pod on has an empty slot."""
    slots: dict[int, list[str]] = {}
    for p in plan.placements:
        if p.pod in keys and isinstance(p.node, kind):
            slots.setdefault(p.node.index, []).append(keys[p.pod])
    return [tuple(slots.get(i, ())) for i in range(max(slots, default=-1) + 1)]


# --- step 4: what the write means, and telling --------------------------------------------


@dataclass(frozen=True, slots=True)
class _Outcome:
    write: TargetWrite | None
    head: str | None
    """Replaces the plan's summary in ``lastDecision`` (a timeout, a scale-down, a backoff)."""
    scaled_at: datetime | None
    events: tuple[Note, ...]


def _outcome(
    obs: Observation,
    m: Memory,
    plan: ScaleUpPlan,
    write: TargetWrite | None,
    timeout: tuple[TargetWrite, str] | None,
    keys: Mapping[PodRef, str],
    blocked_before: Mapping[str, Unremovable],
    now: Clock,
) -> _Outcome:
    """The one target write of the pass, what it is remembered and told as."""
    events: list[Note] = []
    head: str | None = None
    scaled_at: datetime | None = None
    if timeout is not None:
        lowering, head = timeout
        scaled_at = now.wall
        events += _timeout_notes(lowering.summary)
        # only down, and not a target someone else moved meanwhile: theirs stands
        lowers = lowering.desired < lowering.expected and not obs.moved
        write = lowering if lowers else None
    events += _blocked_notes(obs, blocked_before, m.blocked)
    if write is not None and write.why is Why.SCALE_DOWN:
        # The unneeded times are kept: they name the nodes to go (:func:`_marks`) until the
        # NodePool controller took them; the pool is not settled meanwhile, so no node is
        # counted twice (``scale_down_target``).
        head = write.summary
        events += scaled(obs.pool_name, up=False, summary=head)
        scaled_at = now.wall
    elif write is not None and write.why is Why.REPLACE:
        # its new nodes are followed as any (a provisioning timeout ends the replacement)
        m.provisioning = requested(m.provisioning, registered=obs.nodes.registered, now=now.mono)
        head = write.summary
        events += scaled(obs.pool_name, up=True, summary=head)
        scaled_at = now.wall
    elif write is not None and write.why is Why.SCALE_UP:
        m.provisioning = requested(m.provisioning, registered=obs.nodes.registered, now=now.mono)
        m.landing.planned(_on_new_capacity(plan, keys), write.desired)
        if obs.pool.spec.reserve_new_nodes:  # otherwise :func:`nominate` records them
            m.reservation.planned(
                _new_node_slots(plan, keys),
                known=[r.name for r in obs.pool.status.instances],
            )
        events += scaled(obs.pool_name, up=True, summary=plan.summary)
        scaled_at = now.wall
    elif not m.provisioning.backing_off(now.mono):
        # Pods the plan puts on nodes already booting wait for them too.
        m.landing.planned(_on_new_capacity(plan, keys), max(obs.target, obs.pool.spec.min_nodes))
    if head is None and m.provisioning.backing_off(now.mono) and plan.scale_up:
        head = f"no scale up (target {obs.target}): provisioning timed out, scale-up backed off"
    return _Outcome(write, head, scaled_at, tuple(events))


def _requeue(
    obs: Observation,
    m: Memory,
    now: float,
    knobs: Knobs,
    lift_in: float | None,
    landing_due: float | None,
) -> float:
    """When to look again: after ``frequency``, or sooner when a timer of the memory ends."""
    spec = obs.scaler.spec
    waits = [spec.frequency.total_seconds()]
    unneeded_due = next_unneeded_due(
        m.unneeded_since, now, spec.scale_down_unneeded_time.total_seconds()
    )
    waits += [due for due in (lift_in, unneeded_due, landing_due) if due is not None]
    provisioning = m.provisioning
    if provisioning.since is not None:
        waits.append(max(0.0, provisioning.since + knobs.max_node_provision - now) + 0.05)
    if provisioning.backoff_until is not None and provisioning.backing_off(now):
        waits.append(max(0.0, provisioning.backoff_until - now) + 0.05)
    return min(waits)


def _blocked_notes(
    obs: Observation, before: Mapping[str, Unremovable], now: Mapping[str, Unremovable]
) -> list[Note]:
    """A ScaleDownBlocked Event on each Node whose blocker is new or changed."""
    return [
        Note(Subject.NODE, SCALE_DOWN_BLOCKED, why.note, "ScaleDown", warning=True, key=name)
        for name, why in sorted(now.items())
        if before.get(name) != why and name in obs.raw.nodes
    ]


def _status(
    obs: Observation,
    decision: str,
    scaled_at: datetime | None,
    m: Memory,
    backing_off: bool,
    knobs: Knobs,
) -> StatusChange:
    pool = obs.pool_name
    namespaces = ", ".join(obs.scaler.spec.namespaces)
    conditions = [
        ConditionChange(
            READY, "True", WATCHING, f"scaling NodePool {pool} for pods in {namespaces}"
        )
    ]
    if backing_off:
        conditions.append(
            ConditionChange(
                PROVISIONING,
                "False",
                PROVISION_TIMED_OUT,
                f"NodePool {pool}: requested nodes did not register within "
                f"{knobs.max_node_provision:g}s; scale-up backed off",
            )
        )
    else:
        conditions.append(
            ConditionChange(
                PROVISIONING,
                "True",
                PROVISIONING_OK,
                f"NodePool {pool}: scale-up allowed",
                if_present=True,
            )
        )
    return StatusChange(
        generation=obs.generation,
        conditions=tuple(conditions),
        pending_pods=obs.pending,
        unschedulable_pods=len(obs.candidates),
        last_decision=decision,
        unremovable_nodes=unremovable(m.blocked),
        last_scale_time=scaled_at,
    )


# --- step 5: reserved nodes ---------------------------------------------------------------


def _hold_reservations(
    obs: Observation, m: Memory, now: Clock, knobs: Knobs
) -> tuple[tuple[Grant, ...], tuple[Lift, ...], float | None]:
    """Reserved new nodes (``_reserve``): give the plan's slots their nodes' names, let each
    planned pod onto its node (a grant, unless the pod already tolerates it), and open a node
    once its pods are bound (or it has been Ready for the landing grace). Returns the grants,
    the lifts and the seconds until the next lift is due."""
    reservation = m.reservation
    if not obs.reserved and not obs.pool.spec.reserve_new_nodes:
        return (), (), None  # the slots serve the nominations alone (:func:`nominate`)
    records = [r.name for r in obs.pool.status.instances]
    slots = reservation.assign(records)
    live = {*records, *obs.raw.nodes}
    reservation.forget([name for name in slots if name not in live])  # its VM was replaced
    grants: list[Grant] = []
    for name, keys in slots.items() if obs.pool.spec.reserve_new_nodes else ():
        for key in keys:
            pod = obs.unbound.get(key)
            if pod is None or name not in live or (key, name) in reservation.granted:
                continue
            if not lets_on(pod, name):
                grants.append(Grant(key, name, pod))
    wall = now.wall.timestamp()
    lifts: list[Lift] = []
    next_due: float | None = None
    grace = knobs.landing_grace
    for node_name, name in obs.reserved:
        node = obs.raw.nodes[node_name]
        held = ready_for(node, wall)
        if lift_due(slot=slots.get(name), waiting=obs.unbound, ready_for=held, grace=grace):
            lifts.append(Lift(node_name, name, lift_patch(node_fields(node))))
        elif held is not None:
            next_due = min(grace - held, next_due if next_due is not None else grace)
    return tuple(grants), tuple(lifts), None if next_due is None else max(0.05, next_due)


# --- after the target: nominations --------------------------------------------------------


def nominate(
    obs: Observation,
    memory: Memory,
    now: Clock,
    knobs: Knobs,
    *,
    scaled: Decision | None = None,
) -> Nominated:
    """Nominate the planned pods to their registered new nodes (:mod:`._nominations`), open
    the gated ones that are Ready, and keep, in ``memory``, the slots of the scale-up
    ``scaled`` wrote (which pods each new node is for) and forget those that are done.

    Run after the pass's target write (and while a burst is gathered, when no decision is
    made): the pods' status is not on the way to the target, and a dropped nomination is
    written again at once."""
    reservation = memory.reservation
    write = None if scaled is None else scaled.target
    seen = {p.key: p.first_seen for p in obs.candidates}
    # a reserving pool's slots were kept by decide (its grants need them)
    reserving = obs.pool.spec.reserve_new_nodes
    if scaled is not None and write is not None and write.why is Why.SCALE_UP and not reserving:
        keys = {p.ref: p.key for p in obs.candidates}
        views = {p.key: p.view for p in obs.candidates}
        known = [r.name for r in obs.pool.status.instances]
        booting = _new_node_slots(scaled.plan, keys, Booting)
        new = _new_node_slots(scaled.plan, keys)
        dealt = in_queue_order([*booting, *new], views, seen)
        reservation.planned(
            dealt[len(booting) :],
            known=known,
            booting=dealt[: len(booting)],
            settled=obs.raw.nodes,
            unheld=lead_kind(dealt, views, seen),
        )
    if not reservation.slots:
        return Nominated((), (), None)
    records = [r.name for r in obs.pool.status.instances]
    slots = reservation.assign(records)
    wall = now.wall.timestamp()
    # a reserving pool's nodes open through its grants (decide), never here
    gates = {} if reserving else {name: node for node, name in obs.reserved}
    out = nominations(
        slots,
        vms=records,
        nodes=obs.raw.nodes,
        pods=obs.unbound,
        # open to pods: Ready, and the lifecycle's start-up taints gone too
        ready_for=lambda name: open_for(obs.raw.nodes[name], wall),
        grace=knobs.landing_grace,
        gated=gates,
        hold=knobs.gate_hold,
        free={n.name: n.free for n in obs.nodes.room},
        queued_at=seen,
        unheld=reservation.unheld,
    )
    reservation.forget(out.done)
    opens = tuple(
        Lift(gates[name], name, lift_patch(node_fields(obs.raw.nodes[gates[name]])))
        for name in out.opens
    )
    due = None if out.next_due is None else max(0.05, out.next_due)
    return Nominated(out.writes, opens, due, out.held)
