"""Consolidation: a pool whose pods are spread over more nodes than they need goes back to the
fewest, by draining the nodes a repack frees.

Why: kube-scheduler places pods one at a time in arrival order, scoring nodes by its profile
(``LeastAllocated`` spreads them), so a burst can end up over more nodes than the plan needed,
each a little more than half used. The scale-down's rule (:mod:`._scaledown`, cluster-
autoscaler's) never finds such a node unneeded: it is above the utilisation threshold, or its
pods fit on the others only together with another node's. Karpenter's consolidation looks at
the pool as a whole instead; this is that look, within what a drain can do.

What :func:`consolidate` decides, from the pool's Ready nodes and the pods bound to them:

* the **optimum**: the fewest nodes the pods need, the nodes that must stay (below) as they
  are plus the movable pods planned onto template nodes by the scale-up plan itself
  (:func:`~._binpack.plan_scale_up`: first-fit-decreasing, then the exact search within its
  budget, with the plan's fit rules: resources, selectors, taints, pod (anti-)affinity,
  spread, host ports, the DaemonSets' overhead in the template);
* when the pool is above it by at least one node, the **nodes to free**: a set whose movable
  pods all have a place on the nodes that stay, as they are (their pods do not move: a drain
  moves only the pods of the nodes that go), simulated with the same rules. Candidates are
  taken in turn, least used first (then fewest pods first), nodes named before (``prefer``)
  ahead, so the choice is stable from one look to the next while the cluster is; each joins
  the set when the pods of the whole set still fit (first-fit-decreasing, then, a few times
  a decision, the exact search where no pod constrains another).

Nodes that stay whatever the plan: those a blocker keeps (a pod that cannot move: do-not-
disrupt, no controller, local storage, ... as the caller's ``blockers`` say, a do-not-disrupt
pod always) and those in ``held`` (a PodDisruptionBudget refuses an eviction now, a drain that
timed out resting). At most ``limit`` nodes are named (the pool's disruption budget): once they
are drained the scheduler places the moved pods where it likes, so the next ones are planned
from the cluster as it then is.

When no node can go that way (every node's pods need room the others lack, though the
optimum is lower), and the pool may grow (``grow``), a **replacement**: a set of nodes to
drain once some new template nodes are up, fewer new ones than drained, the drained pods
planned onto the nodes that stay and the new ones (Karpenter's multi-node replace, in a pool
of one node shape). Its candidates are taken in the same order, the set growing one node at a
time (up to :data:`REPLACE_NODES`); the set with the largest gain (drained minus new) is kept,
the smallest at equal gain, so a replacement disrupts no more nodes than its gain needs. Its
nodes are drained once the new ones are up, as many at once as the ``limit`` allows (a limit
of 0 now: no replacement now either).

What it does not do: move pods between nodes that stay. A layout whose optimum needs that
stays above it (:attr:`Consolidation.reachable` above :attr:`Consolidation.optimum` says by
how much, for the drain alone).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ._binpack import plan_scale_up
from ._blockers import Unremovable, node_blocker
from ._exact import SearchBudget
from ._firstfit import NodeState
from ._quantity import Resources
from ._scaledown import CHECK_BUDGET, ScaleDownNode, _state, place_on
from ._slots import Existing, NodeSlot
from ._template import NodeTemplate
from ._views import PodView

__all__ = ["EXACT_CHECKS", "REPLACE_NODES", "Consolidation", "Replacement", "consolidate"]

#: How many times one decision may ask the exact search whether a set of nodes can go, after
#: first-fit-decreasing said no (each within :data:`~._scaledown.CHECK_BUDGET`).
EXACT_CHECKS = 4

#: The most nodes one replacement drains: one packing per node tried, so a pool of hundreds
#: costs a few packings a decision; a larger excess is worked off by the next replacements.
REPLACE_NODES = 8

#: A pod moved by a drain: the pod (namespace/name), the node it leaves, the node it goes to
#: (a node's name; in a :class:`Replacement`, ``new:<i>`` for its ``i``-th new node).
Move = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Replacement:
    """Nodes to drain once ``new_nodes`` new template nodes are up: their pods have a place
    on the nodes that stay and the new ones, and fewer nodes are new than go.

    Attributes:
        drain: the nodes to drain, best first.
        new_nodes: the template nodes to launch first (fewer than ``drain``).
        new_zones: the zone of each new node (``()`` for a pool without zones).
        moves: where the plan put each pod of ``drain`` (see :data:`Move`), by pod.
    """

    drain: tuple[str, ...]
    new_nodes: int
    new_zones: tuple[str, ...] = ()
    moves: tuple[Move, ...] = ()

    @property
    def gain(self) -> int:
        """Nodes fewer once it is done."""
        return len(self.drain) - self.new_nodes


@dataclass(frozen=True, slots=True)
class Consolidation:
    """What :func:`consolidate` found.

    Attributes:
        nodes: the pool's nodes it looked at.
        optimum: the fewest nodes their pods need (an upper bound when the exact search ran
            out of budget: FFD's count); ``nodes`` when it cannot tell (a pod no template
            node takes).
        reachable: the nodes left once every node of the largest set found goes (with a
            ``limit``, the search stops at that many: then it is ``nodes`` minus ``free``).
        free: the nodes to drain now, best first, at most the ``limit``.
        moves: where the simulation put each pod of the nodes in ``free``: (the pod as
            namespace/name, the node it leaves, the node it goes to), by pod.
        replacement: when ``free`` is empty though the pool is above its optimum and may
            grow, the nodes to drain once new ones are up (:class:`Replacement`), if any.
    """

    nodes: int
    optimum: int
    reachable: int
    free: tuple[str, ...] = ()
    moves: tuple[Move, ...] = ()
    replacement: Replacement | None = None

    @property
    def above(self) -> int:
        """Nodes above the optimum."""
        return max(0, self.nodes - self.optimum)


def consolidate(
    nodes: Sequence[ScaleDownNode],
    *,
    template: NodeTemplate,
    blockers: Mapping[str, Unremovable] | None = None,
    held: Collection[str] = (),
    prefer: Collection[str] = (),
    limit: int | None = None,
    zones: Sequence[str] = (),
    search: SearchBudget = CHECK_BUDGET,
    grow: int = 0,
) -> Consolidation:
    """The optimum for ``nodes``' pods and the nodes to drain to get closer to it (see the
    module's docstring). ``template``: an empty node of the pool (what the optimum is counted
    in); ``zones``: the pool's zones, for the optimum's and a replacement's template nodes;
    ``grow``: how many nodes the pool may have above ``nodes`` while a replacement's new
    nodes come up (its maxNodes minus its nodes; 0: no replacement)."""
    count = len(nodes)
    stay = {n.name for n in nodes if _kept(n, blockers, held)}
    fixed = [n for n in nodes if n.name in stay]
    movable = [n for n in nodes if n.name not in stay]
    moving = [p for n in movable for p in _moving(n)]
    plan = plan_scale_up(
        moving,
        template=template,
        existing_nodes=[_state(n) for n in fixed],
        current_target=len(fixed),
        max_nodes=len(fixed) + len(moving),
        search=SearchBudget(search.max_steps * 4, search.max_seconds * 4, search.max_pods),
        zones=zones,
    )
    if plan.unschedulable:
        return Consolidation(count, count, count)
    optimum = min(count, len(fixed) + plan.new_nodes)
    if optimum >= count or not movable or (limit is not None and limit <= 0):
        return Consolidation(count, optimum, count)
    # With a limit, the search stops once it has that many: the next ones are chosen once
    # those are gone, from where the scheduler put their pods.
    most = count - optimum if limit is None else min(limit, count - optimum)
    order = _order(movable, prefer)
    going, moves = _largest_set(order, nodes, most, template, search)
    replacement = None
    if not going and grow > 0:
        # a drain alone frees nothing: trade some nodes for fewer new ones (drained later as
        # the budget allows, onto the new nodes and those that stay)
        most = min(len(order), REPLACE_NODES)
        replacement = _replacement(order, nodes, most, grow, count - optimum, template, zones)
    return Consolidation(
        count,
        optimum,
        count - len(going),
        tuple(n.name for n in going),
        tuple(sorted(moves)),
        replacement,
    )


def _kept(
    node: ScaleDownNode, blockers: Mapping[str, Unremovable] | None, held: Collection[str]
) -> bool:
    """Whether ``node`` stays whatever the plan: blocked, or held now."""
    if node.name in held or node.name in (blockers or {}):
        return True
    return node_blocker(node.name, node.pods, voluntary=False) is not None


def _moving(node: ScaleDownNode) -> list[PodView]:
    """The pods a drain of ``node`` moves: its workload pods not already terminating
    (DaemonSet and mirror pods go with the node)."""
    return [p for p in node.pods if p.workload and not p.terminating]


def _order(movable: Sequence[ScaleDownNode], prefer: Collection[str]) -> list[ScaleDownNode]:
    """The candidates, best to free first: those in ``prefer`` (named before: the choice
    stays put while the cluster does), then the least used, then those with the fewest pods
    to move."""
    usage = {n.name: n.utilization() for n in movable}
    pods = {n.name: len(_moving(n)) for n in movable}
    return sorted(
        movable, key=lambda n: (n.name not in prefer, usage[n.name], pods[n.name], n.name)
    )


def _largest_set(
    order: Sequence[ScaleDownNode],
    nodes: Sequence[ScaleDownNode],
    most: int,
    template: NodeTemplate,
    search: SearchBudget,
) -> tuple[list[ScaleDownNode], list[Move]]:
    """Nodes of ``order`` taken in turn (at most ``most``), each kept in the set when the pods
    of the whole set still all fit on the other ``nodes``; the set and where each pod goes.
    The whole set is placed again each time: a pod the simulation moved onto a node that
    joins the set later moves again. First-fit-decreasing answers first; the exact search
    is asked only :data:`EXACT_CHECKS` times in all, so a pool of hundreds of nodes whose
    candidates mostly do not fit costs FFD's time, not hundreds of searches."""
    going: list[ScaleDownNode] = []
    moves: list[Move] = []
    exact = EXACT_CHECKS
    for candidate in order:
        if len(going) >= most:
            break
        trying = [*going, candidate]
        found = _fits(trying, nodes, template, None)
        if found is None and exact > 0 and _roomy(trying, nodes):
            exact -= 1
            found = _fits(trying, nodes, template, search)
        if found is not None:
            going.append(candidate)
            moves = found
    return going, moves


def _split(
    going: Sequence[ScaleDownNode], nodes: Sequence[ScaleDownNode]
) -> tuple[list[PodView], list[NodeState]]:
    """The pods of ``going`` and the other ``nodes`` as they are."""
    names = {n.name for n in going}
    return [p for n in going for p in _moving(n)], [_state(n) for n in nodes if n.name not in names]


def _roomy(going: Sequence[ScaleDownNode], nodes: Sequence[ScaleDownNode]) -> bool:
    """Whether the other ``nodes`` have, together, the room for the pods of ``going`` (if not,
    no packing places them)."""
    pods, stay = _split(going, nodes)
    total = Resources()
    for pod in pods:
        total += pod.requests
    room = Resources()
    for state in stay:
        room += state.free
    return total.fits_in(room)


def _fits(
    going: Sequence[ScaleDownNode],
    nodes: Sequence[ScaleDownNode],
    template: NodeTemplate,
    search: SearchBudget | None,
) -> list[Move] | None:
    """Whether the pods of ``going`` all have a place on the other ``nodes`` (``search``: the
    exact search's budget, ``None`` for FFD alone); where each goes."""
    pods, stay = _split(going, nodes)
    source = {id(p): n.name for n in going for p in _moving(n)}
    placed = place_on(pods, stay, template.allocatable, search)
    if placed is None:
        return None
    return [(str(pod.ref), source[id(pod)], node) for pod, node in placed[1]]


def _replacement(
    order: Sequence[ScaleDownNode],
    nodes: Sequence[ScaleDownNode],
    most: int,
    grow: int,
    wanted: int,
    template: NodeTemplate,
    zones: Sequence[str],
) -> Replacement | None:
    """The best trade of the first nodes of ``order`` (at most ``most``) for fewer new template
    nodes (at most ``grow``): each prefix's pods planned onto the other ``nodes`` and new ones
    by the scale-up plan (first-fit-decreasing alone: one plan per prefix, so a pool of
    hundreds of nodes costs ``most`` packings). The largest gain wins, the shortest prefix at
    equal gain; the search ends once the gain is ``wanted`` (the pool at its optimum)."""
    best: Replacement | None = None
    going: list[ScaleDownNode] = []
    for candidate in order:
        if len(going) >= most:
            break
        going.append(candidate)
        pods, stay = _split(going, nodes)
        plan = plan_scale_up(
            pods,
            template=template,
            existing_nodes=stay,
            current_target=len(stay),
            max_nodes=len(stay) + min(grow, len(going) - 1),
            search=None,
            zones=zones,
        )
        if plan.unschedulable or len(going) - plan.new_nodes <= (best.gain if best else 0):
            continue
        source = {str(p.ref): n.name for n in going for p in _moving(n)}
        moves = [(str(p.pod), source[str(p.pod)], _slot_name(p.node)) for p in plan.placements]
        best = Replacement(
            tuple(n.name for n in going),
            plan.new_nodes,
            tuple(plan.new_zones),
            tuple(sorted(moves)),
        )
        if best.gain >= wanted:
            break
    return best


def _slot_name(slot: NodeSlot) -> str:
    """A node of a replacement's plan: a node that stays by name, a new one as ``new:<i>``."""
    return slot.name if isinstance(slot, Existing) else str(slot)
