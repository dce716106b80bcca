"""The writes and cloud calls of a pass over a pool, as :mod:`.decide` chose them.

:meth:`Act.record` makes the plan durable (the chosen Nodes tainted, then the records in one
status write) before :meth:`Act.converge` calls the cloud: create the recorded intents (same
idempotency token every time), make schedulable again what stays, retire what was marked
(drain through the Eviction API, then VM, Node, finalizer), start stopped VMs, bring the
registered Nodes in line with the pool, and collect what no record knows. A step whose next
move depends on the answer of a call asks :mod:`.decide` (a drain's verdict, garbage).

A crash anywhere repeats work, never duplicates it: intents are recorded before creates, and
retirements before removals.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubeloop import (
    NODES,
    Conflict,
    Invalid,
    KubeloopError,
    Manager,
    NotFound,
    Object,
    PatchType,
    Result,
    has_finalizer,
    remove_finalizer,
    set_condition,
    update_status,
)
from nodepool_operator import failpoints
from nodepool_operator.api import (
    AUTOSCALERS,
    NODEPOOLS,
    AwsNodeClassSpec,
    InstanceRecord,
    InvalidField,
    NodePool,
)
from nodepool_operator.cloud import (
    PRICES,
    CapacityUnavailable,
    CloudError,
    CloudProvider,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceType,
    MarketType,
    Subnet,
    SubnetFull,
)
from nodepool_operator.controllers import _launch as launching
from nodepool_operator.controllers._blocked import switches
from nodepool_operator.controllers._indexes import scaled
from nodepool_operator.controllers._node_manifest import pool_shape, pool_taints
from nodepool_operator.controllers._reserve import lift_patch
from nodepool_operator.controllers._unneeded import DRAIN_TIMED_OUT_AT, format_time
from nodepool_operator.controllers.nodepool import (
    _deletion,
    _events,
    _instances,
    _outcome,
    _retire,
    _upkeep,
)
from nodepool_operator.controllers.nodepool._create_gate import CreateGate
from nodepool_operator.controllers.nodepool._drain import (
    drain_node,
    pods_on,
    taint_disrupting,
    untaint_disrupting,
)
from nodepool_operator.controllers.nodepool._drain_deadline import (
    DRAIN_TIMED_OUT,
    Condition,
    drain_timeout_note,
)
from nodepool_operator.controllers.nodepool._drift import DRIFTED_ANNOTATION
from nodepool_operator.controllers.nodepool._events import Event
from nodepool_operator.controllers.nodepool._intent import DELETING, create_request
from nodepool_operator.controllers.nodepool._network import SubnetCache
from nodepool_operator.controllers.nodepool._node_sync import sync_patch
from nodepool_operator.controllers.nodepool._offerings import (
    Offering,
    UnavailableOfferings,
    refused_offering,
)
from nodepool_operator.controllers.nodepool._pool_status import (
    CloudFailure,
    cloud_failure,
    invalid_spec,
)
from nodepool_operator.controllers.nodepool._repair import (
    REPAIR_DRAIN_TIMED_OUT,
    repair_drain_note,
)
from nodepool_operator.controllers.nodepool._retire import Verdict
from nodepool_operator.controllers.nodepool._type_choice import (
    TypeOption,
    candidates,
    choose_type,
)
from nodepool_operator.controllers.nodepool._userdata import pool_user_data
from nodepool_operator.controllers.nodepool._zone_choice import (
    choose_subnet,
    launchable_zones,
    zone_counts,
)
from nodepool_operator.controllers.nodepool.decide import Decision
from nodepool_operator.controllers.nodepool.observe import Deleted, Observation, now
from nodepool_operator.controllers.nodepool.records import PoolNode, decode_node
from nodepool_operator.settings import OperatorSettings

#: Event reason when a spot create is launched on-demand for want of spot capacity.
SPOT_FALLBACK = "SpotUnavailable"
#: The pool's own finalizer: its VMs and Nodes go before it does.
FINALIZER = "kubeloop.dev/nodepool-cleanup"
#: On every Node the pool adopted: deleting the Node (``kubectl delete node``) drains it and
#: terminates its VM before the Node goes (Karpenter's ``karpenter.sh/termination``).
NODE_FINALIZER = "kubeloop.dev/termination"

log = logging.getLogger("nodepool_operator.nodepool")


@dataclass
class Progress:
    """What the convergence of one pass has done so far: act's own, mutable state."""

    obj: Object
    """The pool as last read or written (its resourceVersion guards the next write)."""
    pool: NodePool
    records: tuple[InstanceRecord, ...]
    nodes: dict[str, PoolNode]
    """The pool's Nodes by name (those this pass released taken out)."""
    by_instance: Mapping[str, PoolNode]
    """The pool's Nodes as observed, by the instance id of their providerID."""
    vms: dict[str, Instance] = field(default_factory=dict)
    listed: tuple[Instance, ...] = ()
    failure: CloudFailure | None = None
    gc_wait: float | None = None
    removed: set[str] = field(default_factory=set)
    """Ids of VMs deleted by this pass."""
    drain_wait: float | None = None
    dropped: set[str] = field(default_factory=set)
    """Names of records this pass removed (a status merge must not bring them back)."""
    draining: set[str] = field(default_factory=set)
    waits: list[float] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    """What holds each drain a blocker stopped in this pass (for the Ready condition)."""
    kept: set[str] = field(default_factory=set)
    """Records whose scale-down drain this pass gave up (the Node stays)."""
    resting: frozenset[str] = frozenset()
    repair_blocked: str = ""
    expiring: str = ""
    drifting: str = ""
    tainted: set[str] = field(default_factory=set)
    """Nodes this pass tainted (their Nodes as read do not say so yet)."""
    node_class: str = ""
    """The version of the node class the pool names, as the create gate keys its holds."""
    subnets: list[Subnet] | None = None
    """The subnets the pool's node class selects (None: not read in this pass, so
    status.zones is kept as written)."""

    @property
    def name(self) -> str:
        return self.pool.metadata.name

    @property
    def uid(self) -> str:
        return self.pool.metadata.uid

    @property
    def generation(self) -> int:
        return self.pool.metadata.generation

    def update(self, name: str, **changes: Any) -> None:
        self.records = _instances.update(self.records, name, **changes)

    def drop(self, name: str) -> None:
        self.records = tuple(r for r in self.records if r.name != name)
        self.dropped.add(name)


def begin(
    obj: Object, seen: Observation, decision: Decision | None = None, *, node_class: str = ""
) -> Progress:
    """The progress of a pass that observed ``seen`` and decided ``decision``."""
    p = Progress(
        obj=obj,
        pool=seen.pool,
        records=tuple(seen.pool.status.instances) if decision is None else decision.records,
        nodes=dict(seen.nodes),
        by_instance=seen.by_instance(),
        vms=dict(seen.vms),
        listed=seen.listed,
        node_class=node_class,
    )
    if decision is not None:
        p.waits += decision.waits
        p.resting = decision.resting
        p.repair_blocked = decision.repair_blocked
        p.expiring = decision.expiring
        p.drifting = decision.drifting
    return p


class Act:
    """Performs a pass's writes and cloud calls; holds what outlives a pass (the create
    gate, the instance type catalogue)."""

    def __init__(
        self,
        mgr: Manager,
        cloud: CloudProvider,
        settings: OperatorSettings,
        run_labels: Mapping[str, str],
    ) -> None:
        self.mgr = mgr
        self.cloud = cloud
        self.settings = settings
        self.run_labels = dict(run_labels)
        self.gate = CreateGate()
        self.offerings = UnavailableOfferings()
        self.subnets = SubnetCache()
        self._types: dict[str, InstanceType] = {}

    # -- Events, failures, status -----------------------------------------------------------

    def emit(self, obj: Object, events: Iterable[Event], nodes: Mapping[str, PoolNode]) -> None:
        recorder = self.mgr.recorder
        for e in events:
            post = recorder.warning if e.type == "Warning" else recorder.normal
            post(obj, e.reason, e.note, action=e.action, aggregate_by=e.about)
            node = nodes.get(e.node) if e.node else None
            if node is not None:
                recorder.warning(node.raw, e.reason, e.note, action=e.node_action)

    def failed(self, p: Progress, err: CloudError) -> CloudFailure:
        failure = cloud_failure(err)
        if p.failure is None:
            p.failure = failure
        log.warning("cloud refused: %s", err, extra={"pool": p.name, "reason": failure.reason})
        self.emit(p.obj, [_events.warning(failure.reason, failure.message)], {})
        return failure

    async def write_status(self, p: Progress) -> None:
        written = _outcome.status(
            p.pool,
            p.records,
            p.nodes,
            p.by_instance,
            failure=p.failure,
            dropped=frozenset(p.dropped),
            held=p.held,
            repair_blocked=p.repair_blocked,
            expiring=p.expiring,
            drifting=p.drifting,
            zones=self._zones(p),
        )
        p.obj = await update_status(self.mgr.client, NODEPOOLS, p.obj, written.apply)

    async def invalid(self, obj: Object, err: InvalidField) -> None:
        """A spec the API should have refused: say which field; nothing to do until it
        changes."""
        self.mgr.recorder.warning(obj, "InvalidSpec", str(err), action="Reconcile")
        generation = int(obj["metadata"].get("generation") or 0)
        await update_status(self.mgr.client, NODEPOOLS, obj, invalid_spec(generation, err))

    async def refused(self, obj: Object, seen: Observation, err: CloudError) -> None:
        """The cloud refused the pass's reads: Degraded, then the error (the backoff)."""
        p = begin(obj, seen)
        self.failed(p, err)
        await self.write_status(p)

    def requeue(self, p: Progress) -> Result:
        """Requeue when there is something to look at; raise what needs the backoff."""
        remaining = self.gate.remaining(p.uid, p.generation, node_class=p.node_class)
        if p.failure is not None and remaining is None:
            # Errors that name no wait (transient ones): the per-item backoff spaces retries.
            # Raised as a kubeloop error: a cloud's refusal (a missing node class, a
            # throttled API) is the world's doing, reported in the Degraded condition and
            # an Event; the runtime would log any other exception as a crash with a traceback.
            raise KubeloopError(f"{p.failure.reason}: {p.failure.message}") from p.failure.error
        after = _outcome.requeue_after(
            pool=p.pool,
            records=p.records,
            vms=p.vms,
            waits=p.waits,
            draining=bool(p.draining),
            drain_wait=p.drain_wait,
            gc_wait=p.gc_wait,
            gate_remaining=remaining,
            resting=bool(p.resting),
            now=now(),
            settings=self.settings,
        )
        return Result(requeue_after=after)

    # -- the plan ---------------------------------------------------------------------------

    async def place(self, p: Progress, decision: Decision) -> None:
        """The zones the pool can launch into now (``status.zones``), and a zone and subnet
        for each new intent (:mod:`._zone_choice`), recorded with it so that a retry, after
        a restart too, asks for the same subnet. Nothing when the cloud has no zones; a
        missing node class or a refused read is the create's to report."""
        try:
            node_class = await launching.node_class(
                self.mgr.client, p.pool.spec.node_class_ref, cache=self.mgr.cache
            )
            p.subnets = await self.subnets.subnets(self.cloud, launching.subnet_terms(node_class))
        except CloudError:
            return
        for r in p.records:
            if r.name in decision.creates and r.instance_id is None and r.subnet is None:
                self._placement(p, r.name, p.pool.spec.instance_type, p.subnets)

    def _zones(self, p: Progress) -> tuple[str, ...] | None:
        """The zones the pool can launch into now: those with a subnet that is not full
        where one of the pool's types is not out (None: the subnets were not read)."""
        if p.subnets is None:
            return None
        names = candidates(p.pool.spec.instance_type, p.pool.spec.instance_types)
        return tuple(
            launchable_zones(
                p.subnets,
                lambda s: (
                    self.offerings.subnet_full(s.id)
                    or all(self.offerings.unavailable(t, s.zone) for t in names)
                ),
            )
        )

    def _out(self, type_name: str) -> Callable[[Subnet], bool]:
        """Whether a subnet cannot take a VM of ``type_name`` now (full, or the type out in
        its zone)."""
        return lambda s: (
            self.offerings.subnet_full(s.id) or self.offerings.unavailable(type_name, s.zone)
        )

    def _needed(self, type_name: str) -> int:
        """The addresses a node of the type takes from its subnet: one per pod it may run
        (the VPC CNI gives each pod a subnet address), as Karpenter counts them."""
        known = self._types.get(type_name)
        return max(1, known.pods) if known is not None else 1

    def _type_out(self, type_name: str, subnets: Sequence[Subnet]) -> bool:
        """Whether the type is out: everywhere, or in every subnet's zone."""
        if self.offerings.unavailable(type_name):
            return True
        out = self._out(type_name)
        return bool(subnets) and all(out(s) for s in subnets)

    def _placement(
        self, p: Progress, name: str, type_name: str, subnets: Sequence[Subnet]
    ) -> Subnet | None:
        """The subnet record ``name`` launches in as ``type_name``: the one recorded while
        it can take it, else a new choice (recorded in place of it); when every subnet is
        out, the best one anyway (the create gate spaces those asks). None: no subnets."""
        if not subnets:
            return None
        record = next(r for r in p.records if r.name == name)
        out = self._out(type_name)
        recorded = next((s for s in subnets if s.id == record.subnet), None)
        if recorded is not None and not out(recorded):
            return recorded
        counts = zone_counts(p.records, p.vms, leave_out=name)
        targets = p.pool.spec.zone_targets
        chosen = choose_subnet(
            subnets, counts, targets, out=out, needed=self._needed(type_name)
        ) or choose_subnet(subnets, counts, targets, needed=0)
        if chosen is not None and chosen.id != record.subnet:
            p.update(name, zone=chosen.zone, subnet=chosen.id)
        return chosen

    async def record(self, p: Progress, decision: Decision) -> None:
        """Taint the Nodes chosen, emit the plan's Events, record it in one status write."""
        await self.place(p, decision)
        for name in decision.taint:
            if await taint_disrupting(self.mgr.client, p.nodes[name].fields):
                p.tainted.add(name)
        for name, reason in decision.drift_marks.items():
            await self._mark_drift(name, reason)
        self.emit(p.obj, decision.events, p.nodes)
        if decision.repair_held:
            log.warning(
                "repair blocked", extra={"pool": p.name, "nodes": list(decision.repair_held)}
            )
        if decision.budget_held:
            log.info(
                "disruption budget reached",
                extra={"pool": p.name, "held": list(decision.budget_held)},
            )
        if decision.add or decision.retire:
            log.info(
                "scaling",
                extra={
                    "pool": p.name,
                    "live": decision.live_before,
                    "desired": _instances.desired(p.pool),
                    "add": decision.add,
                    "retire": list(decision.retire),
                },
            )
        if decision.record:
            await self.write_status(p)

    async def _mark_drift(self, node: str, reason: str) -> None:
        """Annotate a Node with its drift reason (:mod:`._drift`), or remove the mark."""
        patch = {"metadata": {"annotations": {DRIFTED_ANNOTATION: reason or None}}}
        with contextlib.suppress(NotFound):
            await self.mgr.client.patch(NODES, node, patch)
        if reason:
            log.info("node drifted", extra={"node": node, "reason": reason})

    async def converge(self, p: Progress, decision: Decision) -> None:
        await self._create(p, decision)
        for name in decision.untaint:
            await untaint_disrupting(self.mgr.client, p.nodes[name].fields)
        await self._retire(p)
        await self._restart_stopped(p)
        await self._adopt_nodes(p)
        await self._collect_garbage(p)

    # -- create -----------------------------------------------------------------------------

    async def _autoscaled(self, pool: str) -> bool:
        """Whether an Autoscaler scales ``pool`` (:func:`.._indexes.scaled`: one being deleted
        does not): then its new nodes register gated (:mod:`.._reserve`), so that the
        Autoscaler's nominations hold its plan. Read from the Autoscalers' informer in the
        operator's scope (the one the Autoscaler controller runs on; a few objects per
        cluster)."""
        objs = await self.mgr.cache.list(AUTOSCALERS, label_selector=self.settings.label_selector)
        return scaled(pool, objs)

    async def _create(self, p: Progress, decision: Decision) -> None:
        if decision.held is not None:
            p.failure = decision.held  # refused recently for this spec: not asked again yet
            return
        intents = [r for r in p.records if r.name in decision.creates]
        if not intents:
            return
        try:
            node_class = await launching.node_class(self.mgr.client, p.pool.spec.node_class_ref)
        except launching.NodeClassUnavailable as err:
            self.failed(p, err)
            return
        listed = {vm.name: vm for vm in p.listed}
        gated = await self._autoscaled(p.name)
        try:
            template, options = await self._type_options(p.pool, node_class)
            subnets, groups = await self._network(p, node_class)
        except CloudError as err:
            self.failed(p, err)
            return
        for r in intents:
            tried: set[tuple[str, str]] = set()
            no_spot: set[str] = set()  # types whose spot this create was refused
            while True:
                option = choose_type(
                    template, options, PRICES, lambda t: self._type_out(t, subnets)
                )
                type_name = option.name
                subnet = self._placement(p, r.name, type_name, subnets)
                tried.add((type_name, subnet.id if subnet is not None else ""))
                zone = subnet.zone if subnet is not None else ""
                market = self._market(p.pool, type_name, no_spot, zone)
                instance_type = self._types.get(type_name)
                try:
                    user_data = await pool_user_data(
                        self.cloud,
                        p.pool,
                        r.name,
                        instance_type,
                        node_class,
                        run_labels=self.run_labels,
                        type_name=type_name,
                        capacity_type=market,
                        gated=gated,
                    )
                except CloudError as err:
                    self.failed(p, err)
                    return
                request = create_request(
                    pool_name=p.name,
                    pool_uid=p.uid,
                    instance_type=type_name,
                    name=r.name,
                    node_class=node_class,
                    user_data=user_data,
                    capacity_type=market,
                    subnet=subnet,
                    security_groups=groups,
                )
                try:
                    vm = await self.cloud.create(request)
                except IdempotencyMismatch as err:
                    # Sent before with other arguments (the spec changed since, or another
                    # type was chosen): that VM exists; adopt it (its Node's labels and
                    # taints are brought in line later).
                    found = listed.get(r.name)
                    if found is None:
                        try:
                            found = await self.cloud.find(request.idempotency_token)
                        except CloudError:
                            found = None
                    if found is None:
                        self.failed(p, err)
                        return
                    vm = found
                except CloudError as err:
                    if self._spot_refused(p, err, market):
                        no_spot.add(type_name)
                        continue  # the same type, on-demand, at once
                    if self._fall_back(p, r.name, err, (template, options), tried, subnet, subnets):
                        continue  # another type or zone has capacity: this intent, at once
                    failure = self.failed(p, err)
                    self.gate.refused(p.uid, p.generation, failure, node_class=p.node_class)
                    return  # the next create would be refused as well
                else:
                    failpoints.hit("after-cloud-create")
                if subnet is not None:
                    self.subnets.used(subnet.id, self._needed(type_name))
                break
            if vm.state == "terminated":
                # This token's VM was terminated before its id was recorded; a token names
                # one VM for good, so a fresh intent replaces this one.
                p.drop(r.name)
                continue
            p.vms[vm.id] = vm
            p.update(r.name, instance_id=vm.id, state=vm.state)

    async def _network(
        self, p: Progress, node_class: AwsNodeClassSpec | None
    ) -> tuple[list[Subnet], tuple[str, ...] | None]:
        """The subnets to choose from (none: no zones, the class's subnets as they are) and
        the security groups the class's selector terms find (None: its ids).

        Raises:
            InvalidRequest: selector terms that select nothing, naming the field.
        """
        subnets = p.subnets
        if subnets is None:
            subnets = await self.subnets.subnets(self.cloud, launching.subnet_terms(node_class))
        launching.check_subnets(node_class, subnets)
        groups = await launching.selected_groups(
            functools.partial(self.subnets.security_groups, self.cloud), node_class
        )
        return subnets, groups

    async def _type_options(
        self, pool: NodePool, node_class: AwsNodeClassSpec | None
    ) -> tuple[TypeOption, list[TypeOption]]:
        """The pool's template type and its types in order of preference, each as a node of
        the pool would be (:mod:`._type_choice`). A type the cloud does not offer is left
        out, except the template's own (its create reports it as invalid, as before)."""
        names = candidates(pool.spec.instance_type, pool.spec.instance_types)
        # the catalogue rarely changes: asked again only on a miss, once for all of them
        if any(name not in self._types for name in names):
            self._types = {t.name: t for t in await self.cloud.instance_types()}
        options = [self._option(pool, name, node_class) for name in names]
        template = options[0]
        return template, [o for o in options if o is template or o.name in self._types]

    def _option(self, pool: NodePool, name: str, node_class: AwsNodeClassSpec | None) -> TypeOption:
        known = self._types.get(name)
        shape = pool_shape(pool, known, instance_type_name=name, node_class=node_class)
        arch = known.architecture if known is not None else "amd64"
        return TypeOption(name, shape.allocatable, arch)

    def _market(
        self, pool: NodePool, type_name: str, no_spot: set[str], zone: str = ""
    ) -> MarketType:
        """The market a create of ``type_name`` asks in: the pool's, except on-demand for a
        spot pool while the type's spot is known to be out, in ``zone`` or everywhere
        (:mod:`._offerings`)."""
        if pool.spec.capacity_type != "spot" or type_name in no_spot:
            return "on-demand"
        return "on-demand" if self.offerings.unavailable(type_name, zone, "spot") else "spot"

    def _spot_refused(self, p: Progress, err: CloudError, market: MarketType) -> bool:
        """A spot create the cloud had no spot capacity for: that offering is marked out
        and the same create goes on-demand (Karpenter falls back the same way), with an
        Event saying so."""
        offering = refused_offering(err)
        if market != "spot" or offering is None or offering.capacity_type != "spot":
            return False
        self.offerings.mark(offering)
        note = f"no spot capacity for {offering.instance_type} ({err}); launching it on-demand"
        log.info("spot unavailable", extra={"pool": p.name, "type": offering.instance_type})
        self.emit(p.obj, [_events.normal(SPOT_FALLBACK, note)], {})
        return True

    def _fall_back(
        self,
        p: Progress,
        name: str,
        err: CloudError,
        types: tuple[TypeOption, list[TypeOption]],
        tried: set[tuple[str, str]],
        sent: Subnet | None,
        subnets: Sequence[Subnet],
    ) -> bool:
        """Mark what a create's error says is out (:mod:`._offerings`): the subnet when it
        is full, else the type in the zone named, or in the zone it was sent to; whether
        another (type, subnet) not tried yet can take the same intent at once (neither a
        Degraded pool nor a held gate: one zone out never holds the others)."""
        template, options = types
        full = None
        if isinstance(err, SubnetFull):
            full = err.subnet or (sent.id if sent is not None else None)
        offering = refused_offering(err)
        if full is not None:
            self.offerings.mark_subnet(full)
        elif offering is not None:
            if not offering.zone and sent is not None and isinstance(err, CapacityUnavailable):
                offering = Offering(offering.instance_type, sent.zone, offering.capacity_type)
            self.offerings.mark(offering)
        else:
            return False
        following = choose_type(template, options, PRICES, lambda t: self._type_out(t, subnets))
        if self._type_out(following.name, subnets):
            return False
        counts = zone_counts(p.records, p.vms, leave_out=name)
        after = choose_subnet(
            subnets,
            counts,
            p.pool.spec.zone_targets,
            out=self._out(following.name),
            needed=self._needed(following.name),
        )
        if subnets and after is None:
            return False
        if (following.name, after.id if after is not None else "") in tried:
            return False
        was = f" in {sent.zone}" if sent is not None else ""
        goes = f" in {after.zone}" if after is not None else ""
        refused = offering.instance_type if offering is not None else ""
        what = f"subnet {full}" if full is not None else f"{refused}{was}"
        note = f"{what} is out ({err}); launching {following.name}{goes} instead"
        log.info(
            "offering unavailable",
            extra={"pool": p.name, "out": what, "next": f"{following.name}{goes}"},
        )
        self.emit(p.obj, [_events.normal("OfferingUnavailable", note)], {})
        return True

    # -- retire -----------------------------------------------------------------------------

    async def _retire(self, p: Progress) -> None:
        """Terminate every record marked ``deleting``; one still draining stays recorded."""
        for r in [r for r in p.records if r.state == DELETING]:
            try:
                done = await self._terminate(p, r)
            except CloudError as err:
                self.failed(p, err)
                return
            if done:
                p.drop(r.name)
            elif r.name not in p.kept:
                p.draining.add(r.name)

    async def _terminate(self, p: Progress, r: InstanceRecord) -> bool:
        """Remove one record's Node and VM: drain the Node (:func:`._retire.termination`),
        then terminate the VM, then let the Node go. True when done; False while the drain
        is still under way (call again on a later pass)."""
        node = _instances.node_of(r, p.by_instance) or p.nodes.get(r.name)
        alive = r.instance_id is not None and r.instance_id in p.vms
        step = _retire.termination(node, alive)
        if step == "drain" and node is not None and not await self._drain(p, r, node):
            return False
        if r.instance_id:
            await self.cloud.delete(r.instance_id)
            p.removed.add(r.instance_id)
        if node is not None:
            await self._release_node(p, node)
        return True

    async def _drain(self, p: Progress, r: InstanceRecord, node: PoolNode) -> bool:
        """One round of draining ``node`` before its VM goes (:mod:`._drain`); whether it is
        drained. Called on every pass until it is; it never waits itself."""
        client = self.mgr.client
        first = _retire.before_drain(node, now())
        if first == "give_up":
            await self._give_up(p, r, node, "")
            return False
        if first == "taint" and node.name not in p.tainted:  # not twice in one pass
            await taint_disrupting(client, node.fields)

        def warn(reason: str, note: str) -> None:
            on_node = node.name if reason == "DisruptionBlocked" else ""
            event = _events.warning(reason, note, node=on_node, action="Drain")
            self.emit(p.obj, [event], {node.name: node})

        status = await drain_node(
            client,
            node.name,
            warn=warn,
            voluntary=node.scaling_down,
            switches=switches(p.pool),
            hold=node.hold,
        )
        timeout = p.pool.spec.disruption.drain_timeout
        verdict = _retire.after_drain(node, status, timeout, now())
        if verdict is Verdict.GIVE_UP:
            await self._give_up(p, r, node, status.message)
            return False
        if verdict is Verdict.FORCE:
            note = repair_drain_note(node.name, timeout, status.message)
            self.emit(p.obj, [_events.warning(REPAIR_DRAIN_TIMED_OUT, note, about=r.name)], {})
            return True
        if verdict is Verdict.WAIT:
            p.drain_wait = min(p.drain_wait or math.inf, status.retry_after)
        if status.blocked_by is not None:
            p.held.append(status.message)
        return verdict is Verdict.DONE

    async def _give_up(self, p: Progress, r: InstanceRecord, node: PoolNode, waiting: str) -> None:
        """End a scale-down drain that ran past ``drainTimeout``: the Node is annotated with
        the time (so it is not chosen again at once, even after a restart), untainted, and
        its record is live again; another candidate is chosen on the next pass."""
        client = self.mgr.client
        stamp = {"metadata": {"annotations": {DRAIN_TIMED_OUT_AT: format_time(now())}}}
        try:
            await client.patch(NODES, node.name, stamp)
        except NotFound:
            return
        await untaint_disrupting(client, node.fields)  # refused (changed meanwhile): next pass
        vm = p.vms.get(r.instance_id or "")
        p.update(r.name, state=vm.state if vm is not None else "running")
        p.kept.add(r.name)
        if waiting:
            note = drain_timeout_note(node.name, p.pool.spec.disruption.drain_timeout, waiting)
            event = _events.warning(DRAIN_TIMED_OUT, note, node=node.name, action="Drain")
            self.emit(p.obj, [event], {node.name: node})
            log.warning("drain timed out", extra={"pool": p.name, "node": node.name})

    async def _release_node(self, p: Progress, node: PoolNode) -> None:
        """Delete the Node (if nobody has yet) and drop the termination finalizer, so it goes."""
        p.nodes.pop(node.name, None)
        await self._delete_node(node)

    async def _delete_node(self, node: PoolNode) -> None:
        client = self.mgr.client
        obj = node.raw
        try:
            if not node.deleting:
                deleted = await client.delete(NODES, node.name)
                if deleted.get("kind") == "Node":
                    obj = deleted
            if has_finalizer(obj, NODE_FINALIZER):
                await remove_finalizer(client, NODES, obj, NODE_FINALIZER)
        except NotFound:
            pass

    # -- the rest ---------------------------------------------------------------------------

    async def _restart_stopped(self, p: Progress) -> None:
        for name, vm in _upkeep.to_restart(p.records, p.vms):
            try:
                await self.cloud.start(vm.id)
            except CloudError as err:
                self.failed(p, err)
                return
            note = f"VM {vm.id} ({name}) was stopped; starting"
            self.emit(p.obj, [_events.warning("VMStopped", note)], {})
            p.vms[vm.id] = replace(vm, state="pending")

    async def _adopt_nodes(self, p: Progress) -> None:
        """A live record's Node gets the termination finalizer and the pool's labels and
        taints (kept in line with the spec from then on); the record follows its VM."""
        labels = dict(p.pool.spec.labels)
        taints = pool_taints(p.pool.spec)
        for a in _upkeep.adoption(p.records, p.vms, p.by_instance):
            if a.node is not None:
                await self._sync_node(p, a.node, labels, taints)
                await self._end_stale_reservation(p, p.nodes.get(a.node.name, a.node))
                if a.registered:
                    note = f"node {a.node.name} of VM {a.vm.id} ({a.record})"
                    self.emit(p.obj, [_events.normal("Registered", note)], {})
            p.update(a.record, state=a.vm.state, node_name=a.node_name)

    async def _sync_node(
        self, p: Progress, node: PoolNode, labels: dict[str, str], taints: list[dict[str, str]]
    ) -> None:
        ops = sync_patch(node.fields, labels, taints, finalizers=(NODE_FINALIZER,))
        if not ops:
            return
        try:
            updated = await self.mgr.client.patch(NODES, node.name, ops, patch_type=PatchType.JSON)
        except Invalid:
            p.waits.append(_outcome.SOON)  # the Node changed since it was read: next pass
        except NotFound:
            pass
        else:
            conditions = p.pool.spec.disruption.repair.unhealthy_conditions
            p.nodes[node.name] = decode_node(updated, conditions)

    async def _end_stale_reservation(self, p: Progress, node: PoolNode) -> None:
        """The backstop of ``reserveNewNodes`` (:func:`._upkeep.backstop_due`)."""
        due = _upkeep.backstop_due(node, now(), self.settings.pod_landing_grace_seconds)
        if due is None:
            return
        if due > 0:
            p.waits.append(due)
            return
        with contextlib.suppress(Invalid, NotFound, Conflict):  # changed meanwhile: next pass
            updated = await self.mgr.client.patch(
                NODES, node.name, lift_patch(node.fields), patch_type=PatchType.JSON
            )
            conditions = p.pool.spec.disruption.repair.unhealthy_conditions
            p.nodes[node.name] = decode_node(updated, conditions)
            log.info("reservation of node %s lifted by the backstop", node.name)

    async def _collect_garbage(self, p: Progress) -> None:
        """Delete what :func:`._upkeep.garbage` finds: unknown VMs past the grace period, and
        the pool's Nodes whose VM is gone."""
        found = _upkeep.garbage(
            p.records, p.listed, p.removed, p.nodes, now(), self.settings.gc_grace_seconds
        )
        if found.wait is not None:
            p.gc_wait = min(p.gc_wait or math.inf, found.wait)
        for vm in found.vms:
            try:
                await self.cloud.delete(vm.id)
            except CloudError as err:
                self.failed(p, err)
                return
            log.warning(
                "deleted a VM unknown to its pool", extra={"pool": p.name, "instance": vm.id}
            )
            note = f"deleted VM {vm.id} ({vm.name}): not recorded"
            self.emit(p.obj, [_events.warning("GarbageCollected", note)], {})
        for name in found.nodes:
            node = p.nodes.get(name)
            if node is None:
                continue
            await self._release_node(p, node)
            note = f"node {name}: its VM is gone"
            self.emit(p.obj, [_events.warning("OrphanNodeDeleted", note)], {})

    # -- a pool being deleted ---------------------------------------------------------------

    async def delete_pool(
        self, obj: Object, deleted: Deleted, plan: _deletion.DeletionPlan
    ) -> Result:
        """Carry out one pass over a deleted pool: taint, drain or force, remove; then the
        VMs, the Deleting condition, and the finalizer once nothing drains."""
        client = self.mgr.client

        def warn(reason: str, note: str) -> None:
            self.mgr.recorder.warning(obj, reason, note, action="Delete")

        untainted = set()
        by_name = {n.name: n for n in deleted.nodes}
        for name in plan.taint:  # every Node before any is drained
            if not await taint_disrupting(client, by_name[name].fields):
                untainted.add(name)
        draining: dict[str, tuple[str, str]] = {}
        waits: list[float] = []
        forced: dict[str, int] = {}
        for node, step in plan.steps:
            if node.name in untainted:
                note, wait = _deletion.untainted_wait(node.name)
                draining[node.name] = (node.instance_id, note)
                waits.append(wait)
                continue
            if step == "force":
                # Not deleted one by one (the operator never deletes pods, only evicts):
                # they go with their VM, and the pod garbage collector removes them.
                left = [pod for pod in await pods_on(client, node.name) if pod.workload]
                if left:
                    forced[node.name] = len(left)
            elif step == "drain":
                status = await drain_node(client, node.name, warn=warn, voluntary=False)
                if not status.done:
                    draining[node.name] = (
                        node.instance_id,
                        _deletion.waiting_for(node.name, status),
                    )
                    waits.append(status.retry_after)
                    continue
            if node.instance_id:
                with contextlib.suppress(InstanceNotFound):
                    await self.cloud.delete(node.instance_id)
            await self._delete_node(replace(node, deleting=False))
            log.info("pool node removed", extra={"pool": deleted.name, "node": node.name})
        outcome = _deletion.deletion_outcome(deleted, plan, draining, waits, forced)
        for instance_id in outcome.terminate:
            with contextlib.suppress(InstanceNotFound):
                await self.cloud.delete(instance_id)
        if outcome.condition is not None:
            obj = await self._deletion_status(obj, deleted.generation, outcome.condition)
        if outcome.requeue_after is not None:
            return Result(requeue_after=outcome.requeue_after)
        if forced:
            log.warning(
                "pool deletion stopped waiting", extra={"pool": deleted.name, "forced": forced}
            )
        self.emit(obj, outcome.events, {})
        with contextlib.suppress(NotFound):
            await remove_finalizer(client, NODEPOOLS, obj, FINALIZER)
        self.gate.forget(deleted.uid)
        return Result()

    async def _deletion_status(self, obj: Object, generation: int, condition: Condition) -> Object:
        """Write the pool's ``Deleting`` condition; the pool as written (or as given, if it
        is gone)."""
        type_, state, reason, message = condition

        def mutate(status: dict[str, Any]) -> None:
            conditions = status.get("conditions")
            if not isinstance(conditions, list):
                conditions = status["conditions"] = []
            set_condition(conditions, type_, state, reason, message, generation)

        try:
            return await update_status(self.mgr.client, NODEPOOLS, obj, mutate)
        except NotFound:
            return obj
