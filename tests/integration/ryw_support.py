"""Shared by the read-your-own-writes tests (docs/architecture.md, "What a reconcile may
assume after its own writes")."""

from __future__ import annotations

from kubeloop import CONFIGMAPS, Cache, Informer
from kubeloop.testing import eventually


async def selected_informer(cache: Cache, ns: str, selector: str) -> Informer:
    """A synced ConfigMap informer for ``ns`` with ``selector``, as a ``for_`` with that
    selector would start (a cache with no controllers does not start it by itself)."""
    inf = cache.informer(CONFIGMAPS, namespace=ns, label_selector=selector)
    if not inf.started:
        inf.start()
    await eventually(lambda: inf.has_synced, "the selected informer's sync")
    return inf
