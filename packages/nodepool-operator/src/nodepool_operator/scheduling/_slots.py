"""Where the simulation puts a pod: a node of the pool by name, a booting node, or a new one.

A placement is a value, not a label to parse: the Autoscaler asks "is this a new node, and
which?" by type (``isinstance(slot, New)``), never by string prefix. ``str()`` gives the short
label the bench and logs print (``existing:<name>``, ``inflight:<i>``, ``new:<i>``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Booting", "Existing", "New", "NodeSlot"]


@dataclass(frozen=True, slots=True, order=True)
class Existing:
    """A registered, Ready node of the pool, by its Node name."""

    name: str

    def __str__(self) -> str:
        return f"existing:{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class Booting:
    """The ``index``-th (0-based) node requested but not yet registered and Ready."""

    index: int

    def __str__(self) -> str:
        return f"inflight:{self.index}"


@dataclass(frozen=True, slots=True, order=True)
class New:
    """The ``index``-th (0-based) template node the plan opens beyond the current target."""

    index: int

    def __str__(self) -> str:
        return f"new:{self.index}"


NodeSlot = Existing | Booting | New
"""One node of the simulation."""
