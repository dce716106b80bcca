"""A packing into a fixed number of new nodes, by local search: the planner's repair phase.

Why: the exact search (:mod:`._exact`) decides pods one at a time, so when a plan with one new
node fewer exists but only with the first, large pods placed otherwise than best fit puts them,
the search may spend its budget before it gets there. Asking "do these pods fit k new nodes?"
and answering by moving pods between k nodes finds such plans far sooner: on the packing
benchmark's workloads of up to 40 pods it finds the optimum the tree search missed. It proves
nothing (a failure says only that none was found), which the tree search and its lower bounds do.

How: every pod is put in one of the free bins (ready and booting nodes) or k new ones, overload
allowed: first fit in the search's largest-first order, else where it overloads least. Then
tabu search: each iteration draws an overloaded bin and makes the exchange that lowers the
total overload most (or raises it least): one or two of its pods go to another bin, alone or
for up to two of that bin's pods, three pods at most. A pod may not go back to a bin it left
for a few iterations, so the search leaves a local minimum instead of circling in it. A bin's
overload sums, per resource, the square root of its excess as a share of a template node:
concave, so the search gathers the overload in few bins, from which whole pods can then leave.
(A linear sum solved the same hard workloads in about twice the steps, and pairs of pods moving
together, and one drawn bin per iteration instead of all, each halved the time again.) Ties
and the tenure are drawn from a generator seeded by the caller, so the same input gives the
same plan. Overload zero is a plan.

A ready node takes only the pods its selector, affinity and taints allow
(``_Problem.compatible``); one with negative free room in some resource takes none.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from operator import le

Vector = tuple[int, ...]

#: Tabu tenure: iterations a pod may not return to the bin it left, drawn from this range.
_TENURE = (10, 25)
#: Each resource's excess counts as the square root of its share of a node: concave, so
#: one bin far over costs less than several a little over, and the search gathers the
#: overload in a few bins, from which whole pods can leave (a linear sum spreads it thin).
_EXPONENT = 0.5
#: Overload differences below this are ties (the objective is a float sum of shares).
_EPS = 1e-9
#: An exchange: from bin a the pods ``out`` go to bin b, and the pods ``back`` of b go to a.
_Exchange = tuple[int, tuple[int, ...], int, tuple[int, ...]]
#: Pods of one bin taken together: their indices, summed requests, the bin's room without them.
_Group = tuple[tuple[int, ...], Vector, list[int]]


class Repair:
    """Tabu search for a packing into the free bins and ``new_bins`` template nodes.

    Bins are indexed as in ``_exact._Problem``: existing nodes, booting nodes, then new ones;
    ``compatible[k][b]`` says whether item k may go on existing node b. ``run`` returns each
    item's bin, or ``None`` when the steps or the clock ran out. ``steps`` counts iterations
    and, in each, the (pods, bin) pairs weighed with every exchange they allow: each costs
    about as much as a step of the tree search.
    """

    def __init__(
        self,
        cap: Vector,
        items: Sequence[Vector],
        fixed: Sequence[Vector],
        compatible: Sequence[Sequence[bool]],
        new_bins: int,
        *,
        seed: int = 0,
    ) -> None:
        self._items = items
        self._rooms = [*fixed, *([cap] * new_bins)]
        self._weights = tuple(1 / c for c in cap)
        self._excess = _excess_function(self._weights)
        self._zero = (0,) * len(cap)
        existing = len(compatible[0]) if compatible else 0
        # The bins each item may take: compatible ready nodes with no negative room, then all
        # template bins (booting and new), which every admitted pod fits.
        usable = [all(f >= 0 for f in room) for room in self._rooms]
        self._allowed = [
            tuple(
                b
                for b in range(len(self._rooms))
                if usable[b] and (b >= existing or compatible[k][b])
            )
            for k in range(len(items))
        ]
        self._allowed_set = [frozenset(a) for a in self._allowed]
        self._rng = random.Random(seed)
        self.steps = 0
        # Per bin its room left (negative where overloaded), its members and its overload.
        self._slack = [list(room) for room in self._rooms]
        self._members: list[list[int]] = [[] for _ in self._rooms]
        self._bin_of = [-1] * len(items)
        self._over = [0.0] * len(self._rooms)
        self._cache: dict[int, tuple[list[_Group], list[_Group]]] = {}
        self._existing = existing
        #: (item, bin): the iteration until which the item may not go back to that bin.
        self._tabu: dict[tuple[int, int], int] = {}
        self._best_total = math.inf

    def _put(self, k: int, b: int) -> None:
        slack = self._slack[b]
        for r, x in enumerate(self._items[k]):
            slack[r] -= x
        self._members[b].append(k)
        self._bin_of[k] = b
        self._changed(b)

    def _take(self, k: int) -> int:
        b = self._bin_of[k]
        slack = self._slack[b]
        for r, x in enumerate(self._items[k]):
            slack[r] += x
        self._members[b].remove(k)
        self._changed(b)
        return b

    def _changed(self, b: int) -> None:
        self._over[b] = self._excess(self._zero, self._slack[b])
        self._cache.pop(b, None)

    def _start(self) -> None:
        """First fit, largest first; a pod that fits nowhere goes where it overloads least."""
        for k, item in enumerate(self._items):
            best, best_cost = -1, math.inf
            for b in self._allowed[k]:
                cost = self._excess(item, self._slack[b]) - self._over[b]
                if cost <= 0:
                    best = b
                    break
                if cost < best_cost:
                    best, best_cost = b, cost
            self._put(k, best)

    def _groups(self, b: int) -> tuple[list[_Group], list[_Group]]:
        """Bin ``b``'s pods one and two at a time, with the room ``b`` has without them.

        Kept until ``b`` changes: most bins are the same from one iteration to the next.
        """
        groups = self._cache.get(b)
        if groups is not None:
            return groups
        slack, items = self._slack[b], self._items
        members = self._members[b]
        singles: list[_Group] = []
        pairs: list[_Group] = []
        for n, k in enumerate(members):
            item = items[k]
            singles.append(((k,), item, [s + x for s, x in zip(slack, item, strict=True)]))
            for m in members[n + 1 :]:
                pair = tuple(x + y for x, y in zip(item, items[m], strict=True))
                pairs.append(((k, m), pair, [s + x for s, x in zip(slack, pair, strict=True)]))
        self._cache[b] = groups = (singles, pairs)
        return groups

    def run(self, max_steps: int, deadline: float) -> list[int] | None:
        """Each item's bin in a plan without overload, or ``None`` when none was found."""
        if any(not allowed for allowed in self._allowed):
            return None
        self._start()
        over, rng = self._over, self._rng
        total = sum(over)
        self._best_total = total
        iteration = 0
        while total > 0:  # a sum of non-negative terms: zero only when every one is
            iteration += 1
            self.steps += 1
            if self.steps > max_steps or time.perf_counter() > deadline:
                return None
            chosen = self._choose(iteration, total)
            if chosen is None:
                continue  # every exchange out of that bin is tabu: another bin, or later
            a, out, b, back = chosen
            for k in out:
                self._move(k, b, iteration + rng.randint(*_TENURE))
            for k in back:
                self._move(k, a, iteration + rng.randint(*_TENURE))
            total = sum(over)
            self._best_total = min(self._best_total, total)
        return list(self._bin_of)

    def _move(self, k: int, b: int, tabu_until: int) -> None:
        a = self._take(k)
        self._put(k, b)
        self._tabu[(k, a)] = tabu_until

    def _choose(self, iteration: int, total: float) -> _Exchange | None:
        """The best exchange of one or two pods of an overloaded bin with up to two of another.

        One overloaded bin, drawn at random, not all: an iteration then costs a fraction, and
        the search needs few more of them (on the benchmark's hard workloads a third of the
        steps in all). At most three pods move. An exchange is tabu if it sends a pod back to
        a bin it left recently, unless it leads to the least overload seen so far. Ties are
        drawn at random.
        """
        over, tabu, rng = self._over, self._tabu, self._rng
        a = rng.choice([b for b, o in enumerate(over) if o > 0])
        chosen: _Exchange | None = None
        chosen_delta = math.inf
        ties = 0
        singles, pairs = self._groups(a)
        for out, sum_out, hole_a in singles + pairs:
            base_a = self._excess(self._zero, hole_a)  # a's overload once ``out`` has left
            for b in self._allowed[out[0]]:
                if b == a or (
                    b < self._existing and any(b not in self._allowed_set[k] for k in out)
                ):
                    continue
                self.steps += 1
                for back, delta in self._exchanges(a, out, sum_out, hole_a, base_a, b):
                    if delta > chosen_delta + _EPS:
                        continue
                    free = all(tabu.get((k, b), 0) <= iteration for k in out) and all(
                        tabu.get((k, a), 0) <= iteration for k in back
                    )
                    if not (free or total + delta < self._best_total - _EPS):
                        continue
                    if delta < chosen_delta - _EPS:
                        chosen_delta, chosen, ties = delta, (a, out, b, back), 1
                    else:
                        ties += 1
                        if rng.randrange(ties) == 0:
                            chosen = (a, out, b, back)
        return chosen

    def _exchanges(
        self,
        a: int,
        out: tuple[int, ...],
        sum_out: Vector,
        hole_a: list[int],
        base_a: float,
        b: int,
    ) -> list[tuple[tuple[int, ...], float]]:
        """Moving ``out`` from ``a`` to ``b``, alone or for pods of ``b``: change in overload."""
        excess, over = self._excess, self._over
        before = over[a] + over[b]
        slack_b = self._slack[b]
        fits = all(map(le, sum_out, slack_b))
        options: list[tuple[tuple[int, ...], float]] = [
            ((), base_a + (0.0 if fits else excess(sum_out, slack_b)) - before)
        ]
        singles, pairs = self._groups(b)
        for back, sum_back, hole_b in singles + pairs if len(out) == 1 else singles:
            if sum_out == sum_back:
                continue  # the same requests: changes nothing
            if a < self._existing and any(a not in self._allowed_set[k] for k in back):
                continue
            new_a = 0.0 if all(map(le, sum_back, hole_a)) else excess(sum_back, hole_a)
            new_b = 0.0 if all(map(le, sum_out, hole_b)) else excess(sum_out, hole_b)
            options.append((back, new_a + new_b - before))
        return options


Excess = Callable[[Sequence[int], Sequence[int]], float]


def _excess_function(weights: Sequence[float]) -> Excess:
    """How far a need exceeds a room, summed over resources as (concave) node shares.

    Most of the repair's time goes here, so one to three resources, the common cases, get a
    function without a loop.
    """
    p = _EXPONENT
    if len(weights) == 1:
        (w0,) = weights

        def one(need: Sequence[int], room: Sequence[int]) -> float:
            x = need[0] - room[0]
            return (x * w0) ** p if x > 0 else 0.0

        return one
    if len(weights) == 2:
        w0, w1 = weights

        def two(need: Sequence[int], room: Sequence[int]) -> float:
            x, y = need[0] - room[0], need[1] - room[1]
            return ((x * w0) ** p if x > 0 else 0.0) + ((y * w1) ** p if y > 0 else 0.0)

        return two
    if len(weights) == 3:
        w0, w1, w2 = weights

        def three(need: Sequence[int], room: Sequence[int]) -> float:
            x, y, z = need[0] - room[0], need[1] - room[1], need[2] - room[2]
            return (
                ((x * w0) ** p if x > 0 else 0.0)
                + ((y * w1) ** p if y > 0 else 0.0)
                + ((z * w2) ** p if z > 0 else 0.0)
            )

        return three

    def many(need: Sequence[int], room: Sequence[int]) -> float:
        total = 0.0
        for x, c, w in zip(need, room, weights, strict=True):
            if x > c:
                total += ((x - c) * w) ** p
        return total

    return many
