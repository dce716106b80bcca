"""Seed lesson: parallel workers (max_concurrent_reconciles).

Five objects, each reconcile takes ``--delay`` seconds. With one worker they are
handled one after the other (the seeds' 25 s); with more workers than objects,
all at once (5 s). One object is still never reconciled by two workers at once.

    python examples/seeds/workers.py --objects 5 --delay 1 --workers 10
    {"objects": 5, "workers": 10, "max_overlap": 5, "makespan_s": 1.02}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from _cluster import POOLS, add_cluster_args, cluster, new_namespace, pool

from kubeloop import ControllerOptions, Request, Result
from kubeloop.testing import new_manager


async def run(
    kubeconfig: str | None, objects: int, delay: float, workers: int
) -> dict[str, object]:
    async with cluster(kubeconfig) as client:
        ns = await new_namespace(client, "workers")
        await asyncio.gather(*(client.create(POOLS, pool(f"p{i}"), ns) for i in range(objects)))
        active, max_overlap, done = 0, 0, set[str]()
        first_start: float | None = None
        last_end = 0.0
        all_done = asyncio.Event()

        async def reconcile(req: Request) -> Result:
            nonlocal active, max_overlap, first_start, last_end
            if req.namespace != ns:
                return Result()
            first_start = first_start or time.monotonic()
            active += 1
            max_overlap = max(max_overlap, active)
            await asyncio.sleep(delay)  # the slow part: a cloud call
            active -= 1
            last_end = time.monotonic()
            done.add(req.name)
            if len(done) == objects:
                all_done.set()
            return Result()

        mgr = new_manager(client)
        mgr.controller("workers").for_(POOLS, namespace=ns).with_options(
            ControllerOptions(max_concurrent_reconciles=workers)
        ).complete(reconcile)
        runner = asyncio.create_task(mgr.run())
        await asyncio.wait_for(all_done.wait(), timeout=objects * delay + 60)
        mgr.stop()
        await runner
        assert first_start is not None
        return {
            "objects": objects,
            "workers": workers,
            "max_overlap": max_overlap,
            "makespan_s": round(last_end - first_start, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cluster_args(parser)
    parser.add_argument("--objects", type=int, default=5)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(run(args.kubeconfig, args.objects, args.delay, args.workers))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
