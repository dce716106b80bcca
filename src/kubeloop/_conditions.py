"""``metav1.Condition`` helpers on plain dicts, and generation bookkeeping.

The rule that keeps status writes quiet: :func:`set_condition` reports whether
anything changed, so a reconciler writes status only when it did, and
``lastTransitionTime`` moves only when ``status`` flips. Moving it on every
reconcile would make each write differ from the last and feed a reconcile loop.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final, Literal

from kubeloop._resource import Object

Condition = dict[str, Any]
ConditionStatus = Literal["True", "False", "Unknown"]

_STATUSES: Final = frozenset({"True", "False", "Unknown"})
# The validation rules of metav1.Condition (k8s.io/apimachinery/pkg/apis/meta/v1).
_TYPE_RE: Final = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])"
)
_TYPE_MAX: Final = 316
_REASON_RE: Final = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_REASON_MAX: Final = 1024
_MESSAGE_MAX: Final = 32768


def format_time(when: datetime) -> str:
    """RFC 3339 at seconds precision in UTC, as ``metav1.Time`` serialises."""
    if when.tzinfo is None:
        raise ValueError(f"condition time {when!r} is naive; pass an aware datetime")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _validate(
    type: str, status: str, reason: str, message: str, observed_generation: int | None
) -> None:
    if not isinstance(type, str) or len(type) > _TYPE_MAX or not _TYPE_RE.fullmatch(type):
        raise ValueError(
            f"invalid condition type {type!r}: want CamelCase such as 'Ready', optionally "
            f"prefixed by a DNS subdomain and '/', at most {_TYPE_MAX} characters"
        )
    if status not in _STATUSES:
        raise ValueError(
            f"invalid status {status!r} for condition {type}: want 'True', 'False' or 'Unknown'"
        )
    if not isinstance(reason, str) or len(reason) > _REASON_MAX or not _REASON_RE.fullmatch(reason):
        raise ValueError(
            f"invalid reason {reason!r} for condition {type}: want a CamelCase word matching "
            f"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most {_REASON_MAX} characters"
        )
    if not isinstance(message, str) or len(message) > _MESSAGE_MAX:
        raise ValueError(
            f"invalid message for condition {type}: want a string of at most "
            f"{_MESSAGE_MAX} characters"
        )
    if observed_generation is not None and (
        isinstance(observed_generation, bool)
        or not isinstance(observed_generation, int)
        or observed_generation < 0
    ):
        raise ValueError(
            f"invalid observedGeneration {observed_generation!r} for condition {type}: "
            "want a non-negative integer"
        )


def condition(
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: datetime | None = None,
) -> Condition:
    """A validated condition dict with ``lastTransitionTime`` set to ``now`` (default: now)."""
    _validate(type, status, reason, message, observed_generation)
    cond: Condition = {"type": type, "status": status}
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation
    cond["lastTransitionTime"] = format_time(now or datetime.now(UTC))
    cond["reason"] = reason
    cond["message"] = message
    return cond


def set_condition(
    conditions: list[Condition],
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: datetime | None = None,
) -> bool:
    """Add or update condition ``type`` in ``conditions`` in place; return whether it changed.

    ``lastTransitionTime`` is set to ``now`` only when the condition is new or its
    status flips; a new reason, message or observedGeneration leaves it alone.
    As with Go's ``meta.SetStatusCondition``, the arguments describe the whole
    condition: ``observed_generation=None`` removes a stored observedGeneration.
    """
    _validate(type, status, reason, message, observed_generation)
    existing = get_condition(conditions, type)
    if existing is None:
        conditions.append(condition(type, status, reason, message, observed_generation, now))
        return True

    changed = False
    if existing.get("status") != status:
        existing["status"] = status
        existing["lastTransitionTime"] = format_time(now or datetime.now(UTC))
        changed = True
    elif not existing.get("lastTransitionTime"):
        # Required by the API; fill it in rather than send an invalid condition.
        existing["lastTransitionTime"] = format_time(now or datetime.now(UTC))
        changed = True
    for key, value in (("reason", reason), ("message", message)):
        if existing.get(key) != value:
            existing[key] = value
            changed = True
    if observed_generation is None:
        changed = existing.pop("observedGeneration", None) is not None or changed
    elif existing.get("observedGeneration") != observed_generation:
        existing["observedGeneration"] = observed_generation
        changed = True
    return changed


def get_condition(conditions: list[Condition] | None, type: str) -> Condition | None:
    """The condition of ``type``, or ``None``. The dict returned is the stored one."""
    for cond in conditions or ():
        if cond.get("type") == type:
            return cond
    return None


def remove_condition(conditions: list[Condition], type: str) -> bool:
    """Remove every condition of ``type``; return whether there was one."""
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != type]
    return len(conditions) != before


def is_true(conditions: list[Condition] | None, type: str) -> bool:
    """Whether condition ``type`` is present with status ``True``."""
    cond = get_condition(conditions, type)
    return cond is not None and cond.get("status") == "True"


def is_false(conditions: list[Condition] | None, type: str) -> bool:
    """Whether condition ``type`` is present with status ``False`` (absent is neither)."""
    cond = get_condition(conditions, type)
    return cond is not None and cond.get("status") == "False"


def observed_generation_current(obj: Object) -> bool:
    """Whether ``status.observedGeneration`` equals ``metadata.generation``.

    False when either is missing: without proof that the spec was seen, assume
    it was not (a wiped status then heals itself).
    """
    generation = (obj.get("metadata") or {}).get("generation")
    status = obj.get("status")
    observed = status.get("observedGeneration") if isinstance(status, dict) else None
    return isinstance(generation, int) and observed == generation


def needs_reconcile(obj: Object) -> bool:
    """Whether ``obj`` has work its controller has not yet acted on: a spec
    generation not yet observed, or a pending deletion.

    A hint for skipping expensive work, not a substitute for reconciling: drift
    in the world outside the object does not show here.
    """
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return not observed_generation_current(obj)
