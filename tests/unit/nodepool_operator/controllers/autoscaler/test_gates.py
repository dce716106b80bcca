"""The gates controller (``autoscaler/_gates.py``), in process: a gated Node of an autoscaled
pool, open-able, is lifted by its own reconcile, without an Autoscaler pass, when the
Autoscaler's memory holds no pod to nominate; otherwise it is left to the pass. Each run
builds the Autoscaler's controllers on the snapshot with the memory of the passes before (as
one long-running operator keeps it) and reconciles the one Node."""

from __future__ import annotations

from typing import Any

from kubeloop import Result
from kubeloop.testing import Write
from nodepool_operator.controllers._reserve import RESERVED_KEY, Reservation
from nodepool_operator.controllers.autoscaler._gates import nothing_to_keep
from nodepool_operator.controllers.autoscaler.decide import Memory
from tests import factories
from tests.unit.nodepool_operator.controllers.autoscaler.test_reconcile import (
    Passes,
    node,
    planned_pods,
    pods,
    pool,
    scale_targets,
    scaler,
)


async def open_gate(passes: Passes, node_name: str, *objects: dict[str, Any]) -> list[Write]:
    """One reconcile of the gates controller for ``node_name``, with ``passes``' memory."""
    result, writes = await passes.run(*objects, request=node_name, controller="autoscaler-gates")
    assert result == Result()
    return writes


def recorded(target: int, *instances: str) -> dict[str, Any]:
    obj = pool(target)
    obj["status"] = {"instances": [{"name": n, "state": "running"} for n in instances]}
    return obj


def gated(
    passes: Passes, name: str, *, ready: bool, taints: tuple[str, ...] = ()
) -> dict[str, Any]:
    gate = factories.taint(RESERVED_KEY, value=name)
    more = [factories.taint(key) for key in taints]
    return node(name, ready=ready, ready_since=passes.now, taints=[gate, *more])


def lifted(writes: list[Write]) -> list[str]:
    return [w.name for w in writes if (w.verb, w.kind) == ("patch", "Node")]


async def test_a_gate_with_no_nomination_behind_it_falls_alone_once_its_node_is_open() -> None:
    """A plan of one kind (four 28Gi pods on two new nodes) holds no nomination: vm-a, Ready
    and rid of the start-up taints, is opened by its own Node's reconcile, with the guarded
    patch, while vm-b (Ready but still not-ready tainted, or not Ready) is left gated."""
    passes = Passes()
    _, writes = await passes.run(scaler(), pool(), *pods("w", 4))
    assert scale_targets(writes) == [2]
    passes.now += 20
    ours = recorded(2, "vm-a", "vm-b")
    a = gated(passes, "vm-a", ready=True)
    b_starting = gated(passes, "vm-b", ready=True, taints=("node.kubernetes.io/not-ready",))
    world = (scaler(), ours, *pods("w", 4))
    writes = await open_gate(passes, "vm-a", *world, a, b_starting)
    assert lifted(writes) == ["vm-a"]
    [patch] = [w for w in writes if w.kind == "Node"]
    assert patch.patch_type == "application/json-patch+json"
    assert patch.body == [
        {"op": "test", "path": "/spec/taints/0", "value": a["spec"]["taints"][0]},
        {"op": "remove", "path": "/spec/taints/0"},
    ]
    assert writes == [patch]  # no planning, no status, no Event
    assert lifted(await open_gate(passes, "vm-b", *world, a, b_starting)) == []
    b_booting = gated(passes, "vm-b", ready=False)
    assert lifted(await open_gate(passes, "vm-b", *world, a, b_booting)) == []


async def test_a_gate_is_left_to_the_pass_while_a_nomination_is_kept_or_no_pass_has_run() -> None:
    """Two kinds: the 28Gi pods are nominated, so the gates fall together in a pass and the
    Node's reconcile writes nothing; nor does it for a pool whose Autoscaler has not passed
    since the operator started (its memory is empty), or that no Autoscaler scales."""
    passes = Passes()
    _, writes = await passes.run(scaler(), pool(), *planned_pods())
    assert scale_targets(writes) == [2]
    passes.now += 20
    ours = recorded(2, "vm-a", "vm-b")
    a = gated(passes, "vm-a", ready=True)
    assert lifted(await open_gate(passes, "vm-a", scaler(), ours, *planned_pods(), a)) == []
    fresh = Passes(now=passes.now)
    assert lifted(await open_gate(fresh, "vm-a", scaler(), ours, *planned_pods(), a)) == []
    one_kind = Passes()
    await one_kind.run(scaler(), pool(), *pods("w", 4))
    one_kind.now += 20
    assert lifted(await open_gate(one_kind, "vm-a", ours, *pods("w", 4), a)) == []


def test_nothing_to_keep_once_passed_not_gathering_and_every_planned_pod_unheld() -> None:
    held = Reservation(slots=[("p", "q")], unheld=frozenset({"p"}))
    unheld = Reservation(slots=[("p", "q")], unheld=frozenset({"p", "q"}))
    assert nothing_to_keep(Memory(reservation=unheld), now=10.0)
    assert nothing_to_keep(Memory(), now=10.0)  # no slot: an unplanned gated node opens
    assert not nothing_to_keep(None, now=10.0)
    assert not nothing_to_keep(Memory(reservation=held), now=10.0)
    gathering = Memory(reservation=unheld, gathering=(12.0, 3))
    assert not nothing_to_keep(gathering, now=10.0)
    assert nothing_to_keep(gathering, now=12.5)  # that burst's wait is over
