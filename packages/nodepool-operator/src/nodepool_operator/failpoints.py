"""Named points where a test can make the operator crash, like etcd's gofail.

``NODEPOOL_OPERATOR_FAILPOINTS=after-cloud-create=kill`` makes the process
SIGKILL itself the first time it passes ``hit("after-cloud-create")``: right
after the cloud accepted a create and before any status write, the moment a
naive controller leaks or duplicates a VM. Unset (the default), ``hit`` is a
dictionary lookup and does nothing.
"""

from __future__ import annotations

import logging
import os
import signal

ENV = "NODEPOOL_OPERATOR_FAILPOINTS"

log = logging.getLogger("nodepool_operator.failpoints")


def _parse(spec: str) -> dict[str, str]:
    out = {}
    for item in spec.split(","):
        name, _, action = item.strip().partition("=")
        if name:
            out[name] = action or "kill"
    return out


_ACTIVE = _parse(os.environ.get(ENV, ""))


def hit(name: str) -> None:
    """Trigger the failpoint ``name`` if it is armed (only ``kill`` is supported)."""
    action = _ACTIVE.pop(name, None)
    if action is None:
        return
    if action == "kill":
        log.warning("failpoint %s: killing the process", name)
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        raise ValueError(f"failpoint {name}: unknown action {action!r}")
