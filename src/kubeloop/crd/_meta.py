"""The standard types a kind embeds: its metadata and its status conditions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from kubeloop.crd._markers import MaxLength, Minimum, MinLength, Pattern


@dataclass(frozen=True, kw_only=True)
class ObjectMeta:
    """The parts of metav1.ObjectMeta a controller reads. The schema leaves metadata to the
    apiserver (a CRD may not constrain it), so this type renders as a bare object."""

    name: str = ""
    namespace: str | None = None
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: list[str] = field(default_factory=list)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


_CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


@dataclass(frozen=True, kw_only=True)
class Condition:
    """Condition contains details for one aspect of the current state of this API Resource
    (the standard metav1.Condition)."""

    type: Annotated[str, Pattern(_CONDITION_TYPE), MaxLength(316)]
    """Type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: Literal["True", "False", "Unknown"]
    """Status of the condition, one of True, False, Unknown."""
    observed_generation: Annotated[int, Minimum(0)] | None = None
    """The .metadata.generation that the condition was set based upon. For instance, if
    .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration
    is 9, the condition is out of date with respect to the current state of the instance."""
    last_transition_time: datetime
    """The last time the condition transitioned from one status to another. This should be
    when the underlying condition changed. If that is not known, then using the time when the
    API field changed is acceptable."""
    reason: Annotated[
        str, MinLength(1), MaxLength(1024), Pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    ]
    """A programmatic identifier indicating the reason for the condition's last transition,
    in CamelCase. This field may not be empty."""
    message: Annotated[str, MaxLength(32768)]
    """A human readable message indicating details about the transition. This may be an
    empty string."""
