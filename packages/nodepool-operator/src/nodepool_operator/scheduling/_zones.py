"""Zones in the simulation: which zone each booting and new node of a pool is in.

A pool that can launch into several zones (its NodePool's ``status.zones``) gets template
nodes labelled with their zone, so node affinity, a volume's zone and spreads or (anti-)
affinities over ``topology.kubernetes.io/zone`` are checked per zone by the same filters as
any other label (:mod:`._fit`, :mod:`._interpod`). Which zone a node without a reason to be
anywhere gets follows the NodePool controller's rule, so the plan and the launches agree:
first a zone below its ``spec.zoneTargets`` count, else the zone with the fewest of the pool's
nodes, name order on ties (the booting nodes are placed by that rule too: the NodePool
controller chose their zones by it).

A pool without zones is one unnamed zone: no zone label is added and nothing here runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ._template import NodeTemplate
from ._views import ZONE_KEY

__all__ = ["ZoneCounts", "zone_templates"]


def zone_templates(template: NodeTemplate, zones: Sequence[str]) -> tuple[NodeTemplate, ...]:
    """``template`` in each of ``zones`` (its zone label set); ``(template,)`` without zones.
    A pod fits a pool with zones when it fits one of them."""
    if not zones:
        return (template,)
    return tuple(replace(template, labels={**template.labels, ZONE_KEY: z}) for z in zones)


class ZoneCounts:
    """The pool's nodes per zone (existing, booting, then new as the plan opens them)."""

    def __init__(
        self,
        zones: Sequence[str],
        existing: Iterable[Mapping[str, str]],
        targets: Mapping[str, int] | None = None,
    ) -> None:
        self.zones = tuple(sorted(set(zones)))
        self._targets = dict(targets or {})
        self.counts = dict.fromkeys(self.zones, 0)
        for labels in existing:
            zone = labels.get(ZONE_KEY)
            if zone is not None:
                self.counts[zone] = self.counts.get(zone, 0) + 1

    def order(self) -> list[str]:
        """The pool's zones in the order a new node goes to them: below its target first,
        then fewest nodes, then name."""
        return sorted(
            self.zones,
            key=lambda z: (self.counts[z] >= self._targets.get(z, 0), self.counts[z], z),
        )

    def take(self, zone: str) -> None:
        """A node of the pool is (planned) in ``zone``."""
        self.counts[zone] = self.counts.get(zone, 0) + 1

    def next(self) -> str:
        """The zone the next node without a zone of its own goes to, counted."""
        zone = self.order()[0]
        self.take(zone)
        return zone

    def targets(self, needed: Iterable[str]) -> dict[str, int]:
        """The pool's node count in each of the ``needed`` zones, as the plan leaves it: the
        fewest nodes each must have for the plan to hold."""
        return {zone: self.counts[zone] for zone in sorted(set(needed))}
