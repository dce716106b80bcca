"""The kopf side of ``bench/kopf_compare.py``: the job written as a kopf user would write it.

Every ``Sample`` (CRD ``samples.bench.kubeloop.dev``, the one ``bench/throughput.py``
installs) gets ``status.phase=Ready`` and ``status.observedGeneration``: one handler for
``on.create`` and ``on.update`` that fills ``patch.status``. Everything else is kopf's
default: progress and ``last-handled-configuration`` in annotations, an unbounded number
of per-object workers (``settings.queueing.worker_limit = None``), log messages not posted
as Kubernetes Events (``settings.posting.loggers = False`` since kopf 1.45; explicit
``kopf.event()`` calls would be). It imports nothing of kubeloop.

Run by ``bench/kopf_compare.py`` exactly as a user would run it (kopf reads
``KUBECONFIG``)::

    KUBECONFIG=K python -m kopf run --quiet --standalone --namespace NS -m bench._kopf_operator
"""

from __future__ import annotations

from typing import Any

import kopf

#: The CRD of ``bench.throughput.SAMPLE_CRD`` (not imported: that would load kubeloop).
GROUP, VERSION, PLURAL = "bench.kubeloop.dev", "v1", "samples"


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def ready(meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    patch.status["phase"] = "Ready"
    patch.status["observedGeneration"] = meta["generation"]
