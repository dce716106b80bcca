"""Writing back a nomination the scheduler dropped (``_renominate``): which drops count, what
is written, and the bound on how often, run as a controller on a fixed snapshot."""

from __future__ import annotations

import itertools
from typing import Any

from kubeloop import PODS, Added, Request, Updated
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from nodepool_operator.controllers.autoscaler._renominate import (
    TRIES,
    Renominations,
    Renominator,
    nomination_dropped,
)
from tests import factories

#: Each pod as read is a new version (views are read once per uid and version).
_VERSIONS = itertools.count(10)


def pod(nominated: str = "", node: str | None = None) -> dict[str, Any]:
    obj = factories.pod("p", namespace="prod", memory="28Gi", unschedulable=node is None, uid="u-p")
    if node is not None:
        obj["spec"]["nodeName"] = node
    if nominated:
        obj["status"]["nominatedNodeName"] = nominated
    obj["metadata"]["resourceVersion"] = str(next(_VERSIONS))
    return obj


def test_a_drop_is_an_unbound_pod_losing_its_nomination() -> None:
    assert nomination_dropped(Updated(pod("vm-a"), pod()))
    assert not nomination_dropped(Updated(pod("vm-a"), pod("vm-b")))  # moved: the scheduler's
    assert not nomination_dropped(Updated(pod("vm-a"), pod(node="vm-a")))  # bound
    assert not nomination_dropped(Updated(pod(), pod()))
    assert not nomination_dropped(Added(pod()))


async def written_back(held: Renominations, obj: dict[str, Any]) -> list[Write]:
    """One reconcile of the pod ``obj`` by the controller, ``held`` kept between passes."""
    mgr = new_manager(Snapshot([obj]).client)
    mgr.controller("nominations").for_(PODS).complete(
        Renominator(mgr.client, mgr.cache, held).reconcile
    )
    _, writes = await reconcile_once(mgr, Request("p", "prod"))
    return [w for w in writes if w.kind == "Pod"]


async def test_only_a_held_nomination_is_written_back_at_most_tries_times() -> None:
    held = Renominations()
    assert await written_back(held, pod()) == []  # no Autoscaler holds one: nothing
    held.expect("as", [("u-p", "vm-a")])
    assert await written_back(held, pod("vm-a")) == []  # standing: nothing to write
    for _ in range(TRIES):
        dropped = pod()
        [write] = await written_back(held, dropped)
        assert (write.verb, write.subresource) == ("patch", "status")
        assert write.body == {
            "status": {"nominatedNodeName": "vm-a"},
            "metadata": {"resourceVersion": dropped["metadata"]["resourceVersion"]},
        }
    assert await written_back(held, pod()) == []  # the scheduler keeps clearing it: let go
    held.expect("as", [("u-p", "vm-b")])  # planned again onto another node: tried afresh
    assert len(await written_back(held, pod())) == 1
    held.forget("as")
    assert await written_back(held, pod()) == []
