"""The plan holds by default: with no setting, kube-scheduler scoring ``MostAllocated`` (the
profile that took S2 from 20 to 24 nodes in ``docs/benchmarks.md``) puts a mixed burst on the
nodes the Autoscaler planned, because the Autoscaler nominates the planned pods to their new
nodes once those Nodes register (all but the kind kube-scheduler tries first, which lands
where the nominations leave room). Nothing is written to a pod's spec.

The bed is a cluster of its own (the session's scores ``LeastAllocated``). The smalls are
created first: in queue order ``MostAllocated`` would fill the first node with all six and
two bigs, and the last big would need a third node. The oracle is the apiserver: the pool's
targetNodes history, its Nodes, where each pod is bound, the nominations a watch saw and
the pods' managedFields."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from kubeloop import NODES, PODS, Event, Informer
from kubeloop.envtest import ControlPlane
from kubeloop.testing.plugin import CLUSTER_OPTIONS
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.demo import api_activity
from tests.e2e.conftest import CRD_DIR, OperatorEnv
from tests.e2e.test_autoscaler import (
    BOTH,
    Timeline,
    autoscaler_manifest,
    names,
    pool_manifest,
)
from tests.e2e.test_reserve import all_bound, mixed_burst

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube_control_plane() -> Iterator[ControlPlane]:
    """The full test bed, its kube-scheduler scoring ``MostAllocated``."""
    with ControlPlane(replace(CLUSTER_OPTIONS, scheduler_scoring="MostAllocated")) as cp:
        yield cp


@pytest.fixture(scope="module")
def operator_crds(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))


async def test_a_mixed_burst_lands_on_the_planned_nodes_under_most_allocated(
    operator_env: OperatorEnv, kube_control_plane: ControlPlane
) -> None:
    env = operator_env
    namespace = kube_control_plane.create_namespace("nominate")
    pool, scaler = names(env)
    env.cloud = SimulatedCloud(env.settings.cloud_state, boot_seconds=2.0)
    await env.create(NODEPOOLS, pool_manifest(pool, cpu="16"))  # reserveNewNodes: not set
    timeline = await Timeline.watch(env.client, pool, namespace)
    seen: set[tuple[str, str]] = set()

    def nominations(event: Event) -> None:
        if node := (event.obj.get("status") or {}).get("nominatedNodeName"):
            seen.add((event.obj["metadata"]["name"], node))

    watch = Informer(env.client, PODS, namespace=namespace)
    watch.add_handler(nominations)
    watch.start()
    await watch.wait_synced()
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
        await env.start(controllers=BOTH)
        for pod in mixed_burst(pool, first="small"):  # the scheduler's queue follows creation
            await env.create(PODS, pod, namespace)
        bound = await env.eventually(
            functools.partial(all_bound, env, namespace), "all 12 pods to be bound", timeout=120
        )
        nodes = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}")
        assert len(nodes["items"]) == 2
        assert timeline.values == [0, 2]  # one raise, and it held
        per_node = Counter(
            (p["spec"]["nodeName"], p["metadata"]["name"].split("-")[0]) for p in bound
        )
        assert sorted(per_node.values()) == [3, 3, 3, 3]  # three of each on each node
        # the Autoscaler nominated pods, each to a node of the pool, through their status
        pool_nodes = {n["metadata"]["name"] for n in nodes["items"]}
        assert seen, "no nomination was seen"
        assert {node for _, node in seen} <= pool_nodes
        for pod in bound:
            for entry in _operator_entries(pod, env.client.field_manager):
                assert entry.get("subresource") == "status", (pod["metadata"]["name"], entry)
                assert set(entry["fieldsV1"]) == {"f:status"}, entry
        # the smalls, first in the scheduler's queue, were left unnominated (the lead kind:
        # tried while the gates fall, they would lose a nomination), the bigs nominated
        written = {
            p["metadata"]["name"].split("-")[0]
            for p in bound
            if _operator_entries(p, env.client.field_manager)
        }
        assert written == {"big"}, written
        # and by the operator's own count of writes (``-``: outside a controller, the test's
        # creates): pods' status only, never a pod itself
        to_pods = {
            target: n
            for target, n in api_activity(env.registry).writes_by_target.items()
            if target.split(" ")[-1].split("/")[0] == "pods" and not target.startswith("- ")
        }
        assert to_pods.keys() == {"autoscaler patch pods/status"}, to_pods
    finally:
        await watch.stop()
        await timeline.stop()


def _operator_entries(pod: dict[str, Any], manager: str) -> list[dict[str, Any]]:
    """The pod's managedFields entries written by the operator's controllers (they write as
    ``<client>-<controller>``; the bare ``<client>`` entry is this test creating the pod)."""
    return [
        e
        for e in pod["metadata"].get("managedFields") or ()
        if e["manager"].startswith(f"{manager}-")
    ]
