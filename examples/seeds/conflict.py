"""Seed lesson: 409 Conflict is normal; re-read, re-apply only your change, retry.

The NodePool controller reads a pool (targetNodes=1), starts slow provisioning,
and meanwhile the autoscaler raises spec.targetNodes to 2. The controller's
status write carries the old resourceVersion and gets 409 Conflict. kubeloop's
``update_status`` re-reads the latest object (and logs who changed it: the
autoscaler's field manager). Had only metadata changed, it would re-apply just
the status change; here the generation moved on, so the status computed for
generation 1 is not written (``StaleGeneration``, a Conflict): the controller
requeues the pool and reconciles generation 2 as new work. The expensive
provisioning of generation 1 is not repeated, the autoscaler's change is not
lost, and observedGeneration never claims a spec nobody processed.

    python examples/seeds/conflict.py
    {"conflicts": 1, "expensive_runs": 1, "lost_updates": 0}
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from typing import Any

from _cluster import POOLS, add_cluster_args, cluster, new_namespace, pool

from kubeloop import (
    Request,
    Resource,
    Result,
    generation_changed,
    update_status,
)
from kubeloop.testing import new_manager


class ConflictCounter:
    """Counts 409 answers to status writes (a client request observer)."""

    def __init__(self) -> None:
        self.conflicts = 0

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        if code == 409 and subresource == "status":
            self.conflicts += 1


async def run(kubeconfig: str | None) -> dict[str, object]:
    async with cluster(kubeconfig) as client:
        counter = ConflictCounter()
        client.add_observer(counter)
        ns = await new_namespace(client, "conflict")
        await client.create(POOLS, pool("np", target=1), ns)
        mgr = new_manager(client)
        expensive_runs: Counter[int] = Counter()
        read_done, other_wrote = asyncio.Event(), asyncio.Event()

        async def reconcile(req: Request) -> Result:
            obj = await mgr.cache.get(POOLS, req.name, req.namespace)
            if obj is None:
                return Result()
            gen = obj["metadata"]["generation"]
            target = obj["spec"]["targetNodes"]
            if obj.get("status", {}).get("observedGeneration") == gen:
                return Result()
            expensive_runs[gen] += 1  # provisioning VMs: slow, and must not run twice
            if gen == 1:
                read_done.set()
                await other_wrote.wait()  # the autoscaler writes while we provision

            def mutate(status: dict[str, Any]) -> None:
                status["readyNodes"] = target  # what we provisioned, for the generation we saw
                status["observedGeneration"] = gen

            # raises StaleGeneration for gen 1: the controller requeues, gen 2 follows
            await update_status(client, POOLS, obj, mutate)
            return Result()

        mgr.controller("nodepool").for_(
            POOLS, predicates=[generation_changed], namespace=ns
        ).complete(reconcile)
        runner = asyncio.create_task(mgr.run())

        await read_done.wait()
        latest = await client.get(POOLS, "np", ns)
        latest["spec"]["targetNodes"] = 2  # the autoscaler
        await client.update(POOLS, latest)
        other_wrote.set()

        final: dict[str, Any] = {}
        for _ in range(600):
            final = await client.get(POOLS, "np", ns)
            if final.get("status", {}).get("observedGeneration") == 2:
                break
            await asyncio.sleep(0.05)
        mgr.stop()
        await runner
        lost = 0
        if final["spec"]["targetNodes"] != 2:
            lost += 1  # the autoscaler's write was overwritten
        if expensive_runs[2] != 1:
            lost += 1  # generation 2 marked observed without being processed
        if final.get("status", {}).get("readyNodes") != 2:
            lost += 1  # generation 2 never provisioned
        return {
            "conflicts": counter.conflicts,
            "expensive_runs": expensive_runs[1],
            "lost_updates": lost,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cluster_args(parser)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.kubeconfig))))


if __name__ == "__main__":
    main()
