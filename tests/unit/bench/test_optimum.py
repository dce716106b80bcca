"""The benchmarks' reference solver (``bench/_optimum.py``): its bound and its packings."""

from __future__ import annotations

from bench._optimum import fewest_new_nodes, maximal_patterns

#: Packing workload 108 (seed 1): one resource, 24 pods needing 9.96 nodes' worth of a
#: 192-unit node. CP-SAT's assignment model alone proves no more than 10 in 30 s.
TIGHT: tuple[int, ...] = (127, 125, 122, 105, 101, 101, 95, 94, 91, 90, 89, 87)
TIGHT += (79, 72, 72, 66, 63, 60, 57, 47, 45, 43, 43, 39)


def test_maximal_patterns_are_the_fits_no_remaining_pod_can_join() -> None:
    groups: list[tuple[tuple[int, ...], int]] = [((3,), 2), ((2,), 1)]
    # {3, 2} fills 5; {3} or {2} alone leave room for the other; {3, 3} does not fit
    assert maximal_patterns(groups, (5,)) == [(1, 1)]
    assert sorted(maximal_patterns(groups, (6,))) == [(1, 1), (2, 0)]


def test_the_pattern_bound_proves_a_tight_one_resource_workload() -> None:
    opt = fewest_new_nodes([(s,) for s in TIGHT], (192,), upper_bound=len(TIGHT), time_limit_s=20)
    assert sum(TIGHT) <= 10 * 192  # the volume bound says 10 ...
    assert (opt.nodes, opt.lower) == (11, 11)  # ... the patterns prove 11
    assert opt.proven


def test_existing_room_is_used_first_and_each_node_once() -> None:
    # two ready nodes with room for one 4 each; the third 4 needs a new node
    opt = fewest_new_nodes([(4,), (4,), (4,)], (8,), upper_bound=3, existing_free=[(5,), (5,)])
    assert (opt.nodes, opt.lower) == (1, 1)
    # and nothing new when the ready nodes hold everything
    opt = fewest_new_nodes([(4,), (4,)], (8,), upper_bound=2, existing_free=[(5,), (5,)])
    assert (opt.nodes, opt.lower) == (0, 0)
