"""The fewest new nodes, exactly: local search, then branch-and-bound, after first-fit-decreasing.

Why: FFD is never far off (11/9·OPT + 6/9 nodes), but on workloads of a few dozen pods with two
or three resources it opens a node more than needed in about one workload in eight
(``bench/packing.py`` measures it against an independent integer-programming solver). A node too
many is paid for every hour it runs, so the planner looks for a plan with fewer new nodes
whenever FFD's is not proven optimal by a lower bound.

Two searches share the budget. First the repair phase (:mod:`._repair`), with three quarters:
a local search that asks whether the pods fit one new node fewer than the best plan so far, and
then one fewer again, down to the root lower bound. Then the tree search below, with the rest
and the repair's plan as the bound to beat: it proves an optimum above the root bound (local
search proves nothing) and finds plans the repair misses. Repair comes first because when a
plan with fewer nodes exists it finds it sooner, mostly well within the budget: on the packing
benchmark's 28 workloads of up to 40 pods where FFD is above the proven optimum, the tree
search alone with 20,000 steps and no clock missed the optimum on 6 of them, both together on
none, and on none within the default budget either.

How the tree search works: a search over the pods, largest first. Each pod goes into an open
node that has room (a ready node's free room, a booting node, or a new node opened earlier in
the branch), fullest first, or into a freshly opened template node. Only new nodes cost; ready
and booting ones are free. A branch is cut as soon as the nodes it opened plus a lower bound for
the pods left reach the best plan known, which starts as FFD's, so the result is never worse
than FFD.

The search is limited-discrepancy (Harvey and Ginsberg): pass d follows the fullest-bin choice
but for at most d deviations, so a small budget is spent re-deciding the first, large pods rather
than, as depth-first would, the last few small ones; a pass that skipped no choice was exhaustive.
The budget is split over restarts with other pod orders (dominant share, each resource alone,
then seeded random weights of the resources): a bad first decision in one order is not one in
another. On the packing benchmark's hard workloads (FFD above the optimum, up to 40 pods), with
20,000 steps and no clock, depth-first over four orders missed the optimum on 10 of 33 and this
on 6; with 3,000 steps, on 7.

Resources no node can run short of (all the pods together fit the least room of any node, as
``pods`` nearly always does) are left out, which makes every step cheaper.

Lower bounds, per resource, for the pods left: their total request minus the room left in open
nodes, in template nodes (the "continuous" bound); and the same count through Fekete and
Schepers' dual feasible functions u^(1) and u^(2) (a pod above half a node counts as a whole
one, above a third as half), less what the open nodes can still take by that measure. At the
root, also Martello and Toth's L2 bound per resource and a clique of pairwise-incompatible pods;
when FFD meets that bound it is optimal and no search runs, which is the common case.

Symmetry, which is what makes the search small: identical pods (same requests and constraints)
take nodes in non-decreasing order; among template nodes with the same free room only the first
is tried, which also means a new node is opened only when no empty booting node is left.

The search has a budget (:class:`SearchBudget`): branch nodes and wall-clock time. When it runs
out, the best plan found so far stands, so the planner degrades to FFD and never blocks the event
loop for long. A step costs tens of microseconds in CPython, so on a shared or slow CPU the clock
runs out before the steps do and the plan may then depend on the machine's speed; pass a budget
whose clock cannot bind (as the tests do) for plans that depend on the input alone.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import le, mul
from typing import TYPE_CHECKING, Protocol

from ._firstfit import NodeState, Packing, Placement, first_fit
from ._fit import check_constraints
from ._quantity import Resources
from ._repair import Repair
from ._slots import Booting, Existing, New, NodeSlot
from ._views import PodView
from ._zones import ZoneCounts

if TYPE_CHECKING:
    from ._template import NodeTemplate, Taint

__all__ = ["DEFAULT_BUDGET", "ExactPacking", "SearchBudget", "pack", "pack_fewest"]


@dataclass(frozen=True, slots=True)
class SearchBudget:
    """How long the exact search may run before the best plan so far stands.

    Attributes:
        max_steps: branch-and-bound nodes to visit, and the repair phase's steps (a pod moved
            to a bin weighed); tens of µs each. When this binds before the clock, plans are
            deterministic: the same input stops at the same step.
        max_seconds: wall-clock limit, the backstop when the CPU is slow or shared.
        max_pods: above this many pods, no search runs (FFD's plan stands): the search recurses
            once per pod, and FFD's relative waste shrinks as the count grows.
    """

    # 40,000 steps: the packing benchmark's workload 74 (38 pods, three resources) needs more
    # than 20,000 to reach its optimum; 60 ms keeps the planning p99 well under 100 ms.
    max_steps: int = 40_000
    max_seconds: float = 0.06
    max_pods: int = 400

    def __post_init__(self) -> None:
        if self.max_steps < 0 or self.max_seconds < 0 or self.max_pods < 0:
            raise ValueError(f"search budget must be non-negative, got {self}")


DEFAULT_BUDGET = SearchBudget()
"""What :func:`~._binpack.plan_scale_up` uses unless told otherwise."""


@dataclass(frozen=True, slots=True)
class ExactPacking:
    """A plan with fewer new nodes than the bound :func:`pack_fewest` was asked to beat.

    Attributes:
        labels: the node of each entry, in the entries' order (as
            :class:`~._binpack.Placement` says it).
        new_nodes: new template nodes the plan opens.
        proven: whether no plan with fewer new nodes exists (the search finished or met the
            lower bound); ``False`` when the budget ran out first.
        steps: branch-and-bound nodes visited plus the repair phase's steps.
    """

    labels: tuple[NodeSlot, ...]
    new_nodes: int
    proven: bool
    steps: int


class PackEntry(Protocol):
    """What the search reads of a pending pod (``_firstfit._Pending`` fits)."""

    @property
    def pod(self) -> PodView: ...

    @property
    def requests(self) -> Resources: ...

    @property
    def constraints(self) -> str: ...


class FreeNode(Protocol):
    """What the search reads of a ready node (``NodeState`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def free(self) -> Resources: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> tuple[Taint, ...]: ...


def pack(
    pods: Sequence[PodView],
    template: NodeTemplate,
    existing_nodes: Sequence[NodeState],
    in_flight: int,
    allowed_new: int,
    zones: ZoneCounts,
    budget: SearchBudget | None,
) -> Packing:
    """The pods packed onto the pool's nodes with the fewest new ones found: first-fit-
    decreasing's packing (:func:`~._firstfit.first_fit`, which admits the pods first) is the
    incumbent, and when it opened nodes or ran out of them the search below looks for fewer,
    within ``budget`` (``None``: FFD's stands).

    The search knows resources, selectors and taints, not other pods nor zones: it may only
    improve a packing none of whose pods (pending or already placed) constrains another or
    needs a zone (:attr:`~._firstfit.Packing.plain`), so the zone targets FFD found stand.
    """
    first = first_fit(pods, template, existing_nodes, in_flight, allowed_new, zones)
    if budget is None or not first.plain or not (first.new_nodes or first.overflow):
        return first
    # FFD may open a node too many; when it ran out, all pods may still fit within the limit.
    exact = pack_fewest(
        first.entries,
        template.allocatable,
        existing_nodes,
        in_flight,
        fewer_than=allowed_new + 1 if first.overflow else first.new_nodes,
        budget=budget,
    )
    if exact is None:
        return first
    return replace(
        first,
        placements=tuple(
            Placement(e.ref, label) for e, label in zip(first.entries, exact.labels, strict=True)
        ),
        new_nodes=exact.new_nodes,
        overflow=(),
        new_zones=first.new_zones[: exact.new_nodes],
    )


def pack_fewest(
    entries: Sequence[PackEntry],
    room: Resources,
    existing_nodes: Sequence[FreeNode],
    in_flight: int,
    *,
    fewer_than: int,
    budget: SearchBudget,
) -> ExactPacking | None:
    """Place every entry using fewer than ``fewer_than`` new template nodes, if it can be done.

    Args:
        entries: pods that fit an empty template node (the planner's admitted candidates).
        room: what an empty template node offers (its allocatable): the search knows
            resources, not labels or taints (``entries`` fit the template already).
        existing_nodes: ready nodes with their free room; a pod goes on one only if its
            selector, affinity and tolerations allow.
        in_flight: booting nodes, each an empty template node that costs nothing.
        fewer_than: the bound to beat, usually FFD's count of new nodes.
        budget: when to stop searching.

    Returns:
        The plan with the fewest new nodes found, or ``None`` when none below ``fewer_than``
        was found (none exists, or the budget ran out first).
    """
    if fewer_than <= 0 or not entries or len(entries) > budget.max_pods:
        return None
    deadline = time.perf_counter() + budget.max_seconds
    first = _Problem.build(entries, room, existing_nodes, max(in_flight, 0))
    root = first.root_bound()  # a property of the pods, whatever their order
    if root >= fewer_than:
        return None  # nothing better exists than what we have
    # Repair first, with most of the budget: it finds a plan with fewer nodes sooner when one
    # exists. The tree search gets the rest, and a better bound to beat if repair found one:
    # it proves an optimum above the root bound, and finds plans repair misses.
    best: _Found | None = None
    repair_share = 100 - _TREE_SHARE
    repaired, steps = _repair(
        first,
        root,
        fewer_than,
        SearchBudget(
            budget.max_steps * repair_share // 100, budget.max_seconds * repair_share / 100
        ),
    )
    if repaired is not None:
        best = (first, *repaired)
    proven = best is not None and best[2] <= root
    if not proven:
        left = SearchBudget(
            budget.max_steps - steps, max(deadline - time.perf_counter(), 0.0), budget.max_pods
        )
        bound = best[2] if best is not None else fewer_than
        found, tree_steps, proven = _tree_search(
            entries, room, existing_nodes, in_flight, first, root, bound, left
        )
        steps += tree_steps
        best = found or best
    if best is None:
        return None
    problem, assignment, nodes = best
    return ExactPacking(
        labels=problem.labels(assignment),
        new_nodes=nodes,
        proven=proven,
        steps=steps,
    )


_Found = tuple["_Problem", list[int], int]


def _tree_search(
    entries: Sequence[PackEntry],
    room: Resources,
    existing_nodes: Sequence[FreeNode],
    in_flight: int,
    first: _Problem,
    root: int,
    fewer_than: int,
    budget: SearchBudget,
) -> tuple[_Found | None, int, bool]:
    """The branch-and-bound over the pod orders: the best plan found, steps taken, proven."""
    # A depth-first search that starts in a poor subtree can spend its whole budget there, so
    # the budget is split over a few restarts with other pod orders (largest dominant share,
    # then largest of each resource), each trying to beat the best plan so far.
    deadline = time.perf_counter() + budget.max_seconds
    best: _Found | None = None
    steps = 0
    bound = fewer_than
    for attempt, order in enumerate(_ORDERS):
        if root >= bound:
            return best, steps, True
        problem = (
            first
            if attempt == 0
            else _Problem.build(entries, room, existing_nodes, max(in_flight, 0), order)
        )
        left = budget.max_steps - steps
        share = left if attempt == len(_ORDERS) - 1 else left // (len(_ORDERS) - attempt)
        seconds = deadline - time.perf_counter()
        if share <= 0 or seconds <= 0:
            break
        search = _Search(problem, bound, SearchBudget(share, seconds, budget.max_pods), root)
        search.run()
        steps += search.steps
        if search.best_assignment is not None:
            best = (problem, search.best_assignment, search.best)
            bound = search.best
        if search.proven:
            return best, steps, True
    return best, steps, False


def _repair(
    problem: _Problem, root: int, fewer_than: int, budget: SearchBudget
) -> tuple[tuple[list[int], int] | None, int]:
    """Local search for plans into ``fewer_than - 1`` new nodes, then fewer, down to ``root``.

    Each target is a fresh search seeded by the target, so the plan depends on the input and
    the step budget alone. Returns the plan with the fewest new nodes found (the assignment
    and its count) or ``None``, and the steps taken.
    """
    deadline = time.perf_counter() + budget.max_seconds
    best: tuple[list[int], int] | None = None
    steps = 0
    target = fewer_than - 1
    free_bins = len(problem.fixed)
    while target >= root and steps < budget.max_steps:
        search = Repair(
            problem.cap, problem.items, problem.fixed, problem.compatible, target, seed=target
        )
        assignment = search.run(budget.max_steps - steps, deadline)
        steps += search.steps
        if assignment is None:
            break
        # New bins left empty are not opened; the rest are numbered from 0.
        opened = sorted({b for b in assignment if b >= free_bins})
        renumber = {b: free_bins + i for i, b in enumerate(opened)}
        best = ([renumber.get(b, b) for b in assignment], len(opened))
        target = len(opened) - 1
    return best, steps


Vector = tuple[int, ...]
#: The pod orders of the restarts: dominant share, then each of the first three resources.
_FIXED_ORDERS = 3
#: The weight of the sum of a bin's room next to its largest share, in best fit: a tie-break.
_TIE = 0.01
_ORDERS = (-1, 0, 1, 2, *range(_FIXED_ORDERS, _FIXED_ORDERS + 8))
#: Percent of the steps and seconds kept for the tree search; the repair phase runs first on
#: the rest. The tree search also gets what the repair phase leaves.
_TREE_SHARE = 25


@dataclass(frozen=True, slots=True)
class _Problem:
    """The instance as integer vectors over the resources the pods ask for, sorted for search."""

    cap: Vector
    items: tuple[Vector, ...]
    order: tuple[int, ...]
    """``order[k]`` is the entry index of the k-th item searched."""
    same_as_previous: tuple[bool, ...]
    """Whether item k is identical to item k-1 (requests and constraints)."""
    fixed: tuple[Vector, ...]
    """Free room of the free bins: existing nodes (name order), then booting nodes."""
    existing_names: tuple[str, ...]
    compatible: tuple[tuple[bool, ...], ...]
    """``compatible[k][b]``: item k may go on existing node b."""

    @classmethod
    def build(
        cls,
        entries: Sequence[PackEntry],
        room: Resources,
        existing_nodes: Sequence[FreeNode],
        in_flight: int,
        order_by: int = -1,
    ) -> _Problem:
        """``order_by``: -1 sorts pods by dominant share (as FFD), ``r >= 0`` by resource r."""
        nodes = sorted(existing_nodes, key=lambda n: n.name)
        asked = sorted({n for e in entries for n, amount in e.requests.items() if amount})
        # A resource no node can run short of (all pods together fit the least room any node
        # has, as ``pods`` usually does) constrains nothing: leaving it out makes every step
        # of the search cheaper and the bounds no weaker.
        names = [
            n
            for n in asked
            if sum(e.requests.get(n) for e in entries)
            > min([room.get(n), *(node.free.get(n) for node in nodes)])
        ] or asked[:1]
        cap = tuple(room.get(n) for n in names)
        vectors = [tuple(e.requests.get(n) for n in names) for e in entries]
        shares = [[a / c for a, c in zip(v, cap, strict=True)] for v in vectors]

        if order_by >= _FIXED_ORDERS:
            # A restart past the fixed orders weighs the resources at random (seeded by the
            # attempt, so plans stay deterministic): another largest-first order.
            rng = random.Random(order_by)
            weights = [rng.random() for _ in names]

        def lead(i: int) -> float:
            if order_by >= _FIXED_ORDERS:
                return -sum(w * x for w, x in zip(weights, shares[i], strict=True))
            if 0 <= order_by < len(names):
                return -shares[i][order_by]
            return -max(shares[i], default=0.0)

        order = sorted(
            range(len(entries)),
            key=lambda i: (lead(i), -sum(shares[i]), vectors[i], entries[i].constraints),
        )
        items = tuple(vectors[i] for i in order)
        same = tuple(
            k > 0
            and items[k] == items[k - 1]
            and entries[order[k]].constraints == entries[order[k - 1]].constraints
            for k in range(len(order))
        )
        per_class: dict[str, tuple[bool, ...]] = {}
        compatible: list[tuple[bool, ...]] = []
        for i in order:
            entry = entries[i]
            row = per_class.get(entry.constraints)
            if row is None:
                row = tuple(
                    bool(check_constraints(entry.pod, n.labels, n.taints, n.name)) for n in nodes
                )
                per_class[entry.constraints] = row
            compatible.append(row)
        fixed = tuple(tuple(n.free.get(r) for r in names) for n in nodes) + (cap,) * in_flight
        return cls(
            cap=cap,
            items=items,
            order=tuple(order),
            same_as_previous=same,
            fixed=fixed,
            existing_names=tuple(n.name for n in nodes),
            compatible=tuple(compatible),
        )

    def root_bound(self) -> int:
        """A lower bound on the new nodes any plan needs."""
        dims = range(len(self.cap))
        bound = 0
        for r in dims:
            need = sum(v[r] for v in self.items) - sum(max(f[r], 0) for f in self.fixed)
            bound = max(bound, _ceil_div(need, self.cap[r]))
        # L2 and the clique bound count whole template nodes; ready nodes are subtracted as if
        # each were a full template node, which is valid only if none has more room than one.
        if all(all(f[r] <= self.cap[r] for r in dims) for f in self.fixed):
            free_bins = len(self.fixed)
            for r in dims:
                bound = max(bound, _l2([v[r] for v in self.items], self.cap[r]) - free_bins)
            bound = max(bound, self._clique() - free_bins)
        return bound

    def _clique(self) -> int:
        """Pods that pairwise cannot share a template node, found greedily largest first."""
        members: list[Vector] = []
        for item in self.items:
            if all(_conflict(item, other, self.cap) for other in members):
                members.append(item)
        return len(members)

    def labels(self, assignment: Sequence[int]) -> tuple[NodeSlot, ...]:
        existing = len(self.existing_names)
        free_bins = len(self.fixed)
        out: list[NodeSlot] = [New(-1)] * len(assignment)
        for k, b in enumerate(assignment):
            label: NodeSlot
            if b < existing:
                label = Existing(self.existing_names[b])
            elif b < free_bins:
                label = Booting(b - existing)
            else:
                label = New(b - free_bins)
            out[self.order[k]] = label
        return tuple(out)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b) if a > 0 else 0


def _conflict(a: Vector, b: Vector, cap: Vector) -> bool:
    return any(x + y > c for x, y, c in zip(a, b, cap, strict=True))


def _l2(sizes: Sequence[int], cap: int) -> int:
    """Martello and Toth's L2 lower bound for one-dimensional bin packing."""
    sizes = sorted((s for s in sizes if s > 0), reverse=True)
    if not sizes:
        return 0
    best = _ceil_div(sum(sizes), cap)
    for k in {0, *(s for s in sizes if 2 * s <= cap)}:
        big = [s for s in sizes if s > cap - k]
        middle = [s for s in sizes if cap - k >= s and 2 * s > cap]
        small = sum(s for s in sizes if 2 * s <= cap and s >= k)
        room = len(middle) * cap - sum(middle)
        best = max(best, len(big) + len(middle) + _ceil_div(small - room, cap))
    return best


class _Budget(Exception):
    """The search ran out of steps or time."""


class _Proven(Exception):
    """A plan meeting the root lower bound was found: nothing better exists."""


#: The dual feasible functions the bounds use, by parameter: 0 is the identity (the
#: continuous bound); k >= 1 is Fekete and Schepers' u^(k), which counts a pod above 1/(k+1) of
#: a node as 1/k of one (so k = 1 says pods above half a node cannot share one).
_DFF_PARAMETERS = (0, 1, 2)


def _dff(amount: int, cap: int, k: int) -> int:
    """u^(k)(amount / cap), scaled by ``k * cap`` (``cap`` for the identity) to stay integer."""
    if k == 0 or ((k + 1) * amount) % cap == 0:
        return amount * max(k, 1)
    return ((k + 1) * amount // cap) * cap


class _Search:
    """Depth-first branch-and-bound; bins are lists of free room, mutated in place.

    The bound: for any dual feasible function f and resource r, the pods in one node have
    ``sum f(request_r / allocatable_r) <= 1``. So the pods left, minus what the open bins can
    still take by that measure (1 minus their own pods' sum), need that many new nodes at least.
    Each bin keeps its sums for every (resource, f) pair, updated as pods come and go.
    """

    def __init__(
        self, problem: _Problem, fewer_than: int, budget: SearchBudget, root_bound: int
    ) -> None:
        self.p = problem
        self.best = fewer_than
        self.best_assignment: list[int] | None = None
        self.proven = False
        self.steps = 0
        self._budget = budget
        self._deadline = time.perf_counter() + budget.max_seconds
        n, dims = len(problem.items), len(problem.cap)
        cap = problem.cap
        pairs = [(r, k) for r in range(dims) for k in _DFF_PARAMETERS]
        self._scale = tuple(cap[r] * max(k, 1) for r, k in pairs)
        self._values = [tuple(_dff(item[r], cap[r], k) for r, k in pairs) for item in problem.items]
        width = len(pairs)
        # Suffix sums of the pods' values and per resource the least any pod left asks for.
        self._left = [[0] * width for _ in range(n + 1)]
        self._smallest = [[math.inf] * dims for _ in range(n + 1)]
        for k in range(n - 1, -1, -1):
            self._left[k] = [a + b for a, b in zip(self._left[k + 1], self._values[k], strict=True)]
            self._smallest[k] = [
                min(a, b) for a, b in zip(self._smallest[k + 1], problem.items[k], strict=True)
            ]
        self._weights = [1 / c for c in cap]
        self._bins: list[list[int]] = [list(f) for f in problem.fixed]
        # A ready node is a template node holding a phantom pod of its used room; one with more
        # room than a template node in some resource is an unknown shape: it may take anything.
        self._fill: list[list[int]] = []
        for free in problem.fixed:
            if all(0 <= f <= c for f, c in zip(free, cap, strict=True)):
                used = [c - f for f, c in zip(free, cap, strict=True)]
                self._fill.append([_dff(used[r], cap[r], k) for r, k in pairs])
            else:
                self._fill.append([-s * (n + 1) for s in self._scale])
        self._slack = [sum(s - fill[q] for fill in self._fill) for q, s in enumerate(self._scale)]
        self._assignment = [0] * n
        self._opened = 0
        self._skipped = False
        self._root = max(root_bound, self._bound(0))

    def run(self) -> None:
        if self._root >= self.best:
            self.proven = True
            return
        try:
            # Limited discrepancy search: pass d follows the heuristic choice (the fullest bin
            # with room) everywhere but for at most d deviations, the i-th alternative costing
            # i. Depth-first alone would spend a small budget re-deciding the last few pods;
            # this revisits the first ones early. A pass that skipped nothing was exhaustive.
            limit = 0
            while True:
                self._skipped = False
                self._place(0, limit)
                if not self._skipped:
                    break
                limit += 1
            self.proven = True
        except _Proven:
            self.proven = True
        except _Budget:
            self.proven = False

    def _bound(self, k: int) -> int:
        """Fewest further new nodes the pods from ``k`` on need, given the open bins.

        A bin with less of some resource than every pod left asks for takes none of them:
        its slack does not count. Written as plain loops over short lists: this runs once per
        step of the search, so it is most of the search's time.
        """
        smallest = self._smallest[k]
        scale = self._scale
        fills = self._fill
        usable = self._slack
        copied = False
        for b, free in enumerate(self._bins):
            for f, least in zip(free, smallest, strict=True):
                if f < least:
                    if not copied:
                        usable = list(usable)
                        copied = True
                    fill = fills[b]
                    for q, s in enumerate(scale):
                        usable[q] -= s - fill[q]
                    break
        extra = 0
        for need, room, s in zip(self._left[k], usable, scale, strict=True):
            nodes = -((room - need) // s)
            if nodes > extra:
                extra = nodes
        return extra

    def _add(self, b: int, k: int, sign: int) -> None:
        item, values = self.p.items[k], self._values[k]
        free, fill, slack = self._bins[b], self._fill[b], self._slack
        for r, x in enumerate(item):
            free[r] -= sign * x
        for q, v in enumerate(values):
            fill[q] += sign * v
            slack[q] -= sign * v

    def _place(self, k: int, discrepancies: int) -> None:
        self.steps += 1
        if self.steps > self._budget.max_steps:
            raise _Budget
        if self.steps & 63 == 0 and time.perf_counter() > self._deadline:
            raise _Budget
        p = self.p
        if k == len(p.items):
            self.best = self._opened
            self.best_assignment = list(self._assignment)
            if self.best <= self._root:
                raise _Proven
            return
        lower = self._opened + self._bound(k)
        if lower >= self.best:
            return
        item = p.items[k]
        start = self._assignment[k - 1] if p.same_as_previous[k] else 0
        existing = len(p.existing_names)
        compatible = p.compatible[k]
        bins = self._bins
        weights = self._weights
        # Bins with room, one per distinct free room among template bins, fullest first (best
        # fit finds a plan that meets the lower bound sooner than first fit). A bin is as empty
        # as its emptiest resource (its largest free share); the sum of shares breaks ties.
        seen: set[tuple[int, ...]] = set()
        candidates: list[tuple[float, int]] = []
        for b in range(start, len(bins)):
            free = bins[b]
            if b < existing and not compatible[b]:
                continue
            if not all(map(le, item, free)):
                continue
            if b >= existing:
                key = tuple(free)
                if key in seen:
                    continue
                seen.add(key)
            shares = list(map(mul, free, weights))
            candidates.append((max(shares) + _TIE * sum(shares), b))
        candidates.sort()
        for i, (_, b) in enumerate(candidates):
            if i > discrepancies:
                self._skipped = True
                return
            self._add(b, k, 1)
            self._assignment[k] = b
            self._place(k + 1, discrepancies - i)
            self._add(b, k, -1)
            if lower >= self.best:
                return
        # A fresh node: pointless if no plan with it can beat the best, or if an empty booting
        # node (same free room as a fresh one) was already tried.
        if self._opened + 1 >= self.best or p.cap in seen:
            return
        if len(candidates) > discrepancies:
            self._skipped = True
            return
        bins.append(list(p.cap))
        self._fill.append([0] * len(self._scale))
        for q, s in enumerate(self._scale):
            self._slack[q] += s
        b = len(bins) - 1
        self._add(b, k, 1)
        self._opened += 1
        self._assignment[k] = b
        self._place(k + 1, discrepancies - len(candidates))
        self._opened -= 1
        self._add(b, k, -1)
        for q, s in enumerate(self._scale):
            self._slack[q] -= s
        self._fill.pop()
        bins.pop()
