"""The create token of one Instance's intent (see the package docstring: why the predecessor's
id, not a counter)."""

from __future__ import annotations

import hashlib

from nodepool_operator.cloud import LaunchSettings


def idempotency_token(
    uid: str,
    predecessor: str | None,
    instance_type: str,
    image: str,
    launch: LaunchSettings | None = None,
    user_data: str = "",
) -> str:
    """The create token for one intent. At most 53 characters (EC2 takes 64). Launch
    settings and user data from a node class are part of the intent."""
    intent = f"{predecessor or ''}\n{instance_type}\n{image}"
    if (launch is not None and launch != LaunchSettings()) or user_data:
        intent += f"\n{launch!r}\n{user_data}"
    return f"{uid}/{hashlib.sha256(intent.encode()).hexdigest()[:16]}"
