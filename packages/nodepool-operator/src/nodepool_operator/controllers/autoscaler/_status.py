"""The Autoscaler's status as a typed change: what a decision sets, applied to the status the
server has with ``replace()`` and sent back with one ``to_api``.

A change names only what it sets (``None``: leave as is), so the same record serves a full
decision and a "not ready" one that only flips the Ready condition. Conditions follow
``metav1.Condition``'s rule: ``lastTransitionTime`` moves only when the status flips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

from nodepool_operator.api import (
    MAX_UNREMOVABLE_NODES,
    AutoscalerStatus,
    Condition,
    InvalidField,
    UnremovableNode,
    parse_autoscaler_status,
    to_api,
)
from nodepool_operator.scheduling import Unremovable

__all__ = [
    "CONFLICTING_AUTOSCALER",
    "INVALID_NODEPOOL",
    "INVALID_SPEC",
    "NODEPOOL_NOT_FOUND",
    "PROVISIONING",
    "PROVISIONING_OK",
    "PROVISION_TIMED_OUT",
    "READY",
    "WATCHING",
    "ConditionChange",
    "StatusChange",
    "unremovable",
]

T = TypeVar("T")

READY: Final = "Ready"
# Reasons of the Ready condition.
WATCHING: Final = "Watching"
NODEPOOL_NOT_FOUND: Final = "NodePoolNotFound"
INVALID_SPEC: Final = "InvalidSpec"
INVALID_NODEPOOL: Final = "InvalidNodePool"
#: The cloud did not say what the pool's instance type is (retried).
INSTANCE_TYPES_UNAVAILABLE: Final = "InstanceTypesUnavailable"
#: Condition: whether the pool's requested nodes arrive (False while backing off after they
#: did not register within the max provision time).
PROVISIONING: Final = "Provisioning"
PROVISION_TIMED_OUT: Final = "ProvisionTimedOut"
PROVISIONING_OK: Final = "ScaleUpAllowed"
#: Another Autoscaler (the older one) already scales this pool: two writers of one
#: targetNodes would undo each other's decisions, so the younger one is refused.
CONFLICTING_AUTOSCALER: Final = "ConflictingAutoscaler"


@dataclass(frozen=True, slots=True)
class ConditionChange:
    """Set condition ``type``; with ``if_present``, only if the status already has it."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    if_present: bool = False


@dataclass(frozen=True, slots=True)
class StatusChange:
    """What one decision writes into ``status``; ``None`` fields are left as they are."""

    generation: int
    conditions: tuple[ConditionChange, ...]
    pending_pods: int | None = None
    unschedulable_pods: int | None = None
    last_decision: str | None = None
    unremovable_nodes: tuple[UnremovableNode, ...] | None = None
    last_scale_time: datetime | None = None

    def applied(self, status: AutoscalerStatus, now: datetime) -> AutoscalerStatus:
        """``status`` with this change; ``now`` stamps conditions whose status flips."""
        conditions = list(status.conditions)
        for change in self.conditions:
            conditions = _with_condition(conditions, change, self.generation, now)
        keep = status
        return replace(
            status,
            observed_generation=self.generation,
            conditions=conditions,
            pending_pods=_or(self.pending_pods, keep.pending_pods),
            unschedulable_pods=_or(self.unschedulable_pods, keep.unschedulable_pods),
            last_decision=_or(self.last_decision, keep.last_decision),
            unremovable_nodes=(
                keep.unremovable_nodes
                if self.unremovable_nodes is None
                else list(self.unremovable_nodes)
            ),
            last_scale_time=_or(self.last_scale_time, keep.last_scale_time),
        )

    def mutate(self, now: datetime) -> Any:
        """The ``kubeloop.update_status`` mutation that writes this change: the stored status
        read once into :class:`AutoscalerStatus`, changed, written back whole."""

        def mutate(raw: dict[str, Any]) -> None:
            try:
                current = parse_autoscaler_status(raw)
            except InvalidField:  # the schema keeps this out; start afresh rather than fail
                current = AutoscalerStatus()
            written = to_api(self.applied(current, now))
            raw.clear()
            raw.update(written)

        return mutate


def unremovable(blocked: Mapping[str, Unremovable]) -> tuple[UnremovableNode, ...]:
    """``status.unremovableNodes``: the first :data:`MAX_UNREMOVABLE_NODES` by name."""
    return tuple(
        UnremovableNode(
            node=name,
            reason=str(blocked[name].reason),
            pod=None if blocked[name].pod is None else str(blocked[name].pod),
            message=blocked[name].note,
        )
        for name in sorted(blocked)[:MAX_UNREMOVABLE_NODES]
    )


def _or(value: T | None, kept: T) -> T:
    return kept if value is None else value


def _with_condition(
    conditions: Sequence[Condition], change: ConditionChange, generation: int, now: datetime
) -> list[Condition]:
    out = list(conditions)
    for i, old in enumerate(out):
        if old.type != change.type:
            continue
        flipped = old.status != change.status
        out[i] = replace(
            old,
            status=change.status,
            reason=change.reason,
            message=change.message,
            observed_generation=generation,
            last_transition_time=now if flipped else old.last_transition_time,
        )
        return out
    if not change.if_present:
        out.append(
            Condition(
                type=change.type,
                status=change.status,
                reason=change.reason,
                message=change.message,
                observed_generation=generation,
                last_transition_time=now,
            )
        )
    return out
