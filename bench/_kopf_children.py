"""The kopf side of the child-owning job (``bench/_children.py``), as kopf's docs write it.

Creating and updating the child is kopf's tutorial ("Creating the objects", "Updating the
objects"): ``@kopf.on.create`` builds the ConfigMap and ``kopf.adopt`` makes the Sample its
controller; ``@kopf.on.update`` on ``spec`` patches its data. kopf has no client for other
objects (its docs use an external one): the children are written with one plain aiohttp
session (``bench._raw``), the lightest async client, so no client overhead counts against
kopf.

kopf does not watch the children of an object, so a deleted child stays deleted until
something else triggers the owner. Its docs ("Reconciliation") give two ways, one per row:

* **defaults** (``register(tuned=False)``): the generic pattern the docs recommend: an
  in-memory index of the children (``@kopf.index`` on the labelled ConfigMaps) and a timer
  on every owner (``@kopf.timer``, every ``TIMER_INTERVAL_S``, first run one interval after
  the owner appears, so it does not race the create handler) that creates a missing child.
  A timer puts kopf's finalizer on every owner (one more write per object).
* **tuned** (``register(tuned=True)``): an immediate reaction: a low-level
  ``@kopf.on.event`` handler on the labelled ConfigMaps that, when one is DELETED, creates
  it again from an index of the owners (``@kopf.index`` on the Samples: no GET); plus the
  status-only job's tuning (diff base and progress in ``status``, a 10 ms batch window).

This module registers nothing when imported; ``bench._kopf_children_operator`` and
``bench._kopf_children_tuned_operator`` call :func:`register`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import kopf

from bench._children import (
    CONNECTIONS,
    GROUP,
    KIND,
    LABEL,
    PLURAL,
    TIMER_INTERVAL_S,
    VERSION,
    child_of,
    controller_uid,
    create_child,
    patch_child,
)
from bench._raw import connect


async def open_client(memo: kopf.Memo, **_: Any) -> None:
    memo.stack = contextlib.AsyncExitStack()
    memo.api = await memo.stack.enter_async_context(connect(os.environ["KUBECONFIG"], CONNECTIONS))


async def close_client(memo: kopf.Memo, **_: Any) -> None:
    await memo.stack.aclose()


def _adopted(owner: Any, spec: Any) -> dict[str, Any]:
    meta = owner["metadata"]
    child = child_of(meta["name"], meta["namespace"], dict(spec))
    kopf.adopt(child, owner=owner)
    return child


async def on_create(body: kopf.Body, spec: kopf.Spec, memo: kopf.Memo, **_: Any) -> None:
    await create_child(memo.api, _adopted(body, spec))


async def on_update(body: kopf.Body, spec: kopf.Spec, memo: kopf.Memo, **_: Any) -> None:
    await patch_child(memo.api, _adopted(body, spec))


# -- defaults: an index of the children, a timer on the owners ------------------------------


def children(body: kopf.Body, **_: Any) -> dict[str, str | None]:
    """Index: owner name -> the UID of the owner that controls this child."""
    return {body["metadata"]["labels"][LABEL]: controller_uid(dict(body))}


async def timer(body: kopf.Body, spec: kopf.Spec, memo: kopf.Memo, **kwargs: Any) -> None:
    # the index arrives as a keyword named after its function
    index: kopf.Index[str, str | None] = kwargs["children"]
    if body["metadata"]["uid"] not in index.get(body["metadata"]["name"], ()):
        await create_child(memo.api, _adopted(body, spec))


# -- tuned: an index of the owners, a handler on the children's events ----------------------


def owners(body: kopf.Body, spec: kopf.Spec, **_: Any) -> dict[str, dict[str, Any]]:
    """Index: owner name -> what its child is built from (no GET when one is deleted)."""
    meta = body["metadata"]
    return {
        meta["name"]: {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "spec": dict(spec),
        }
    }


async def child_event(type: str, body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
    if type != "DELETED":
        return
    index: kopf.Index[str, dict[str, Any]] = kwargs["owners"]
    for owner in index.get(body["metadata"]["labels"][LABEL], ()):
        if owner["metadata"]["uid"] == controller_uid(dict(body)):
            await create_child(memo.api, _adopted(owner, owner["spec"]))


def tune(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage()
    settings.persistence.progress_storage = kopf.StatusProgressStorage()
    settings.batching.batch_window = 0.01
    settings.batching.worker_limit = None


def register(*, tuned: bool) -> None:
    """Register the handlers of one row with kopf's default registry."""
    kopf.on.startup()(open_client)
    kopf.on.cleanup()(close_client)
    kopf.on.create(GROUP, VERSION, PLURAL)(on_create)
    kopf.on.update(GROUP, VERSION, PLURAL, field="spec")(on_update)
    labelled = {LABEL: kopf.PRESENT}
    if tuned:
        kopf.on.startup()(tune)
        kopf.index(GROUP, VERSION, PLURAL)(owners)
        kopf.on.event("v1", "configmaps", labels=labelled)(child_event)
    else:
        kopf.index("v1", "configmaps", labels=labelled)(children)
        kopf.timer(
            GROUP, VERSION, PLURAL, interval=TIMER_INTERVAL_S, initial_delay=TIMER_INTERVAL_S
        )(timer)
