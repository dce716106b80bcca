"""The fewest nodes for a set of pods, by an exact solver: the benchmarks' reference.

Independent of the planner it judges (``nodepool_operator.scheduling``): a textbook model solved
by OR-Tools' CP-SAT. Identical pods are one group with a count, so a deployment's replicas cost one
integer per node instead of one boolean per pod:

* ``n[g, j]`` integer in ``[0, count[g]]``: pods of group ``g`` on node ``j``; ``y[j]``: new
  node ``j`` is used;
* ``sum_j n[g, j] = count[g]`` (every pod placed);
* ``sum_g n[g, j] * request[g, r] <= allocatable[r] * y[j]`` for a new node ``j``, and
  ``<= free[j, r]`` for a node that is already there (it costs nothing);
* ``y[j] >= y[j + 1]`` (new nodes are used in order, which removes symmetric solutions);
* minimise ``sum_j y[j]``, offering as many new nodes as a known packing uses.

The solver either proves its optimum or, at its time limit, reports the best plan it found and
the best lower bound it proved; :class:`Optimum` keeps both, so a benchmark never counts an
unproven figure as the optimum.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

Vector = tuple[int, ...]


@dataclass(frozen=True)
class Optimum:
    """``nodes`` is the best plan found; ``lower`` the proven bound (equal when proven)."""

    nodes: int
    lower: int
    seconds: float

    @property
    def proven(self) -> bool:
        return self.nodes == self.lower


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

    ``upper_bound`` is a number of new nodes known to suffice (any valid packing's); the model
    offers exactly that many.
    """
    if not items:
        return Optimum(0, 0, 0.0)
    groups = sorted(Counter(items).items())
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
    model.minimize(sum(y))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        nodes = round(solver.objective_value)
        return Optimum(nodes, nodes, solver.wall_time)
    if status in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        # Out of time: the best plan it found (or the known packing, if none yet) and the
        # lower bound it proved.
        found = round(solver.objective_value) if status == cp_model.FEASIBLE else upper_bound
        return Optimum(found, round(solver.best_objective_bound), solver.wall_time)
    raise RuntimeError(
        f"CP-SAT: no plan within {upper_bound} new nodes ({solver.status_name(status)}): "
        "the upper bound given was not a valid packing"
    )
