"""Instance: one cloud VM as a namespaced object (the seeds' EC2Instance).

Its status is where the seeds' reconcile-loop trap lives: ``lastCheckedAt`` changes on every
drift check, so a controller that writes it must not requeue on status-only updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from kubeloop.crd import (
    Condition,
    ListMapKey,
    MaxItems,
    MaxLength,
    Minimum,
    MinLength,
    Name,
    ObjectMeta,
    parse,
)
from nodepool_operator.api._nodeclass import NodeClassRef

InstanceState = Literal["pending", "running", "stopped", "terminated"]


@dataclass(frozen=True, kw_only=True)
class InstanceSpec:
    """InstanceSpec is the VM to run."""

    image: Annotated[str, MinLength(1), MaxLength(256)]
    """The machine image to boot, e.g. ami-0abcdef1234567890."""
    instance_type: Annotated[str, MinLength(1), MaxLength(63)]
    """The cloud instance type, e.g. m5.large."""
    node_class_ref: NodeClassRef | None = None
    """The AwsNodeClass whose subnets, security groups, instance profile, user data and
    tags the VM gets (its AMI is spec.image). Omitted: the cloud's defaults."""


@dataclass(frozen=True, kw_only=True)
class InstanceStatus:
    """InstanceStatus is the VM as the cloud last reported it."""

    instance_id: Annotated[str, MaxLength(256)] | None = None
    """The cloud's id for the VM, once created."""
    public_ip: Annotated[str, Name("publicIP"), MaxLength(64)] | None = None
    """The VM's public address, while it is pending or running."""
    state: InstanceState | None = None
    """The cloud's state of the VM: pending, running, stopped or terminated."""
    last_checked_at: datetime | None = None
    """When the controller last compared the VM with the spec (drift detection)."""
    observed_generation: Annotated[int, Minimum(0)] = 0
    """The metadata.generation this status describes."""
    conditions: Annotated[list[Condition], ListMapKey("type"), MaxItems(16)] = field(
        default_factory=list
    )
    """The Instance's conditions. Ready: the VM is running as specified."""


@dataclass(frozen=True, kw_only=True)
class Instance:
    """Instance is one cloud VM managed declaratively (the seeds' EC2Instance)."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: InstanceSpec
    """The VM to run."""
    status: InstanceStatus = field(default_factory=InstanceStatus)
    """The VM as last observed."""


def parse_instance(obj: Mapping[str, Any]) -> Instance:
    """An Instance from its API object, defaults filled in.

    Raises:
        InvalidField: the object breaks the schema; its ``path`` names the field.
    """
    return parse(Instance, obj)
