"""The fewest nodes for a set of pods, by an exact solver: the benchmarks' reference.

Independent of the planner it judges (``nodepool_operator.scheduling``): two textbook models
solved by OR-Tools, whose results are combined. Identical pods are one group with a count.

**The assignment model** (CP-SAT), which finds good packings:

* ``n[g, j]`` integer in ``[0, count[g]]``: pods of group ``g`` on node ``j``; ``y[j]``: new
  node ``j`` is used;
* ``sum_j n[g, j] = count[g]`` (every pod placed);
* ``sum_g n[g, j] * request[g, r] <= allocatable[r] * y[j]`` for a new node ``j``, and
  ``<= free[j, r]`` for a node that is already there (it costs nothing);
* ``y[j] >= y[j + 1]`` (new nodes are used in order, which removes symmetric solutions);
* minimise ``sum_j y[j]``, offering as many new nodes as a known packing uses.

Its own lower bound is weak when the pods fill the nodes almost exactly (24 pods of one
resource needing 9.96 nodes' worth: it cannot rule out 10 within minutes). So:

**The pattern model** (Gilmore and Gomory's), which proves lower bounds: every *maximal*
pattern (a multiset of pods that fits one node, to which no remaining pod can be added) is a
column; ``z[p]`` new nodes take pattern ``p``, each existing node takes at most one of its own
patterns, and together they must cover every group's count. Any packing extends to such a
cover and any cover shrinks back to a packing, so its optimum is the same; its linear
relaxation (GLOP) is the classic tight bound for bin packing, and rounded up it is a proven
lower bound. CP-SAT then searches the pattern model too, with that bound as a constraint.
Enumerating patterns is skipped when there are too many (many small pods: there the
assignment model proves its optimum anyway).

The result is the best packing either found and the best bound either proved;
:class:`Optimum` keeps both, so a benchmark never counts an unproven figure as the optimum.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.linear_solver import pywraplp  # type: ignore[import-untyped]
from ortools.sat.python import cp_model

Vector = tuple[int, ...]
Groups = list[tuple[Vector, int]]

#: Above this many maximal patterns the pattern model is not built.
MAX_PATTERNS = 50_000
#: The LP's value is rounded up after taking off this much (GLOP's tolerance is ~1e-7).
_LP_SLACK = 1e-5


@dataclass(frozen=True)
class Optimum:
    """``nodes`` is the best plan found; ``lower`` the proven bound (equal when proven)."""

    nodes: int
    lower: int
    seconds: float

    @property
    def proven(self) -> bool:
        return self.nodes == self.lower


class _TooMany(Exception):
    pass


def maximal_patterns(
    groups: Sequence[tuple[Vector, int]], room: Vector, limit: int = MAX_PATTERNS
) -> list[Vector]:
    """Every non-empty count vector over ``groups`` that fits ``room`` and to which no
    further pod (of a group with pods left) fits. Raises :class:`_TooMany` over ``limit``."""
    out: list[Vector] = []
    take = [0] * len(groups)

    def fits(vec: Vector, left: Vector) -> bool:
        return all(v <= free for v, free in zip(vec, left, strict=True))

    def walk(g: int, left: Vector) -> None:
        if g == len(groups):
            for h, (vec, count) in enumerate(groups):
                if take[h] < count and fits(vec, left):
                    return  # not maximal
            if any(take):
                out.append(tuple(take))
                if len(out) > limit:
                    raise _TooMany
            return
        vec, count = groups[g]
        most = min([count] + [free // v for v, free in zip(vec, left, strict=True) if v])
        for c in range(most, -1, -1):
            take[g] = c
            walk(g + 1, tuple(free - c * v for free, v in zip(left, vec, strict=True)))
        take[g] = 0

    walk(0, room)
    return out


def _assignment(
    groups: Groups,
    capacity: Vector,
    existing_free: Sequence[Vector],
    upper_bound: int,
    lower: int,
    time_limit_s: float,
    workers: int,
) -> tuple[int | None, int]:
    """(best plan's new nodes or None, proven bound) of the assignment model."""
    existing = len(existing_free)
    bins = existing + upper_bound
    model = cp_model.CpModel()
    n = [
        [model.new_int_var(0, count, f"n{g}_{j}") for j in range(bins)]
        for g, (_, count) in enumerate(groups)
    ]
    y = [model.new_bool_var(f"y{k}") for k in range(upper_bound)]
    for g, (_, count) in enumerate(groups):
        model.add(sum(n[g]) == count)
    for j in range(bins):
        for r in range(len(capacity)):
            terms = [n[g][j] * vec[r] for g, (vec, _) in enumerate(groups) if vec[r]]
            if not terms:
                continue
            if j < existing:
                model.add(sum(terms) <= existing_free[j][r])
            else:
                model.add(sum(terms) <= capacity[r] * y[j - existing])
    for k in range(upper_bound - 1):
        model.add(y[k] >= y[k + 1])
    model.add(sum(y) >= lower)
    model.minimize(sum(y))
    return _solve(model, time_limit_s, workers)


def _solve(
    model: cp_model.CpModel, time_limit_s: float, workers: int, linearization: int = 1
) -> tuple[int | None, int]:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit_s, 0.1)
    solver.parameters.num_workers = workers
    solver.parameters.linearization_level = linearization
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        nodes = round(solver.objective_value)
        return nodes, nodes
    if status in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        found = round(solver.objective_value) if status == cp_model.FEASIBLE else None
        return found, round(solver.best_objective_bound)
    raise RuntimeError(f"CP-SAT: {solver.status_name(status)}")


def _pattern_bound(groups: Groups, new: list[Vector], old: list[list[Vector]]) -> int:
    """The pattern model's LP relaxation, rounded up: a proven lower bound."""
    lp = pywraplp.Solver.CreateSolver("GLOP")
    z = [lp.NumVar(0.0, lp.infinity(), "") for _ in new]
    w = [[lp.NumVar(0.0, 1.0, "") for _ in pats] for pats in old]
    for row in w:
        lp.Add(sum(row) <= 1)
    for g, (_, count) in enumerate(groups):
        on_new = sum(z[p] * pat[g] for p, pat in enumerate(new) if pat[g])
        on_old = sum(
            w[e][q] * pat[g] for e, pats in enumerate(old) for q, pat in enumerate(pats) if pat[g]
        )
        lp.Add(on_new + on_old >= count)
    lp.Minimize(sum(z))
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("GLOP: the pattern model's relaxation was not solved")
    value = float(lp.Objective().Value())
    return max(0, math.ceil(value - _LP_SLACK))


def _pattern_search(
    groups: Groups,
    new: list[Vector],
    old: list[list[Vector]],
    lower: int,
    time_limit_s: float,
    workers: int,
) -> tuple[int | None, int]:
    model = cp_model.CpModel()
    most = max(count for _, count in groups)
    z = [model.new_int_var(0, most, f"z{p}") for p in range(len(new))]
    w = [[model.new_bool_var(f"w{e}_{q}") for q in range(len(pats))] for e, pats in enumerate(old)]
    for row in w:
        model.add(sum(row) <= 1)
    for g, (_, count) in enumerate(groups):
        terms = [z[p] * pat[g] for p, pat in enumerate(new) if pat[g]]
        terms += [
            w[e][q] * pat[g] for e, pats in enumerate(old) for q, pat in enumerate(pats) if pat[g]
        ]
        model.add(sum(terms) >= count)
    model.add(sum(z) >= lower)
    model.minimize(sum(z))
    # the full linear relaxation in the search: with it CP-SAT finds packings at the
    # bound that the assignment model misses (packing workload 74: 12 nodes, not 13)
    return _solve(model, time_limit_s, workers, linearization=2)


def fewest_new_nodes(
    items: Sequence[Vector],
    capacity: Vector,
    *,
    upper_bound: int,
    existing_free: Sequence[Vector] = (),
    time_limit_s: float = 30.0,
    workers: int = 2,
) -> Optimum:
    """The fewest new nodes of ``capacity`` that, with ``existing_free``, hold every item.

    ``upper_bound`` is a number of new nodes known to suffice (any valid packing's); the
    assignment model offers exactly that many. ``time_limit_s`` bounds the two searches
    together (pattern enumeration and the LP come first and are not counted against it).
    """
    if not items:
        return Optimum(0, 0, 0.0)
    start = time.perf_counter()
    groups: Groups = sorted(Counter(items).items())
    lower = 0
    patterns: tuple[list[Vector], list[list[Vector]]] | None
    try:
        patterns = (
            maximal_patterns(groups, capacity),
            [maximal_patterns(groups, free) for free in existing_free],
        )
        lower = _pattern_bound(groups, *patterns)
    except _TooMany:
        patterns = None
    share = time_limit_s / 2 if patterns is not None else time_limit_s
    found, bound = _assignment(groups, capacity, existing_free, upper_bound, lower, share, workers)
    best = min(found if found is not None else upper_bound, upper_bound)
    lower = max(lower, bound)
    if best > lower and patterns is not None:
        found, bound = _pattern_search(groups, *patterns, lower, time_limit_s - share, workers)
        best = min(best, found if found is not None else best)
        lower = max(lower, bound)
    if best < lower:
        raise RuntimeError(f"reference: best {best} below its own bound {lower}")
    return Optimum(best, lower, time.perf_counter() - start)
