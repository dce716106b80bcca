"""A pool's next VM goes to a zone below its target first, else to the zone with fewest of
the pool's nodes, in the subnet with most free addresses; zones and subnets that cannot
take it are skipped."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import Subnet
from nodepool_operator.controllers.nodepool._zone_choice import (
    choose_subnet,
    launchable_zones,
    zone_counts,
)
from tests.factories import cloud_vm

A1 = Subnet(id="subnet-a1", zone="sim-1a", free_addresses=200)
A2 = Subnet(id="subnet-a2", zone="sim-1a", free_addresses=900)
B1 = Subnet(id="subnet-b1", zone="sim-1b", free_addresses=500)
C1 = Subnet(id="subnet-c1", zone="sim-1c", free_addresses=30)
ALL = [A1, A2, B1, C1]


@pytest.mark.parametrize(
    ("counts", "targets", "out", "needed", "chosen"),
    [
        # balance: fewest nodes first, name order on ties; most free addresses in the zone
        ({}, {}, set(), 1, "subnet-a2"),
        ({"sim-1a": 1}, {}, set(), 1, "subnet-b1"),
        ({"sim-1a": 1, "sim-1b": 1}, {}, set(), 1, "subnet-c1"),
        ({"sim-1a": 2, "sim-1b": 1, "sim-1c": 1}, {}, set(), 1, "subnet-b1"),
        # a zone below its target comes first, however many nodes it has elsewhere
        ({"sim-1a": 0, "sim-1c": 5}, {"sim-1c": 6}, set(), 1, "subnet-c1"),
        # the largest shortfall first, then name order
        ({}, {"sim-1b": 1, "sim-1c": 2}, set(), 1, "subnet-c1"),
        ({}, {"sim-1b": 2, "sim-1c": 2}, set(), 1, "subnet-b1"),
        # targets met: balance again
        ({"sim-1c": 2}, {"sim-1c": 2}, set(), 1, "subnet-a2"),
        # a target in a zone the pool cannot launch into is passed over
        ({}, {"sim-1z": 3}, set(), 1, "subnet-a2"),
        # out: the subnet (full, or the type refused in its zone) is skipped
        ({}, {}, {"subnet-a2"}, 1, "subnet-a1"),
        ({}, {}, {"subnet-a1", "subnet-a2"}, 1, "subnet-b1"),
        ({}, {"sim-1a": 1}, {"subnet-a1", "subnet-a2"}, 1, "subnet-b1"),
        # too few free addresses for the node: skipped
        ({"sim-1a": 1, "sim-1b": 1}, {}, set(), 58, "subnet-a2"),
        ({}, {}, set(), 300, "subnet-a2"),
        ({}, {}, set(), 1000, None),
        ({}, {}, {"subnet-a1", "subnet-a2", "subnet-b1", "subnet-c1"}, 1, None),
    ],
)
def test_choose_subnet(
    counts: Mapping[str, int],
    targets: Mapping[str, int],
    out: set[str],
    needed: int,
    chosen: str | None,
) -> None:
    got = choose_subnet(ALL, counts, targets, out=lambda s: s.id in out, needed=needed)
    assert (got.id if got is not None else None) == chosen


def test_no_subnets_no_choice() -> None:
    assert choose_subnet([], {}, {}) is None


def test_spreading_a_burst_over_three_zones() -> None:
    """Nine creates in a row, each counted as it is placed, end three to a zone."""
    subnets = [Subnet(id=f"subnet-{z}", zone=f"sim-1{z}", free_addresses=4000) for z in "abc"]
    counts: dict[str, int] = {}
    order = []
    for _ in range(9):
        got = choose_subnet(subnets, counts, {})
        assert got is not None
        counts[got.zone] = counts.get(got.zone, 0) + 1
        order.append(got.zone[-1])
    assert "".join(order) == "abcabcabc"


def test_zone_counts_by_record_then_vm_leaving_out_the_leaving() -> None:
    records = [
        InstanceRecord(name="p-1", state="creating", zone="sim-1a", subnet="subnet-a1"),
        InstanceRecord(name="p-2", state="running", instance_id="i-2"),  # older: its VM's zone
        InstanceRecord(name="p-3", state="deleting", instance_id="i-3", zone="sim-1b"),
        InstanceRecord(name="p-4", state="creating", zone="sim-1b"),
        InstanceRecord(name="p-5", state="creating"),  # not placed yet: no zone
    ]
    vms = {"i-2": cloud_vm("i-2", zone="sim-1a"), "i-3": cloud_vm("i-3", zone="sim-1b")}
    assert zone_counts(records, vms) == {"sim-1a": 2, "sim-1b": 1}
    assert zone_counts(records, vms, leave_out="p-4") == {"sim-1a": 2}


def test_launchable_zones() -> None:
    assert launchable_zones(ALL, lambda s: False) == ["sim-1a", "sim-1b", "sim-1c"]
    assert launchable_zones(ALL, lambda s: s.zone == "sim-1b") == ["sim-1a", "sim-1c"]
    assert launchable_zones(ALL, lambda s: False, needed=100) == ["sim-1a", "sim-1b"]
