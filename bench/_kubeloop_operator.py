"""The kubeloop side of ``bench/kopf_compare.py``: the job written as a kubeloop user would.

Every ``Sample`` (CRD ``samples.bench.kubeloop.dev``, the one ``bench/throughput.py``
installs) gets ``status.phase=Ready`` and ``status.observedGeneration``: a Manager with one
controller ``for_`` the kind with ``generation_changed``, 16 workers
(``max_concurrent_reconciles``), reading from ``mgr.cache`` and writing with
``kubeloop.update_status`` (one ``PUT .../status``, none when nothing changed). Logging is
kubeloop's ``configure_logging()`` at WARNING (kopf runs with ``--quiet``, the same level);
SIGTERM stops it gracefully. The metrics and
health endpoints are off (the benchmark does not scrape them; kopf serves neither by default).

Run by ``bench/kopf_compare.py``; by hand::

    python -m bench._kubeloop_operator --kubeconfig K --namespace NS
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from kubeloop import (
    Client,
    ControllerOptions,
    Manager,
    ManagerOptions,
    Request,
    Resource,
    Result,
    configure_logging,
    generation_changed,
    update_status,
)

#: The kind of ``bench.throughput.SAMPLE_CRD``.
SAMPLES = Resource("bench.kubeloop.dev", "v1", "samples", "Sample")
WORKERS = 16


async def operate(kubeconfig: str, namespace: str, workers: int) -> None:
    # qps=None: the benchmark measures the runtime, not the client-side rate limit
    client = Client.from_kubeconfig(kubeconfig, qps=None)
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

    mgr.controller("samples").for_(
        SAMPLES, predicates=[generation_changed], namespace=namespace
    ).with_options(ControllerOptions(max_concurrent_reconciles=workers)).complete(reconcile)
    async with client:
        await mgr.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=WORKERS)
    args = parser.parse_args()
    configure_logging(logging.WARNING)
    asyncio.run(operate(args.kubeconfig, args.namespace, args.workers))


if __name__ == "__main__":
    main()
