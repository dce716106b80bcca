"""Instance ``v1beta1``: the same VM as ``v1alpha1``, its image named for what it is.

What ``v1alpha1`` got wrong: ``spec.image`` holds a machine image's id (ami-...), not an
image reference as a Pod's ``image`` is, and beside ``status.instanceId`` its name hid that.
``v1beta1`` calls it ``spec.imageId``, the cloud API's own name. ``status`` was right and is
the same type.

The controllers read ``v1alpha1``, the storage version; this module is the served shape only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from kubeloop.crd import MaxLength, MinLength, ObjectMeta
from nodepool_operator.api._instance import InstanceStatus
from nodepool_operator.api._nodeclass import NodeClassRef


@dataclass(frozen=True, kw_only=True)
class InstanceSpecV1beta1:
    """The VM to run."""

    image_id: Annotated[str, MinLength(1), MaxLength(256)]
    """The machine image to boot, by id, e.g. ami-0abcdef1234567890."""
    instance_type: Annotated[str, MinLength(1), MaxLength(63)]
    """The cloud instance type, e.g. m5.large."""
    node_class_ref: NodeClassRef | None = None
    """The AwsNodeClass whose subnets, security groups, instance profile, user data and
    tags the VM gets (its AMI is spec.imageId). Omitted: the cloud's defaults."""


@dataclass(frozen=True, kw_only=True)
class InstanceV1beta1:
    """Instance is one cloud VM managed declaratively."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: InstanceSpecV1beta1
    """The VM to run."""
    status: InstanceStatus = field(default_factory=InstanceStatus)
    """The VM as last observed."""
