"""The interruption queue (``nodepool-operator run --interruption-queue NAME``): EC2's
notices that a VM is about to go (spot interruption warnings, scheduled changes, state
changes), read from SQS and recorded on the Nodes, which the NodePool controller then
replaces ahead of the termination (:mod:`._source`; the messages: :mod:`._messages`)."""

from nodepool_operator.controllers.interruption._messages import (
    ACTIVE_STATES,
    SPOT_NOTICE_SECONDS,
    Ignored,
    Message,
    Rebalance,
    ScheduledChange,
    SpotInterruption,
    StateChange,
    UnreadableMessage,
    decode,
)
from nodepool_operator.controllers.interruption._source import (
    InterruptionSource,
    deadline_of,
    instances_of,
)

__all__ = [
    "ACTIVE_STATES",
    "SPOT_NOTICE_SECONDS",
    "Ignored",
    "InterruptionSource",
    "Message",
    "Rebalance",
    "ScheduledChange",
    "SpotInterruption",
    "StateChange",
    "UnreadableMessage",
    "deadline_of",
    "decode",
    "instances_of",
]
