"""The gates controller lifts a gate once, however many of its Node's events come before the
watch brings the lift back (``autoscaler/_gates.py``; issue 25, the Karpenter benchmark's S1).

A gated Node of an autoscaled pool, Ready and rid of the start-up taints, with nothing to keep
behind its gate: the controller's reconcile lifts it with the guarded patch. A Node's first
second brings several events (kwok's status, kube-controller-manager's patches), and each is a
reconcile. Here the fault proxy drops the operator's Node watch events after the first sync,
so its informer never sees its own lift, and the Node is reconciled again, as the next event
would have it. Read from the informer's store, the second reconcile saw the gate still there and
sent the lift again, answered 422 (about three a run in S1); read through the manager's cache,
which waits for our own write and then reads the Node live, it sees the gate gone and writes
nothing (and the lift itself, ``Actor.open``, reads it so too). The oracle is the proxy's log of
the operator's requests, and the Node as the apiserver has it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubeloop import NODES, Client, Request, Result
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager
from kubeloop.testing.faults import DropEvents, FaultProxy
from nodepool_operator.api import AUTOSCALERS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.controllers._reserve import RESERVED_KEY
from nodepool_operator.controllers._scope import node_selector
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.autoscaler.decide import Memory
from nodepool_operator.settings import OperatorSettings
from tests import factories

pytestmark = pytest.mark.integration

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"


@pytest.fixture(scope="module")
def operator_crds(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))


def _gated_ready_node(name: str, pool: str) -> dict[str, Any]:
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return factories.node(
        name,
        labels={POOL_LABEL: pool},
        taints=[factories.taint(RESERVED_KEY, value=name)],
        conditions=[factories.condition("Ready", True, lastTransitionTime=since)],
    )


def _taint_keys(node: dict[str, Any]) -> list[str]:
    return [t["key"] for t in (node.get("spec") or {}).get("taints") or []]


@pytest.mark.usefixtures("operator_crds")
async def test_a_gate_is_lifted_once_when_its_node_is_reconciled_again_before_the_watch_sees_it(
    kube_fault_proxy: FaultProxy, kube_namespace: str, kube_client: Client
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    pool = f"gates-{ns}"[:50]
    name = f"{pool}-n1"
    scaler = factories.autoscaler("as", pool=pool, namespaces=[ns])
    await kube_client.create(AUTOSCALERS, scaler, ns)
    await kube_client.create(NODES, _gated_ready_node(name, pool))
    try:
        async with Client(proxy.client_config("op")) as client:
            mgr = new_manager(client)
            mgr.cache.read_your_writes_timeout = 0.5
            # the Autoscaler's controllers as the operator wires them, its memory that of
            # one that has passed, gathers nothing and nominates nothing
            AutoscalerController(mgr, OperatorSettings(), memory={"as": Memory()}).register()
            [gates] = [c for c in mgr.controllers if c.name == "autoscaler-gates"]
            mgr.cache.start()  # the manager is not run: the reconciler is called directly
            try:
                nodes = mgr.cache.informer(NODES, label_selector=node_selector({}))
                autoscalers = mgr.cache.informer(AUTOSCALERS)
                await eventually(lambda: name in nodes.store, "the gated Node in the cache")
                await eventually(lambda: len(autoscalers.store) == 1, "the Autoscaler cached")
                # from now on the operator's Node watch delivers nothing
                proxy.add_rule(DropEvents(), client="op", verb="watch", resource="nodes")
                proxy.cut_watches(client="op")
                await eventually(
                    lambda: any(e.resource == "nodes" for e in proxy.open_watches("op")),
                    "the Node watch reopened",
                    timeout=30,
                )
                proxy.log.clear()

                assert await gates.reconciler(Request(name)) == Result()
                # the next event of the same Node, before the watch brought the lift back
                assert await gates.reconciler(Request(name)) == Result()

                stored = nodes.store.get(name)
                assert stored is not None
                assert RESERVED_KEY in _taint_keys(stored)  # the store really lags
                patches = proxy.log.entries(client="op", verb="patch", resource="nodes")
                assert [(e.name, e.status) for e in patches] == [(name, 200)]
            finally:
                await mgr.cache.stop()
        live = await kube_client.get(NODES, name)
        assert RESERVED_KEY not in _taint_keys(live)
    finally:
        await kube_client.delete(NODES, name)
