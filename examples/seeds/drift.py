"""Seed lesson: the loop trap, and its cure.

A reconciler that checks for drift writes ``status.lastCheckedAt`` every time.
Without a predicate, that status write is an update event, which triggers the
next reconcile, which writes again: a loop that never waits for
``--requeue-after``. kubeloop notices (a warning, a metric, an Event naming the
field). With the ``generation_changed`` predicate, status writes no longer
trigger reconciles: the object is checked every ``--requeue-after`` seconds,
plus once per spec change.

    python examples/seeds/drift.py --predicate none --seconds 10 --requeue-after 2
    {"reconciles": 812, "status_writes": 812, "loop_detected": true}
    python examples/seeds/drift.py --predicate generation --seconds 10 --requeue-after 2
    {"reconciles": 7, "status_writes": 7, "loop_detected": false}
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json

from _cluster import POOLS, add_cluster_args, cluster, new_namespace, pool

from kubeloop import (
    ControllerOptions,
    Request,
    Result,
    StaleGeneration,
    generation_changed,
    update_status,
)
from kubeloop.testing import new_manager


async def run(
    kubeconfig: str | None, predicate: str, seconds: float, requeue_after: float, spec_changes: int
) -> dict[str, object]:
    """Run the lesson; besides the summary, ``reconcile_log`` lists each reconcile as
    ``(loop time, generation it saw)`` so a test can ask *why* each one ran.

    The run lasts ``seconds`` and, beyond that, until the last spec change has been
    reconciled, so a slow machine shortens nothing the result depends on."""
    loop = asyncio.get_running_loop()
    async with cluster(kubeconfig) as client:
        ns = await new_namespace(client, "drift")
        await client.create(POOLS, pool("vm"), ns)
        mgr = new_manager(client)
        reconciles = 0
        writes = 0
        superseded = 0  # status writes stopped because a spec change arrived meanwhile
        log: list[tuple[float, int]] = []
        last_reconciled = asyncio.Event()  # the last spec change has been seen

        async def reconcile(req: Request) -> Result:
            nonlocal reconciles, writes, superseded
            obj = await mgr.cache.get(POOLS, req.name, req.namespace)
            if obj is None:
                return Result()
            reconciles += 1
            now = dt.datetime.now(dt.UTC).isoformat()  # changes on every check: the trap
            gen = obj["metadata"]["generation"]
            log.append((loop.time(), gen))
            if gen >= 1 + spec_changes:
                last_reconciled.set()

            def mutate(status: dict[str, object]) -> None:
                status["lastCheckedAt"] = now
                status["observedGeneration"] = gen

            before = obj["metadata"]["resourceVersion"]
            try:
                after = await update_status(client, POOLS, obj, mutate)
            except StaleGeneration:
                superseded += 1  # the controller requeues it; the next run sees the new spec
                raise
            if after["metadata"]["resourceVersion"] != before:
                writes += 1
            return Result(requeue_after=requeue_after)

        preds = [generation_changed] if predicate == "generation" else []
        controller = (
            mgr.controller("drift")
            .for_(POOLS, predicates=preds, namespace=ns)
            .with_options(ControllerOptions(max_concurrent_reconciles=1))
            .complete(reconcile)
        )
        runner = asyncio.create_task(mgr.run())
        for i in range(spec_changes):
            await asyncio.sleep(seconds / (spec_changes + 1))
            # a user's edit, as `kubectl patch` sends it: a merge patch, no resourceVersion
            await client.patch(POOLS, "vm", {"spec": {"targetNodes": i + 2}}, ns)
        await asyncio.sleep(seconds / (spec_changes + 1))
        async with asyncio.timeout(120):  # a generous bound, not part of the lesson
            await last_reconciled.wait()
        mgr.stop()
        await runner
        return {
            "reconciles": reconciles,
            "status_writes": writes,
            "superseded": superseded,
            "loop_detected": controller.loops_detected > 0,
            "reconcile_log": log,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cluster_args(parser)
    parser.add_argument("--predicate", choices=["none", "generation"], default="none")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--requeue-after", type=float, default=2.0)
    parser.add_argument("--spec-changes", type=int, default=1, help="spec edits during the run")
    args = parser.parse_args()
    result = asyncio.run(
        run(args.kubeconfig, args.predicate, args.seconds, args.requeue_after, args.spec_changes)
    )
    print(json.dumps({k: result[k] for k in ("reconciles", "status_writes", "loop_detected")}))


if __name__ == "__main__":
    main()
