"""What a source tells a controller: one union instead of four handler methods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubeloop._resource import Object


@dataclass(frozen=True, slots=True)
class Added:
    """An object appeared (first list, or a watch ADDED)."""

    obj: Object


@dataclass(frozen=True, slots=True)
class Updated:
    """An object changed; ``old`` is the cached state before the change.

    ``managed_fields`` is the new version's ``metadata.managedFields`` as the server
    sent it (the cache strips them from ``new``): who owns which field, which loop
    detection reads to name two writers fighting over a field. Empty when unknown.
    """

    old: Object
    new: Object
    managed_fields: Sequence[Any] = ()

    @property
    def obj(self) -> Object:
        return self.new


@dataclass(frozen=True, slots=True)
class Deleted:
    """An object went away. ``final_state_unknown`` is true when the deletion was
    inferred from a relist (the watch missed it), so ``obj`` may be stale."""

    obj: Object
    final_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class Generic:
    """Anything else: a periodic resync, a channel message."""

    obj: Object


Event = Added | Updated | Deleted | Generic
