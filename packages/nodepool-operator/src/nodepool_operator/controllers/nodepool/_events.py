"""The Events a pass over a pool records: on the pool, and the same on a Node when one is named.

Decided as values (:class:`Event`) by the pure steps; :mod:`.act` records them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Event", "normal", "warning"]


@dataclass(frozen=True, slots=True)
class Event:
    """An Event on the pool (and, when ``node`` is set, the same on that Node)."""

    type: Literal["Normal", "Warning"]
    reason: str
    note: str
    about: str = ""
    """Keeps distinct findings (one per node) apart instead of aggregating them."""
    node: str = ""
    node_action: str = ""
    action: str = "Reconcile"


def warning(
    reason: str, note: str, *, about: str = "", node: str = "", action: str = "Reconcile"
) -> Event:
    """A Warning on the pool; with ``node``, the same on that Node (as ``action``)."""
    return Event("Warning", reason, note, about, node, action if node else "", "Reconcile")


def normal(reason: str, note: str, *, about: str = "", action: str = "Reconcile") -> Event:
    return Event("Normal", reason, note, action=action, about=about)
