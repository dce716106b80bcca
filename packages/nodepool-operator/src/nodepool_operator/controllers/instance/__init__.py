"""The Instance controller: one cloud VM per Instance, kept as specified (the seeds' EC2Instance).

Each reconcile is :mod:`.observe` (the Instance decoded once, its VM described), :mod:`.decide`
(pure: the next repair of the VM, the status, what a refusal means) and :mod:`.act` (the cloud
calls and writes), wired by :mod:`.controller`.

What a reconcile does, in order:

1. Deleted (``deletionTimestamp``)? Terminate the VM, then drop the finalizer
   ``kubeloop.dev/instance-cleanup``. Otherwise make sure the finalizer is there *before*
   any cloud call, so no VM can outlive its Instance.
2. Drift check: ``describe`` the VM named by ``status.instanceId`` and repair what differs:

   - none recorded yet: launch one;
   - terminated, or unknown to the cloud: launch a replacement (Warning ``DriftRepaired``);
   - instance type or image differs from the spec: terminate it, then launch a replacement
     (Normal ``Replacing``). Break before make: a VM cannot change type in place, and
     terminating first keeps "at most one live VM per Instance" true at every moment;
   - stopped: start it (Warning ``DriftRepaired``).
3. Write status (``instanceId``, ``publicIP``, ``state``, ``observedGeneration``, ``Ready``
   and ``lastCheckedAt``) and come back in ``drift_interval_seconds`` (about a second while
   the VM boots).

**The loop trap.** ``lastCheckedAt`` changes on every check, so every reconcile writes status,
and every status write comes back as a watch event. The ``generation_changed`` predicate drops
those events (status and metadata writes leave ``metadata.generation`` alone), so the drift
check runs once per ``drift_interval_seconds``, plus once per spec change or deletion (both
bump the generation), never once per own write.

**Idempotency tokens.** A create's token is a pure function of *what is intended*::

    <Instance uid>/<sha256(predecessor id, instance type, image)[:16]>

where the predecessor is the VM being replaced (empty for the first VM). Retrying the same
intent (after a crash between the create and the status write, a lost response, a conflict)
therefore sends the same token and gets the same VM; the status still names the predecessor
until the replacement is recorded, so the token is re-derived without storing anything. A
new intent (another lost VM, another spec) gets a new token: a token is never reused with
different arguments, so :class:`~nodepool_operator.cloud.IdempotencyMismatch` cannot happen.
That is also why the "replacement number" is the predecessor's id rather than a counter: the
Instance's status has no field for a counter, and a counter read back from a status that a
crash did not get to write would be wrong in exactly the case tokens exist for.

The one leak that leaves: a crash after a create *and* a spec change before the restart (a
new intent, a new VM; the first one was never recorded). Every VM is tagged with its
Instance's uid, so after each create, once the status names the new VM, the other live VMs
with that tag are terminated; on deletion all of them are.
"""

from nodepool_operator.controllers.instance._token import idempotency_token
from nodepool_operator.controllers.instance.controller import (
    FINALIZER,
    NAME,
    NAME_TAG,
    READY,
    UID_TAG,
    InstanceController,
)

__all__ = [
    "FINALIZER",
    "NAME",
    "NAME_TAG",
    "READY",
    "UID_TAG",
    "InstanceController",
    "idempotency_token",
]
