"""The reads of one pass over an Instance: the object decoded once into the typed
:class:`~nodepool_operator.api.Instance`, and the VM its status names, described."""

from __future__ import annotations

from dataclasses import dataclass

from kubeloop import Object, TerminalError
from nodepool_operator.api import Instance, InvalidField, parse_instance
from nodepool_operator.cloud import CloudProvider, InstanceNotFound
from nodepool_operator.cloud import Instance as VM

#: Cloud tag on every VM of an Instance: its uid finds them all (cleanup).
UID_TAG = "kubeloop.dev/instance-uid"


def decode(obj: Object) -> Instance:
    """The one place an Instance's dict is read. An invalid one is terminal: nothing to do
    until its spec changes."""
    try:
        return parse_instance(obj)
    except InvalidField as err:
        raise TerminalError(f"invalid Instance: {err}", reason="InvalidSpec") from err


@dataclass(frozen=True, slots=True)
class Observation:
    instance: Instance
    recorded: str | None
    """The VM id its status names (None: none launched yet)."""
    vm: VM | None
    """That VM as the cloud describes it (None: none recorded, or unknown to the cloud)."""


async def describe(cloud: CloudProvider, instance_id: str) -> VM | None:
    try:
        return await cloud.describe(instance_id)
    except InstanceNotFound:
        return None


async def observe(cloud: CloudProvider, inst: Instance) -> Observation:
    recorded = inst.status.instance_id
    vm = await describe(cloud, recorded) if recorded is not None else None
    return Observation(inst, recorded, vm)


async def owned(cloud: CloudProvider, inst: Instance) -> frozenset[str]:
    """Ids of every VM tagged with the Instance's uid (the list may lag a fresh create)."""
    return frozenset(vm.id for vm in await cloud.list({UID_TAG: inst.metadata.uid}))
