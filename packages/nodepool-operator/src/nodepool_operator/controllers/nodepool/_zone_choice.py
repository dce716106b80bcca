"""Which zone (and subnet) a pool's next VM is launched in: a pure choice, table-tested.

The Autoscaler says which zones its plan needs nodes in (``spec.zoneTargets``, a minimum per
zone); every other node is spread. So a zone below its target comes first (the largest
shortfall, then name order), then the zone with the fewest of the pool's nodes (existing and
launching, not leaving), name order on ties. A zone counts only while one of its subnets can
take the VM: not marked out (the type refused there, the subnet full) and with at least the
addresses the node needs. Within the zone, the subnet with the most free addresses (as
Karpenter's subnet provider orders them), then the lowest id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import Instance, Subnet
from nodepool_operator.controllers.nodepool._intent import DELETING


def zone_counts(
    records: Iterable[InstanceRecord], vms: Mapping[str, Instance], *, leave_out: str = ""
) -> Counter[str]:
    """The pool's nodes per zone: each record not leaving, by its recorded zone or else its
    VM's (a record from before zones were chosen). ``leave_out``: a record not to count
    (the one being placed)."""
    counts: Counter[str] = Counter()
    for r in records:
        if r.state == DELETING or r.name == leave_out:
            continue
        vm = vms.get(r.instance_id or "")
        zone = r.zone or (vm.zone if vm is not None else "")
        if zone:
            counts[zone] += 1
    return counts


def choose_subnet(
    subnets: Sequence[Subnet],
    counts: Mapping[str, int],
    targets: Mapping[str, int],
    *,
    out: Callable[[Subnet], bool] = lambda s: False,
    needed: int = 1,
) -> Subnet | None:
    """The subnet for the next VM (see the module docstring); None when no subnet can take
    it (none given, all out, or all too full)."""
    usable = [s for s in subnets if s.free_addresses >= needed and not out(s)]
    zones = sorted({s.zone for s in usable})
    if not zones:
        return None
    short = [z for z in zones if counts.get(z, 0) < targets.get(z, 0)]
    if short:
        zone = min(short, key=lambda z: (counts.get(z, 0) - targets.get(z, 0), z))
    else:
        zone = min(zones, key=lambda z: (counts.get(z, 0), z))
    return min((s for s in usable if s.zone == zone), key=lambda s: (-s.free_addresses, s.id))


def launchable_zones(
    subnets: Sequence[Subnet], out: Callable[[Subnet], bool], needed: int = 1
) -> list[str]:
    """The zones with a subnet that can take a VM now, sorted (the pool's ``status.zones``)."""
    return sorted({s.zone for s in subnets if s.free_addresses >= needed and not out(s)})
