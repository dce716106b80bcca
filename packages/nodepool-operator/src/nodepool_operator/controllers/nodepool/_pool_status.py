"""A NodePool's status, computed from what one pass observed and did. Pure.

Every value here is a function of state (counts, names, the cloud's answer), never of time,
so a pass that changes nothing computes the status already stored and ``update_status``
sends nothing: an idle pool costs no writes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from kubeloop import set_condition
from nodepool_operator.api import (
    DEGRADED,
    READY,
    SCALING,
    DisruptionStatus,
    InstanceRecord,
    InvalidField,
    NodePoolStatus,
    ScaleOperation,
    to_api,
)
from nodepool_operator.cloud import CloudError, InvalidRequest
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.nodepool._drift import DRIFTED
from nodepool_operator.controllers.nodepool._expiry import EXPIRING
from nodepool_operator.controllers.nodepool._intent import CREATING, DELETING
from nodepool_operator.controllers.nodepool._repair import REPAIR_BLOCKED

#: Degraded's reason when the cloud refuses the pool's instance type.
INVALID_INSTANCE_TYPE: Final = "InvalidInstanceType"
#: Ready's reason while a blocker holds the drain of a Node being removed.
DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
_MAX_MESSAGE = 32768

ConditionStatus = Literal["True", "False", "Unknown"]
StatusMutation = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class CloudFailure:
    """A cloud error as the Degraded condition reports it."""

    reason: str
    message: str
    error: CloudError


def cloud_failure(err: CloudError) -> CloudFailure:
    """The Degraded reason for ``err``: what an invalid request got wrong (its ``reason``:
    ``InvalidInstanceType``, ``InvalidAMI``, ``InvalidSubnet``...), else the error's class."""
    reason = err.reason if isinstance(err, InvalidRequest) else type(err).__name__
    return CloudFailure(reason, str(err)[:_MAX_MESSAGE], err)


def live_vms(records: Sequence[InstanceRecord]) -> int:
    """VMs the pool has: recorded with an id and not being removed."""
    return sum(1 for r in records if r.instance_id and r.state not in (CREATING, DELETING))


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """The whole status one pass wants; :meth:`apply` is the ``update_status`` mutation."""

    generation: int
    selector: str
    current_nodes: int
    ready_nodes: int
    scale_operation: ScaleOperation
    instances: tuple[InstanceRecord, ...]
    conditions: tuple[tuple[str, ConditionStatus, str, str], ...]
    dropped: frozenset[str] = frozenset()
    """Records the pass removed on purpose."""
    disruption: DisruptionStatus | None = None
    """Nodes being disrupted and how many more the budgets allow (``status.disruption``)."""
    zones: tuple[str, ...] | None = None
    """The zones the pool can launch into now (``status.zones``); None: leave as written."""

    @property
    def converged(self) -> bool:
        return self.scale_operation == "inactive"

    def typed(self) -> NodePoolStatus:
        """The fields this pass owns as the API type (conditions are set one by one)."""
        return NodePoolStatus(
            current_nodes=self.current_nodes,
            ready_nodes=self.ready_nodes,
            scale_operation=self.scale_operation,
            observed_generation=self.generation,
            selector=self.selector,
            instances=list(self.instances),
            disruption=self.disruption,
            zones=list(self.zones or ()),
        )

    def apply(self, status: dict[str, Any]) -> None:
        written = to_api(self.typed())
        mine = written.pop("instances", [])
        written.pop("conditions", None)
        if self.zones is not None and not self.zones:
            status.pop("zones", None)  # none now: the field goes (an update keeps it)
        status.update(written)
        # Merge by name: on a 409 this runs again on the latest object, and a record another
        # writer added meanwhile (one this pass never saw, nor removed) must survive.
        names = {r.name for r in self.instances}
        theirs = [
            entry
            for entry in status.get("instances") or ()
            if isinstance(entry, dict)
            and entry.get("name") not in names
            and entry.get("name") not in self.dropped
        ]
        if mine or theirs:
            status["instances"] = mine + theirs
        else:
            status.pop("instances", None)
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        for type_, state, reason, message in self.conditions:
            # lastTransitionTime moves only when a condition flips: no write per pass
            set_condition(conditions, type_, state, reason, message, self.generation)


def _repair_condition(blocked: str) -> tuple[str, ConditionStatus, str, str]:
    if blocked:
        return (REPAIR_BLOCKED, "True", "TooManyUnhealthy", blocked[:_MAX_MESSAGE])
    return (REPAIR_BLOCKED, "False", "WithinThreshold", "")


def _expiring_condition(expiring: str) -> tuple[str, ConditionStatus, str, str]:
    if expiring:
        return (EXPIRING, "True", "Replacing", expiring[:_MAX_MESSAGE])
    return (EXPIRING, "False", "NoneExpired", "")


def _drifted_condition(drifting: str) -> tuple[str, ConditionStatus, str, str]:
    if drifting:
        return (DRIFTED, "True", "Replacing", drifting[:_MAX_MESSAGE])
    return (DRIFTED, "False", "NoneDrifted", "")


def _clamp_note(target: int, desired: int, min_nodes: int) -> str:
    if target == desired:
        return ""
    bound = "minNodes" if desired == min_nodes and target < desired else "maxNodes"
    return f" (targetNodes {target} clamped to {bound} {desired})"


def pool_status(
    *,
    name: str,
    generation: int,
    target: int,
    desired: int,
    min_nodes: int,
    records: Sequence[InstanceRecord],
    ready: Collection[str],
    failure: CloudFailure | None,
    dropped: frozenset[str] = frozenset(),
    held: Sequence[str] = (),
    repair_blocked: str = "",
    expiring: str = "",
    drifting: str = "",
    disruption: DisruptionStatus | None = None,
    zones: tuple[str, ...] | None = None,
) -> PoolStatus:
    """The status of pool ``name`` whose ``records`` are as given, ``ready`` naming the
    records registered as Ready nodes, after a pass that met ``failure`` (or none).
    ``held``: what holds each drain a blocker stopped (node, pod, reason), for Ready's
    message. ``repair_blocked``: why unhealthy nodes are not replaced (empty: none held).
    ``expiring``: which nodes older than expireAfter are replaced or held (empty: none).
    ``drifting``: how many nodes drifted, which are replaced or held (empty: none)."""
    current = live_vms(records)
    ready_count = sum(1 for r in records if r.name in ready and r.state != DELETING)
    in_flight = any(r.state in (CREATING, DELETING) for r in records)
    converged = not in_flight and current == desired and ready_count == desired
    progress = f"{ready_count}/{desired} nodes ready{_clamp_note(target, desired, min_nodes)}"
    deleting = any(r.state == DELETING for r in records)

    if converged:
        ready_cond: tuple[str, ConditionStatus, str, str] = (READY, "True", "Converged", progress)
    elif failure is not None and failure.reason == INVALID_INSTANCE_TYPE:
        ready_cond = (READY, "False", "InvalidSpec", f"spec.instanceType: {failure.message}")
    elif ready_count < desired:
        ready_cond = (READY, "False", "Provisioning", progress)
    elif held:
        message = "; ".join([progress, *sorted(held)])[:_MAX_MESSAGE]
        ready_cond = (READY, "False", DISRUPTION_BLOCKED, message)
    else:
        ready_cond = (READY, "False", "ScalingDown", progress)

    if converged:
        scaling: tuple[str, ConditionStatus, str, str] = (SCALING, "False", "Stable", "")
    else:
        if ready_count < desired:
            reason = "ScalingUp"
        elif current > desired or deleting:
            reason = "ScalingDown"
        else:
            reason = "Converging"
        scaling = (SCALING, "True", reason, f"{current} -> {desired} nodes")

    if failure is not None:
        degraded: tuple[str, ConditionStatus, str, str] = (
            DEGRADED,
            "True",
            failure.reason,
            failure.message,
        )
    else:
        degraded = (DEGRADED, "False", "CloudHealthy", "")

    return PoolStatus(
        generation=generation,
        selector=f"{POOL_LABEL}={name}",
        current_nodes=current,
        ready_nodes=ready_count,
        scale_operation="inactive" if converged else "active",
        instances=tuple(records),
        conditions=(
            ready_cond,
            scaling,
            degraded,
            _repair_condition(repair_blocked),
            _expiring_condition(expiring),
            _drifted_condition(drifting),
        ),
        dropped=dropped,
        disruption=disruption,
        zones=zones,
    )


def invalid_spec(generation: int, err: InvalidField) -> StatusMutation:
    """Ready=False, reason InvalidSpec, naming the field; the rest of the status stays."""
    message = str(err)[:_MAX_MESSAGE]

    def mutate(status: dict[str, Any]) -> None:
        status["observedGeneration"] = generation
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        set_condition(conditions, READY, "False", "InvalidSpec", message, generation)

    return mutate
