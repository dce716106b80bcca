"""The kubeloop side of ``bench/kopf_compare.py``: the job written as a kubeloop user would.

Every ``Sample`` (CRD ``samples.bench.kubeloop.dev``, the one ``bench/throughput.py``
installs) gets ``status.phase=Ready`` and ``status.observedGeneration``: a Manager with one
controller ``for_`` the kind with ``generation_changed``, 16 workers
(``max_concurrent_reconciles``), reading from ``mgr.cache`` and writing with
``kubeloop.update_status`` (one ``PUT .../status``, none when nothing changed). Logging is
kubeloop's ``configure_logging()`` at WARNING (kopf runs with ``--quiet``, the same level);
SIGTERM stops it gracefully. The metrics and
health endpoints are off (the benchmark does not scrape them; kopf serves neither by default).
The client is the README's ``Client.from_kubeconfig()`` with its defaults (no client-side
rate limit, as every user gets); 16 workers and the endpoints are the only departures from
the README's example.

``--job children`` runs the child-owning job instead (``bench/_children.py``): the same
controller ``.owns(CONFIGMAPS)``, so a child's events (its deletion too) enqueue its
controlling Sample, as controller-runtime's ``Owns`` does; the reconcile reads the Sample and
its child from the cache, creates the child with ``set_controller_reference`` when it is
missing and updates it when its data differs (nothing sent when it matches).

Run by ``bench/kopf_compare.py``; by hand::

    python -m bench._kubeloop_operator --kubeconfig K --namespace NS [--job children]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from bench._children import child_data, child_of
from kubeloop import (
    CONFIGMAPS,
    AlreadyExists,
    Client,
    Conflict,
    ControllerOptions,
    Manager,
    ManagerOptions,
    Request,
    Resource,
    Result,
    configure_logging,
    generation_changed,
    set_controller_reference,
    update_status,
)

#: The kind of ``bench.throughput.SAMPLE_CRD``.
SAMPLES = Resource("bench.kubeloop.dev", "v1", "samples", "Sample")
WORKERS = 16


async def operate(kubeconfig: str, namespace: str, workers: int, job: str = "status") -> None:
    client = Client.from_kubeconfig(kubeconfig)
    mgr = Manager(client, ManagerOptions(metrics_bind_address=None, health_probe_bind_address=None))

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(SAMPLES, req.name, req.namespace)
        if obj is None:  # deleted meanwhile
            return Result()
        generation = obj["metadata"]["generation"]

        def ready(status: dict[str, Any]) -> None:
            status["phase"] = "Ready"
            status["observedGeneration"] = generation

        await update_status(client, SAMPLES, obj, ready)
        return Result()

    async def reconcile_child(req: Request) -> Result:
        obj = await mgr.cache.get(SAMPLES, req.name, req.namespace)
        if obj is None:  # deleted meanwhile (its child is the garbage collector's)
            return Result()
        assert req.namespace is not None  # a namespaced kind
        spec = obj.get("spec") or {}
        child = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        if child is None:
            desired = child_of(req.name, req.namespace, spec)
            set_controller_reference(obj, desired)
            try:
                await client.create(CONFIGMAPS, desired)
            except AlreadyExists:
                return Result(requeue=True)  # the cache has not seen it yet
        elif child.get("data") != child_data(spec):
            try:
                await client.update(CONFIGMAPS, {**child, "data": child_data(spec)})
            except Conflict:
                return Result(requeue=True)  # changed meanwhile: read again
        return Result()

    builder = mgr.controller("samples").for_(
        SAMPLES, predicates=[generation_changed], namespace=namespace
    )
    if job == "children":
        builder = builder.owns(CONFIGMAPS)
    builder.with_options(ControllerOptions(max_concurrent_reconciles=workers)).complete(
        reconcile_child if job == "children" else reconcile
    )
    async with client:
        await mgr.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--job", choices=("status", "children"), default="status")
    args = parser.parse_args()
    configure_logging(logging.WARNING)
    asyncio.run(operate(args.kubeconfig, args.namespace, args.workers, args.job))


if __name__ == "__main__":
    main()
