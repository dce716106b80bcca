"""Observe: everything one Autoscaler's reconcile reads, once, into a frozen record.

:meth:`Observer.observe` is the one call: it reads the cache (the Autoscaler, its NodePool
typed with the node template, the pending pods of its namespaces and the pool's Nodes), each
pod once, at the boundary (:func:`~nodepool_operator.scheduling.read_pending`: its verdict
and its view); then, once the burst the candidates came in has gone quiet
(:mod:`._batching`), the live reads: the Secrets, ConfigMaps and claims the candidates
reference (:mod:`._references`), and the PodDisruptionBudgets when scale-down might need
them. It returns the :class:`Observation`, or :class:`Gathering` (a burst still coming in:
look again later), :class:`Unready` (why it cannot plan) or ``None`` (the Autoscaler is gone
or going).

What is raw in the record is only what the recorder needs to name an object (:class:`Raw`);
every decision reads the typed fields.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from kubeloop import Cache, Client, Informer, Object, Request, Resource
from nodepool_operator.api import (
    AUTOSCALERS,
    NODEPOOLS,
    Autoscaler,
    InvalidField,
    NodePool,
    parse_autoscaler,
    parse_nodepool,
)
from nodepool_operator.cloud import CATALOGUE, CloudError
from nodepool_operator.controllers._blocked import PDBS
from nodepool_operator.controllers._capacity import (
    PoolNodes,
    machine_memory,
    pool_nodes,
    pool_template,
)
from nodepool_operator.controllers._indexes import NODE_POOL, POD_NODE
from nodepool_operator.controllers._launch import NodeClassUnavailable
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._node_manifest import REGION_LABEL
from nodepool_operator.controllers._reserve import reserved_for
from nodepool_operator.controllers._unneeded import is_marked, timed_out_at
from nodepool_operator.controllers.autoscaler._batching import Seen, batch_wait
from nodepool_operator.controllers.autoscaler._choice import Option, option
from nodepool_operator.controllers.autoscaler._decode import deleting, object_name
from nodepool_operator.controllers.autoscaler._pending import Lookup
from nodepool_operator.controllers.autoscaler._references import look_up
from nodepool_operator.controllers.autoscaler._status import (
    CONFLICTING_AUTOSCALER,
    INSTANCE_TYPES_UNAVAILABLE,
    INVALID_NODEPOOL,
    INVALID_SPEC,
    NODEPOOL_NOT_FOUND,
)
from nodepool_operator.controllers.autoscaler._template_inputs import (
    TemplateInputs,
    TemplateSources,
)
from nodepool_operator.controllers.autoscaler._watch import BY_NAMESPACE, BY_POOL
from nodepool_operator.scheduling import (
    DaemonSetView,
    NodeTemplate,
    PdbView,
    PodRef,
    PodView,
    daemonset_view,
    node_view,
    pdb_view,
    read_pending,
)

__all__ = ["Gathering", "Observation", "Observer", "PendingPod", "Raw", "Unready", "snapshot"]

log = logging.getLogger("nodepool_operator.autoscaler")

#: How often a refused Autoscaler looks again (it takes over once the other one is gone).
REFUSED_RECHECK: Final = 30.0


@dataclass(frozen=True, slots=True)
class PendingPod:
    """A candidate for scale-up (unschedulable, per the scheduler), read once.

    Attributes:
        view: the pod, read at the boundary (what it needs, what it references).
        first_seen: when the watch first delivered it as a candidate (monotonic).
    """

    view: PodView
    first_seen: float

    @property
    def key(self) -> str:
        """Its uid (namespace/name if it has none)."""
        return self.view.key

    @property
    def ref(self) -> PodRef:
        return self.view.ref


@dataclass(frozen=True, slots=True)
class Raw:
    """The API objects an Event or a patch has to name, as the cache has them."""

    scaler: Object
    pool: Object
    nodes: Mapping[str, Object] = field(default_factory=dict)
    """The pool's Nodes by name."""
    pods: Mapping[str, Object] = field(default_factory=dict)
    """The unbound pods of the watched namespaces by key (an Event on a pod names it)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything one reconcile read, for :func:`~.decide.decide`.

    Attributes:
        target: the pool's targetNodes as last read: the cache's, or the server's once a
            write found it moved (then ``moved``).
        pending: pods pending in the watched namespaces, for any reason.
        unbound: those pods' views by key (candidates or not).
        reserved: the pool's reserved Nodes: (Node name, the name it is reserved for).
        holds: each Node's own hold annotation (``""`` if none), for scale-down blockers.
        lookup: what the candidates' references found (the live reads of
            :meth:`Observer.observe`).
        budgets: the PodDisruptionBudgets, when a node that might go runs a workload pod.
        marked: the pool's Nodes this Autoscaler named unneeded (:mod:`.._unneeded`).
        drain_timed_out: when the NodePool controller gave up draining a Node, by name (it
            rests, out of scale-down, for a while after).
        rivals: the other Autoscalers watching one of its namespaces, as options for the
            choice of who scales for a pod (:mod:`._choice`), by name.
        read_at: when the cache was read (the pods, and their ``first_seen`` frozen with
            them), on that monotonic clock. The controller decides, and remembers it planned,
            as of then: a candidate the watch brings later is not in this snapshot.
    """

    scaler: Autoscaler
    generation: int
    pool: NodePool
    template: NodeTemplate
    nodes: PoolNodes
    target: int
    pending: int
    candidates: tuple[PendingPod, ...]
    unbound: Mapping[str, PodView]
    reserved: tuple[tuple[str, str], ...]
    holds: Mapping[str, str]
    raw: Raw
    moved: bool = False
    lookup: Lookup = field(default_factory=Lookup)
    budgets: tuple[PdbView, ...] = ()
    marked: frozenset[str] = frozenset()
    drain_timed_out: Mapping[str, float] = field(default_factory=dict)
    rivals: tuple[Option, ...] = ()
    read_at: float = 0.0

    @property
    def pool_name(self) -> str:
        return self.scaler.spec.node_pool_ref.name


@dataclass(frozen=True, slots=True)
class Gathering:
    """A burst of ``candidates`` is still coming in: look again in ``wait`` seconds."""

    wait: float
    candidates: int
    seen: Observation
    """What the cache holds (the live reads not made yet): enough to nominate from."""


@dataclass(frozen=True, slots=True)
class Unready:
    """Why the Autoscaler cannot plan: its Ready condition's reason and message."""

    obj: Object
    reason: str
    message: str
    requeue_after: float | None = None


def template_of(
    pool: NodePool,
    inputs: TemplateInputs,
    nodes: Iterable[Object],
    scope_labels: Mapping[str, str],
    daemonsets: Sequence[DaemonSetView],
) -> NodeTemplate:
    """The node template of ``pool`` (whose registered Nodes are ``nodes``): from the
    cloud's types and its node class (``inputs``), with the memory its machines report;
    when the pool launches into zones, with the cloud's region, as its Nodes register (the
    zone label is the plan's, per zone), so a pod selecting the region fits.

    Raises:
        ValueError: no template can be made (see :func:`pool_template`).
    """
    template = pool_template(
        pool,
        inputs.catalogue,
        scope_labels=scope_labels,
        daemonsets=daemonsets,
        node_class=inputs.node_class,
        memory=machine_memory(nodes, pool.spec.instance_type),
    )
    if not (pool.status.zones and inputs.region):
        return template
    return replace(template, labels={**template.labels, REGION_LABEL: inputs.region})


def snapshot(
    obj: Object,
    scaler: Autoscaler,
    pool_obj: Object,
    *,
    pods: Iterable[Object],
    nodes: Sequence[Object],
    pods_on: Callable[[str], Iterable[Object]],
    daemonsets: Sequence[DaemonSetView] = (),
    scope_labels: Mapping[str, str] | None = None,
    first_seen: Callable[[str], float],
    rivals: Sequence[Option] = (),
    template_inputs: TemplateInputs | None = None,
    read_at: float = 0.0,
) -> Observation | Unready:
    """The observation of what was read: the Autoscaler (``obj``, parsed as ``scaler``), its
    pool, the pods of its namespaces, the pool's Nodes (``pods_on(name)``: the pods bound to
    one) and the DaemonSets; ``first_seen(key)``: when the watch showed the pod of that key
    (its view's ``key``) unschedulable; ``template_inputs``: the cloud's instance types and
    the pool's node class (default: the simulated catalogue, no class); ``read_at``: when
    the pods were read, on ``first_seen``'s clock.
    Pure, so tests observe a fixed snapshot the way the controller observes its cache."""
    pool_name = scaler.spec.node_pool_ref.name
    inputs = template_inputs or TemplateInputs(CATALOGUE, None)
    try:
        pool = parse_nodepool(pool_obj)
        template = template_of(pool, inputs, nodes, scope_labels or {}, daemonsets)
    except ValueError as err:  # InvalidField is a ValueError too
        return Unready(obj, INVALID_NODEPOOL, f"NodePool {pool_name}: {err}")
    candidates: list[PendingPod] = []
    unbound: dict[str, PodView] = {}
    raw_pods: dict[str, Object] = {}
    by_name = {object_name(n): n for n in nodes}
    for pod in pods:
        read = read_pending(pod)  # the one read of the pod
        view = read.view
        if view is None:  # bound or going: not pending
            continue
        unbound[view.key] = view
        raw_pods[view.key] = pod
        # a pod nominated to one of the pool's Nodes (ours) is still waiting for it
        if read.candidate_on(by_name):
            candidates.append(PendingPod(view, first_seen(view.key)))
    summary = pool_nodes(nodes, pods_on, daemonsets=daemonsets, booting_taints=template.taints)
    return Observation(
        scaler=scaler,
        generation=scaler.metadata.generation,
        pool=pool,
        template=template,
        nodes=summary,
        target=pool.spec.target_nodes,
        pending=len(unbound),
        candidates=tuple(candidates),
        unbound=unbound,
        reserved=tuple(
            (name, held)
            for name, node in by_name.items()
            if (held := reserved_for(node_fields(node))) is not None
        ),
        holds={view.name: view.hold for view in map(node_view, nodes)},
        raw=Raw(obj, pool_obj, by_name, raw_pods),
        marked=frozenset(name for name, node in by_name.items() if is_marked(node)),
        drain_timed_out={
            name: when for name, node in by_name.items() if (when := timed_out_at(node))
        },
        rivals=tuple(sorted(rivals, key=lambda o: o.name)),
        read_at=read_at,
    )


class Observer:
    """Reads for the Autoscaler controller, from the informers it shares with the NodePool
    controller (indexed by :mod:`._watch`) and, for references, live."""

    def __init__(
        self,
        client: Client,
        *,
        autoscalers: Informer,
        nodes: Informer,
        pods: Informer,
        daemonsets: Informer,
        cache: Cache,
        label_selector: str | None,
        scope_labels: Mapping[str, str],
        first_seen: Callable[[], Seen],
        template_sources: TemplateSources | None = None,
    ) -> None:
        self._client = client
        self._sources = template_sources or TemplateSources(client, None)
        self._autoscalers = autoscalers
        self._nodes = nodes
        self._pods = pods
        self._daemonsets = daemonsets
        self._cache = cache
        self._selector = label_selector
        self._scope_labels = scope_labels
        self._first_seen = first_seen

    async def observe(
        self,
        req: Request,
        *,
        planned_at: float | None,
        clock: Callable[[], float],
        window: float,
    ) -> Observation | Gathering | Unready | None:
        """Read what planning needs (``None``: the Autoscaler is gone or going): the cache's
        objects, then, once the burst of candidates seen after ``planned_at`` (when this
        Autoscaler last planned) has been quiet for ``window`` seconds on ``clock`` (read
        after the cache, :func:`~._batching.batch_wait`), the live reads: what the
        candidates reference, and, when scale-down is on and a node that might go runs a
        workload pod, every namespace's budgets (a node whose pods a budget lets go now is
        named before one it would hold; a kube-system pod no budget covers blocks its
        node)."""
        # Through the cache, not the store: a read right after our own status write waits
        # for the watch to bring that write back, so the next write does not conflict.
        obj = await self._get(AUTOSCALERS, req.name)
        if obj is None or deleting(obj):
            return None
        seen = await self._read(obj)
        if isinstance(seen, Unready):
            return seen
        now = clock()  # after the cache: every candidate it holds was seen by then
        first_seen = [p.first_seen for p in seen.candidates]
        wait = batch_wait(first_seen, now=now, window=window, planned_at=planned_at)
        if wait > 0:
            return Gathering(wait, len(first_seen), seen)
        # what each candidate references, where: the objects to look up, not the pods
        wanted = [(p.view.ref.namespace, p.view.references) for p in seen.candidates]
        lookup = await look_up(self._client, wanted)
        budgets: list[PdbView] = []
        if seen.scaler.spec.scale_down_enabled:
            views = [pod for node in seen.nodes.candidates for pod in node.pods]
            if any(pod.workload for pod in views):
                items, _ = await self._client.list_all(PDBS)
                budgets = [pdb_view(item) for item in items]
        return replace(seen, lookup=lookup, budgets=tuple(budgets))

    async def _read(self, obj: Object) -> Observation | Unready:
        """What the cache holds for planning (the live reads not made yet), or why the
        Autoscaler cannot plan."""
        try:
            scaler = parse_autoscaler(obj)
        except InvalidField as err:
            # Admission should have refused it; a spec fix is a generation change, which
            # brings the Autoscaler back: nothing to retry until then.
            return Unready(obj, INVALID_SPEC, str(err))
        pool_name = scaler.spec.node_pool_ref.name
        owner = self._pool_owner(obj, pool_name)
        if owner is not None:
            note = f"NodePool {pool_name} is already scaled by Autoscaler {owner}; this one is idle"
            return Unready(obj, CONFLICTING_AUTOSCALER, note, REFUSED_RECHECK)
        pool_obj = await self._get(NODEPOOLS, pool_name)
        if pool_obj is None:
            return self.pool_not_found(obj, pool_name)
        inputs = None
        try:
            inputs = await self._sources.read(parse_nodepool(pool_obj))
        except InvalidField:
            pass  # the snapshot reports the pool as invalid
        except NodeClassUnavailable as err:
            return Unready(obj, INVALID_NODEPOOL, f"NodePool {pool_name}: {err}", err.retry_after)
        except CloudError as err:
            note = f"NodePool {pool_name}: instance types: {err}"
            return Unready(obj, INSTANCE_TYPES_UNAVAILABLE, note, err.retry_after or 5.0)
        pods = self._pods.store
        daemonsets = self._daemonset_views()
        rivals = await self._rivals(obj, scaler, daemonsets)
        # The cache is read here, on the loop that writes it; reading what was read (a pod's
        # view is ~0.5 ms the first time: 2,000 new pods would hold the loop for a second) is
        # pure and runs in a worker thread, so watches and probes are answered meanwhile.
        nodes = self._nodes.store.by_index(NODE_POOL, pool_name)
        bound = {name: pods.by_index(POD_NODE, name) for name in map(object_name, nodes)}
        # Frozen on the loop with the pods, no await between: the thread must not see the
        # handler's times move under it, and the pass plans as of this read. A time taken
        # after the thread made the candidates the watch brought meanwhile (not in this
        # snapshot) count as planned: the next pass planned them at once, without the window.
        seen = self._first_seen()
        return await asyncio.to_thread(
            snapshot,
            obj,
            scaler,
            pool_obj,
            pods=[p for ns in scaler.spec.namespaces for p in pods.by_index(BY_NAMESPACE, ns)],
            nodes=nodes,
            pods_on=lambda node: bound.get(node, []),
            daemonsets=daemonsets,
            scope_labels=self._scope_labels,
            first_seen=seen,
            read_at=seen.at,
            rivals=rivals,
            template_inputs=inputs,
        )

    def pool_not_found(self, obj: Object, pool: str) -> Unready:
        scope = f" with labels {self._selector}" if self._selector else ""
        return Unready(obj, NODEPOOL_NOT_FOUND, f"NodePool {pool}{scope} not found")

    async def _get(self, res: Resource, name: str) -> Object | None:
        return await self._cache.get(res, name, label_selector=self._selector)

    def _pool_owner(self, obj: Object, pool_name: str) -> str | None:
        """The name of the Autoscaler that scales ``pool_name`` if it is another one: of all
        live Autoscalers naming the pool, the oldest (then the first by name) owns it."""

        def age(o: Object) -> tuple[str, str]:
            meta = o["metadata"]
            return (str(meta.get("creationTimestamp") or ""), str(meta["name"]))

        rivals = [
            o for o in self._autoscalers.store.by_index(BY_POOL, pool_name) if not deleting(o)
        ]
        if not rivals:
            return None
        first = min([obj, *rivals], key=age)
        name = str(first["metadata"]["name"])
        return None if name == obj["metadata"]["name"] else name

    async def _rivals(
        self, obj: Object, scaler: Autoscaler, daemonsets: Sequence[DaemonSetView]
    ) -> list[Option]:
        """The other live Autoscalers sharing a namespace with ``scaler``, each with its pool
        as the cache has it; one that is idle behind another on its pool, or whose spec or
        pool is missing or invalid, is no option (its own status says why)."""
        rivals: list[Option] = []
        watched = set(scaler.spec.namespaces)
        for other in self._autoscalers.store.list():
            if object_name(other) == object_name(obj) or deleting(other):
                continue
            try:
                rival = parse_autoscaler(other)
            except InvalidField:
                continue
            pool_name = rival.spec.node_pool_ref.name
            if watched.isdisjoint(rival.spec.namespaces) or self._pool_owner(other, pool_name):
                continue
            pool_obj = await self._get(NODEPOOLS, pool_name)
            if pool_obj is None:
                continue
            try:
                pool = parse_nodepool(pool_obj)
                template = await self._rival_template(pool, daemonsets)
            except ValueError:
                continue
            nodes = self._nodes.store.by_index(NODE_POOL, pool_name)
            rivals.append(option(rival, pool, template, sum(not deleting(n) for n in nodes)))
        return rivals

    async def _rival_template(
        self, pool: NodePool, daemonsets: Sequence[DaemonSetView]
    ) -> NodeTemplate:
        """Another Autoscaler's pool's template, computed from the same inputs as that
        Autoscaler computes its own (:func:`snapshot`): the choice is only the same everywhere
        if the templates are.

        Raises:
            ValueError: the pool's template cannot be made (that Autoscaler is no option).
        """
        try:
            inputs = await self._sources.read(pool)
        except CloudError as err:  # its node class or the cloud's types: no template now
            raise ValueError(str(err)) from err
        nodes = self._nodes.store.by_index(NODE_POOL, pool.metadata.name or "")
        return template_of(pool, inputs, nodes, self._scope_labels, daemonsets)

    def _daemonset_views(self) -> list[DaemonSetView]:
        views = []
        for daemonset in self._daemonsets.store.list():
            try:
                views.append(daemonset_view(daemonset))
            except ValueError as err:  # the API validates quantities; count it as nothing
                log.warning("ignoring a DaemonSet: %s", err)
        return views
