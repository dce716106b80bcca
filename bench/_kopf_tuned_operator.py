"""The tuned kopf side of ``bench/kopf_compare.py``: the same handler, kopf's best settings.

The handler is ``bench._kopf_operator``'s. What changes is where kopf keeps its own state and
how it batches, as a kopf user tuning for this job would set it at start-up:

* the diff base (``last-handled-configuration``) and the handlers' progress go into
  ``status`` (``StatusDiffBaseStorage``, ``StatusProgressStorage``) instead of annotations, so
  a change costs one ``PATCH .../status`` (handler result and kopf's bookkeeping together)
  instead of a status PATCH plus an annotation PATCH on the object;
* events of one object are batched for 10 ms instead of kopf's default 100 ms
  (``settings.batching.batch_window``), so it reacts sooner;
* per-object workers stay unbounded (``worker_limit=None``, kopf's default and its fastest).

Run as ``KUBECONFIG=K python -m kopf run --quiet --standalone --namespace NS -m
bench._kopf_tuned_operator``.
"""

from __future__ import annotations

from typing import Any

import kopf

from bench._kopf_operator import ready as ready


@kopf.on.startup()
def tune(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage()
    settings.persistence.progress_storage = kopf.StatusProgressStorage()
    settings.batching.batch_window = 0.01
    settings.batching.worker_limit = None
