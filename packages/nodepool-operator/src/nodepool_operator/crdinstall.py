"""Installing the operator's CRDs at start-up (create, or update when they changed)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kubeloop import CRDS, AlreadyExists, Client, NotFound

log = logging.getLogger("nodepool_operator.crds")


async def install_crds(
    client: Client, crds: Iterable[dict[str, Any]], *, timeout: float = 60.0
) -> None:
    """Create or update each CRD, then wait until the API serves it."""
    objs = list(crds)
    for crd in objs:
        name = crd["metadata"]["name"]
        try:
            await client.create(CRDS, crd)
            log.info("installed CRD", extra={"crd": name})
        except AlreadyExists:
            current = await client.get(CRDS, name)
            if current.get("spec") != crd["spec"]:
                updated = {
                    **crd,
                    "metadata": {
                        **crd["metadata"],
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    },
                }
                await client.update(CRDS, updated)
                log.info("updated CRD", extra={"crd": name})
    async with asyncio.timeout(timeout):
        for crd in objs:
            await _wait_served(client, crd)


async def _wait_served(client: Client, crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    versions = [v["name"] for v in spec["versions"] if v.get("served", True)]
    while True:
        current = await client.get(CRDS, crd["metadata"]["name"])
        conds = {
            c["type"]: c["status"] for c in (current.get("status") or {}).get("conditions") or []
        }
        if conds.get("Established") == "True":
            try:
                for v in versions:
                    await client.discover(f"{spec['group']}/{v}", spec["names"]["kind"])
                return
            except NotFound:
                pass
        await asyncio.sleep(0.1)
