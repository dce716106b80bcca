"""Deleting a NodePool drains its nodes like a scale-down (taint, evictions honouring
PodDisruptionBudgets), for at most ``spec.disruption.terminationGracePeriod``; a scale-down
drain gives up after ``spec.disruption.drainTimeout`` and keeps the node.

Oracles are the apiserver's: watches on the Deployment's pods (each one's final state says
whether the Eviction API removed it: the ``DisruptionTarget`` condition with reason
``EvictionByEvictionAPI``), on the pool's Nodes (the resourceVersion of their deletion against
their pods'), on the pool (its conditions), and its Events.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NODES, PODS, Informer, NotFound, Object
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers._unneeded import parse_time
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    DISRUPTING,
    PDBS,
    NodeWatch,
    PodWatch,
    Requests,
    available,
    budget,
    deployment,
    events,
    is_evicted,
    nodes_of,
    pool,
    pool_gone,
    ready_nodes,
)

pytestmark = pytest.mark.integration

GROUP = "drain-group"
TIMED_OUT_AT = "kubeloop.dev/drain-timed-out-at"


def grouped_pool(name: str, target: int, group: str, **disruption: Any) -> dict[str, Any]:
    manifest = pool(name, target)
    manifest["spec"]["labels"] = {GROUP: group}
    if disruption:
        manifest["spec"]["disruption"] = disruption
    return manifest


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("pooldel")


async def test_deleting_a_pool_evicts_one_pod_at_a_time_under_its_pdb_before_nodes_and_vms_go(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Pool ``old`` (2 nodes) runs a 3-replica Deployment whose PDB allows 1 unavailable;
    pool ``new`` (same node label) has room. Deleting ``old``: every pod leaves through an
    eviction, never more than one missing at once, each replaced on ``new``; each Node is
    deleted only after its pods are gone, and all of ``old``'s VMs are terminated."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    old, new = f"old-{env.run_id}", f"new-{env.run_id}"
    await env.create(NODEPOOLS, grouped_pool(old, 2, env.run_id))
    await env.start(controllers=("nodepool",))

    async def old_ready() -> list[Object]:
        return await ready_nodes(env, old, 2, untainted=True)

    await env.eventually(old_ready, "two Ready nodes in the old pool", timeout=90)
    dep = deployment(3)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {GROUP: env.run_id}
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, budget(1), namespace)

    async def three() -> bool:
        return await available(env, namespace, 3)

    await env.eventually(three, "the Deployment's 3 pods available", timeout=90)
    await env.create(NODEPOOLS, grouped_pool(new, 1, env.run_id))

    async def new_ready() -> list[Object]:
        return await ready_nodes(env, new, 1, untainted=True)

    (landing,) = await env.eventually(new_ready, "the new pool's node Ready", timeout=90)
    old_vms = {vm.id for vm in env.cloud.snapshot().live} - {
        landing["spec"]["providerID"].rsplit("/", 1)[-1]
    }
    assert len(old_vms) == 2
    pods = PodWatch(env, namespace)
    nodes = NodeWatch(env, f"{POOL_LABEL}={old}")
    await pods.start()
    await nodes.start()
    try:
        before = dict(pods.nodes)
        assert len(before) == 3
        assert landing["metadata"]["name"] not in before.values()
        await env.client.delete(NODEPOOLS, old)

        async def deleted() -> bool:
            return await pool_gone(env, old) and await three()

        await env.eventually(deleted, "the old pool gone, 3 replicas available", timeout=180)
        # Every original pod left through the Eviction API, none deleted or lost with its VM.
        assert set(pods.final) >= set(before)
        assert all(is_evicted(pods.final[p]) for p in before), {
            p: pods.final[p].get("status") for p in before
        }
        assert requests.pod_deletes() == 0
        assert requests.evictions() == 3
        # One at a time: never fewer than 2 of the 3 replicas available.
        assert min(pods.available) >= 2
        # Replacements all landed on the new pool's node.
        replacements = {p: n for p, n in pods.nodes.items() if p not in before}
        assert set(replacements.values()) == {landing["metadata"]["name"]}
        # Each old Node was deleted after every pod it ran was gone (resourceVersions of one
        # etcd), and the old VMs are terminated.
        for node_name in set(before.values()):
            on_it = [p for p, n in before.items() if n == node_name]
            assert node_name in nodes.deleted_at
            assert all(
                int(pods.final[p]["metadata"]["resourceVersion"]) < nodes.deleted_at[node_name]
                for p in on_it
            )
        live = {vm.id for vm in env.cloud.snapshot().live}
        assert not live & old_vms
        assert not await nodes_of(env, old)
    finally:
        await nodes.stop()
        await pods.stop()


async def test_a_pdb_that_never_allows_holds_pool_deletion_only_for_the_grace_period(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """``maxUnavailable: 0`` refuses every eviction; with ``terminationGracePeriod: 4s`` the
    deletion waits that long (the pod untouched), then deletes the pod, the Node and the VM,
    with a TerminationGracePeriodExpired Event and Deleting condition."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"tgp-{env.run_id}"
    await env.create(NODEPOOLS, grouped_pool(name, 1, env.run_id, terminationGracePeriod="4s"))
    await env.start(controllers=("nodepool",))

    async def one() -> list[Object]:
        return await ready_nodes(env, name, 1, untainted=True)

    (node,) = await env.eventually(one, "the pool's node Ready", timeout=90)
    dep = deployment(1)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {GROUP: env.run_id}
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, budget(0), namespace)

    async def up() -> bool:
        return await available(env, namespace, 1)

    await env.eventually(up, "the Deployment's pod available", timeout=90)
    conditions: list[tuple[str, str]] = []

    def on_pool(event: Any) -> None:
        for c in (event.obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Deleting":
                conditions.append((c["reason"], c.get("message", "")))

    pools = Informer(env.client, NODEPOOLS, field_selector=f"metadata.name={name}")
    pools.add_handler(on_pool)
    pools.start()
    await pools.wait_synced()
    pods = PodWatch(env, namespace)
    await pods.start()
    try:
        (original,) = pods.current
        await env.client.delete(NODEPOOLS, name)
        deletion = (await env.client.get(NODEPOOLS, name))["metadata"]["deletionTimestamp"]

        async def deleted() -> bool:
            return await pool_gone(env, name)

        await env.eventually(deleted, "the pool to go after its grace period", timeout=90)
        assert requests.evictions(refused=True) >= 1
        assert requests.evictions() == 0

        # The pod was never evicted; it went with its Node, after the grace period, removed
        # by the pod garbage collector.
        async def pod_gone() -> bool:
            return original in pods.final

        await env.eventually(pod_gone, "the pod garbage collector to remove the pod", 120)
        final = pods.final[original]
        assert not is_evicted(final)
        assert _disruption_reason(final) == "DeletionByPodGC"
        assert _seconds(final["metadata"]["deletionTimestamp"]) >= _seconds(deletion) + 4
        reasons = [reason for reason, _ in conditions]
        assert reasons[0] == "Draining"
        assert reasons[-1] == "TerminationGracePeriodExpired"
        assert node["metadata"]["name"] in conditions[-1][1]
        notes = await events(env, name, "TerminationGracePeriodExpired")
        assert notes
        assert "with 1 pod(s) not evicted" in notes[0]
        assert not env.cloud.snapshot().live
        with pytest.raises(NotFound):
            await env.client.get(NODES, node["metadata"]["name"])
    finally:
        await pods.stop()
        await pools.stop()


def _disruption_reason(obj: Object) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    found = [c.get("reason", "") for c in conditions if c.get("type") == "DisruptionTarget"]
    return str(found[0]) if found else ""


def _seconds(stamp: str) -> float:
    value = parse_time(stamp)
    assert value is not None
    return value


async def test_a_scale_down_drain_that_times_out_untaints_and_keeps_its_node(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Two nodes: ``held`` runs a pod whose PDB allows no disruption (the least used node),
    ``other`` a larger one, under a PDB that allows nothing either at first (so ``held`` is
    chosen by use alone: a node whose pods can go now would be chosen first). Target
    2 -> 1 with ``drainTimeout: 3s``: ``held`` is tainted, its eviction refused; ``other``'s
    budget is relaxed; ``held`` is untainted and kept with a DrainTimedOut Event, and
    ``other`` is drained and removed instead."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"dto-{env.run_id}"
    await env.create(NODEPOOLS, grouped_pool(name, 1, env.run_id, drainTimeout="3s"))
    await env.start(controllers=("nodepool",))

    async def first() -> list[Object]:
        return await ready_nodes(env, name, 1, untainted=True)

    (held,) = await env.eventually(first, "the first node Ready", timeout=90)
    held_name = held["metadata"]["name"]
    dep = deployment(1)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {GROUP: env.run_id}
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, budget(0), namespace)

    async def up() -> bool:
        return await available(env, namespace, 1)

    await env.eventually(up, "the held pod available", timeout=90)
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 2}})

    async def both() -> list[Object]:
        return await ready_nodes(env, name, 2, untainted=True)

    found = await env.eventually(both, "the second node Ready", timeout=90)
    (other_name,) = [n["metadata"]["name"] for n in found if n["metadata"]["name"] != held_name]
    mover = deployment(1)
    mover["metadata"]["name"] = "mover"
    template = mover["spec"]["template"]
    mover["spec"]["selector"] = {"matchLabels": {"app": "mover"}}
    template["metadata"]["labels"] = {"app": "mover"}
    template["spec"]["nodeSelector"] = {GROUP: env.run_id}
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [other_name]}
    term = {"matchExpressions": [hostname]}
    template["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
        }
    }
    await env.create(DEPLOYMENTS_RES, mover, namespace)
    await env.create(PDBS, factories.pdb("mover", max_unavailable=0), namespace)

    async def mover_on_other() -> bool:
        items = (await env.client.list(PODS, namespace, label_selector="app=mover"))["items"]
        return any(
            p["spec"].get("nodeName") == other_name
            and (p.get("status") or {}).get("phase") == "Running"
            for p in items
        )

    await env.eventually(mover_on_other, "the mover pod running on the other node", timeout=90)
    pods = PodWatch(env, namespace)
    nodes = NodeWatch(env, f"{POOL_LABEL}={name}")
    await pods.start()
    await nodes.start()
    try:
        (web,) = pods.current
        await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

        async def refused() -> bool:
            return requests.evictions(refused=True) >= 1

        await env.eventually(refused, "held's eviction refused (429)")
        await env.client.patch(PDBS, "mover", {"spec": {"maxUnavailable": 1}}, namespace)

        async def only_held_left() -> bool:
            names = [n["metadata"]["name"] for n in await nodes_of(env, name)]
            return names == [held_name]

        await env.eventually(only_held_left, "the other node removed instead", timeout=120)
        kept = await env.client.get(NODES, held_name)
        assert not any(t["key"] == DISRUPTING for t in kept["spec"].get("taints") or ())
        assert TIMED_OUT_AT in kept["metadata"].get("annotations", {})
        assert nodes.tainted[held_name] == [False, True, False]  # tainted once, then kept
        assert nodes.tainted[other_name][-1] is True
        assert other_name in nodes.deleted_at
        assert web in pods.current  # the held pod never left
        assert web not in pods.final
        assert requests.evictions(refused=True) >= 1
        notes = await events(env, name, "DrainTimedOut")
        assert notes
        assert f"node {held_name} not drained within drainTimeout 3s" in notes[0]
        assert len(env.cloud.snapshot().live) == 1
    finally:
        await nodes.stop()
        await pods.stop()


async def test_a_pool_deletion_held_by_a_pdb_survives_an_operator_restart(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """The drain of a deleted pool is state in the cluster (the taint, the pool's
    deletionTimestamp and condition), not in the operator: stopped while a PDB holds it, a
    new operator goes on waiting, and evicts once the PDB allows, before the Node goes."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    old, new = f"held-{env.run_id}", f"room-{env.run_id}"
    await env.create(NODEPOOLS, grouped_pool(old, 1, env.run_id))
    await env.start(controllers=("nodepool",))

    async def old_ready() -> list[Object]:
        return await ready_nodes(env, old, 1, untainted=True)

    (node,) = await env.eventually(old_ready, "the old pool's node Ready", timeout=90)
    dep = deployment(1)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {GROUP: env.run_id}
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, budget(0), namespace)

    async def up() -> bool:
        return await available(env, namespace, 1)

    await env.eventually(up, "the Deployment's pod available", timeout=90)
    await env.create(NODEPOOLS, grouped_pool(new, 1, env.run_id))

    async def new_ready() -> list[Object]:
        return await ready_nodes(env, new, 1, untainted=True)

    (landing,) = await env.eventually(new_ready, "the new pool's node Ready", timeout=90)
    pods = PodWatch(env, namespace)
    await pods.start()
    try:
        (original,) = pods.current
        await env.client.delete(NODEPOOLS, old)

        async def draining() -> bool:
            pool = await env.client.get(NODEPOOLS, old)
            conditions = (pool.get("status") or {}).get("conditions") or ()
            return requests.evictions(refused=True) >= 1 and any(
                c["type"] == "Deleting" and c["reason"] == "Draining" for c in conditions
            )

        await env.eventually(draining, "the deletion held by the PDB (429, Draining)")
        assert env.mgr is not None
        assert env.task is not None
        env.mgr.stop()
        await env.task
        env.mgr, env.task = None, None
        refused = requests.evictions(refused=True)
        await env.start(controllers=("nodepool",))  # a new operator; the kubelets run on

        async def refused_again() -> bool:
            return requests.evictions(refused=True) > refused

        await env.eventually(refused_again, "the new operator to ask again (and be refused)")
        held = await env.client.get(NODES, node["metadata"]["name"])
        assert any(t["key"] == DISRUPTING for t in held["spec"].get("taints") or ())
        assert original in pods.current
        assert requests.evictions() == 0
        await env.client.patch(PDBS, "web", {"spec": {"maxUnavailable": 1}}, namespace)

        async def done() -> bool:
            return await pool_gone(env, old) and await up()

        await env.eventually(done, "the old pool gone, its pod replaced", timeout=120)
        assert is_evicted(pods.final[original])
        assert requests.pod_deletes() == 0
        replacements = {p: n for p, n in pods.nodes.items() if p != original}
        assert set(replacements.values()) == {landing["metadata"]["name"]}
        with pytest.raises(NotFound):
            await env.client.get(NODES, node["metadata"]["name"])
    finally:
        await pods.stop()
