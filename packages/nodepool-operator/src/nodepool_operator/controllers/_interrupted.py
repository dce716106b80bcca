"""What the cloud said is about to happen to a Node's VM, as the Node carries it.

The interruption queue (:mod:`.interruption`) writes it on the Node as two annotations, and
the NodePool controller reads it (:mod:`.nodepool._interruption`): the cluster holds the
fact, so a message deleted from the queue is not lost by a restart, and the replica that
read the message need not be the one that acts on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from nodepool_operator.controllers._unneeded import format_time, parse_time

__all__ = ["INTERRUPTED", "INTERRUPTED_BY", "Interrupted", "interrupted", "mark_patch"]

#: Why the VM goes: the message's kind (``SpotInterruption``, ``ScheduledChange``,
#: ``StateChange``...), as the Event and metric name it.
INTERRUPTED: Final = "kubeloop.dev/interrupted"
#: When the VM goes (RFC 3339): the spot warning's two minutes, a scheduled change's
#: start; the message's time when it is going now (a state change).
INTERRUPTED_BY: Final = "kubeloop.dev/interrupted-by"


@dataclass(frozen=True, slots=True)
class Interrupted:
    kind: str
    deadline: float
    """Seconds since the epoch when the VM is expected to go."""


def interrupted(obj: Mapping[str, Any]) -> Interrupted | None:
    """The interruption a Node carries, or None (none, or annotations it cannot read)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    kind = annotations.get(INTERRUPTED)
    deadline = parse_time(annotations.get(INTERRUPTED_BY))
    if not kind or deadline is None:
        return None
    return Interrupted(str(kind), deadline)


def mark_patch(kind: str, deadline: float) -> dict[str, Any]:
    """The merge patch that records an interruption on a Node (a later one replaces it)."""
    return {"metadata": {"annotations": {INTERRUPTED: kind, INTERRUPTED_BY: format_time(deadline)}}}
