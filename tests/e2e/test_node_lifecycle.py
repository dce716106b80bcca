"""A pool's Nodes as on a real cluster: registered by their VMs, adopted, drained, repaired.

The full test bed runs (kube-controller-manager, kwok) and the simulated VMs' kubelets
register the Nodes. Oracles are the apiserver's objects (who created a Node, its labels,
taints, finalizers, conditions; pods and their phase), the cloud's records (which VMs were
ever launched, which are terminated, how many creates were asked) and the Events.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest

from kubeloop import EVENTS, NODES, PODS, Client, NotFound, Object, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS, parse_nodepool
from nodepool_operator.cloud import CATALOGUE, TransientCloudError
from nodepool_operator.controllers._node_manifest import node_bootstrap
from nodepool_operator.controllers.nodepool import NODE_FINALIZER
from tests import factories
from tests.e2e.conftest import LABEL, OperatorEnv

pytestmark = pytest.mark.integration

POOL = "kubeloop.dev/nodepool"
POOL_UID = "kubeloop.dev/nodepool-uid"
KWOK = "kwok.x-k8s.io/node"
ONLY_NODEPOOL = ("nodepool",)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)


def _pool(name: str, target: int, **spec: Any) -> dict[str, Any]:
    return factories.nodepool(name, target=target, max_nodes=5, **spec)


async def _nodes(env: OperatorEnv, pool: str) -> list[Object]:
    return list((await env.client.list(NODES, label_selector=f"{POOL}={pool}"))["items"])


def _ready(node: Object) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


async def _converged(env: OperatorEnv, name: str, count: int) -> Object | None:
    pool = await env.client.get(NODEPOOLS, name)
    status = pool.get("status") or {}
    done = (
        status.get("observedGeneration") == pool["metadata"]["generation"]
        and status.get("scaleOperation") == "inactive"
        and status.get("readyNodes") == count
        and status.get("currentNodes") == count
    )
    nodes = await _nodes(env, name)
    live = [n for n in nodes if not n["metadata"].get("deletionTimestamp")]
    return pool if done and len(live) == count and all(_ready(n) for n in live) else None


async def _wait_converged(env: OperatorEnv, name: str, count: int, timeout: float = 90) -> Object:
    async def probe() -> Object | None:
        return await _converged(env, name, count)

    found = await env.eventually(probe, f"pool {name} at {count} Ready nodes", timeout=timeout)
    assert found is not None
    return found


async def _events(client: Client, name: str, reason: str) -> list[str]:
    items = (await client.list(EVENTS, "default"))["items"]
    return [
        e.get("note", "")
        for e in items
        if e.get("regarding", {}).get("name") == name and e.get("reason") == reason
    ]


async def _occurrences(client: Client, name: str, reason: str) -> int:
    """How many times ``reason`` was recorded: repeats of one reason aggregate into one
    Event with a ``series`` (client-go's key leaves the note out)."""
    items = (await client.list(EVENTS, "default"))["items"]
    return sum(
        (e.get("series") or {}).get("count", 1)
        for e in items
        if e.get("regarding", {}).get("name") == name and e.get("reason") == reason
    )


def _pod(name: str, node: str, **labels: str) -> dict[str, Any]:
    """A pod pinned to ``node`` that tolerates every taint (a drain's included)."""
    return factories.pod(
        name,
        labels=labels,
        node_selector={"kubernetes.io/hostname": node},
        tolerations=[{"operator": "Exists"}],
        image="busybox",
    )


async def _running(env: OperatorEnv, name: str, ns: str) -> Object | None:
    pod = await env.client.get(PODS, name, ns)
    status = pod.get("status") or {}
    return pod if status.get("phase") == "Running" and status.get("podIP") else None


async def _gone(env: OperatorEnv, res: Resource, name: str, ns: str | None = None) -> bool:
    try:
        await env.client.get(res, name, ns)
    except NotFound:
        return True
    return False


async def test_vms_register_their_nodes_and_the_pool_adopts_them(
    operator_env: OperatorEnv, kube_cluster: ControlPlane
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"reg-{env.run_id}"
    taint = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    await env.create(NODEPOOLS, _pool(name, 2, labels={"team": "a"}, taints=[taint]))
    pool = await _wait_converged(env, name, 2)

    vms = {vm.id: vm for vm in env.cloud.snapshot().live}
    assert len(vms) == 2

    async def adopted() -> list[Object]:
        # Ready is the kubelet's word; the adoption patch follows the Node's registration
        # in the controller's next pass, so wait for its finalizer
        nodes = await _nodes(env, name)
        return (
            nodes
            if all(NODE_FINALIZER in n["metadata"].get("finalizers", ()) for n in nodes)
            else []
        )

    nodes = await env.eventually(adopted, "both Nodes to carry the pool's finalizer")
    for node in nodes:
        meta = node["metadata"]
        # the VM's kubelet wrote it (the operator may not create Nodes: see test_rbac), kwok
        # its status; the operator only its own labels, taints and finalizer
        managers = {(m["manager"], m.get("subresource", "")) for m in meta["managedFields"]}
        assert ("kubelet", "") in managers
        assert ("kwok", "status") in managers
        assert not any(m.startswith("kubeloop") and sub == "status" for m, sub in managers)
        vm = vms[node["spec"]["providerID"].removeprefix("sim:///")]
        assert meta["name"] == vm.name
        assert meta["labels"]["team"] == "a"
        assert meta["labels"][LABEL] == env.run_id
        assert meta["annotations"][KWOK] == "fake"
        assert NODE_FINALIZER in meta["finalizers"]
        assert taint in node["spec"]["taints"]
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    by_name = {r["name"]: r for r in pool["status"]["instances"]}
    assert {r["nodeName"] for r in by_name.values()} == {n["metadata"]["name"] for n in nodes}

    # a pod that tolerates the pool's taint runs on a pool node, with an IP
    ns = kube_cluster.create_namespace("reg")
    await env.client.create(PODS, _pod("web", nodes[0]["metadata"]["name"]), ns)
    pod = await env.eventually(lambda: _running(env, "web", ns), "the pod to run")
    assert pod is not None
    assert pod["status"]["podIP"]
    await env.client.delete(PODS, "web", ns)


async def test_label_and_taint_edits_reach_existing_nodes(operator_env: OperatorEnv) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"edit-{env.run_id}"
    old_taint = {"key": "old", "effect": "NoSchedule"}
    await env.create(
        NODEPOOLS, _pool(name, 2, labels={"team": "a", "tier": "web"}, taints=[old_taint])
    )
    await _wait_converged(env, name, 2)
    launched = len(env.cloud.snapshot().instances)
    # someone else's label and taint on one node must survive the pool's edits
    first = (await _nodes(env, name))[0]["metadata"]["name"]
    await env.client.patch(NODES, first, {"metadata": {"labels": {"example.com/owner": "ops"}}})
    foreign = {"key": "example.com/maintenance", "effect": "PreferNoSchedule"}
    node = await env.client.get(NODES, first)
    await env.client.patch(NODES, first, {"spec": {"taints": [*node["spec"]["taints"], foreign]}})

    new_taint = {"key": "new", "value": "x", "effect": "NoExecute"}
    await env.client.patch(
        NODEPOOLS,
        name,
        # a merge patch: tier=None removes that label from the spec
        {"spec": {"labels": {"team": "b", "zone": "z1", "tier": None}, "taints": [new_taint]}},
    )

    async def edited() -> bool:
        for node in await _nodes(env, name):
            labels = node["metadata"]["labels"]
            keys = {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}
            if labels.get("team") != "b" or labels.get("zone") != "z1" or "tier" in labels:
                return False
            if ("new", "NoExecute") not in keys or ("old", "NoSchedule") in keys:
                return False
        return True

    await env.eventually(edited, "the edits to reach both nodes")
    node = await env.client.get(NODES, first)
    assert node["metadata"]["labels"]["example.com/owner"] == "ops"
    assert foreign in node["spec"]["taints"]
    assert len(env.cloud.snapshot().instances) == launched, "edited in place, not replaced"


async def test_kubectl_delete_node_drains_it_honouring_a_pdb_then_terminates_its_vm(
    operator_env: OperatorEnv, kube_cluster: ControlPlane
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"kdel-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))
    await _wait_converged(env, name, 2)
    victim = (await _nodes(env, name))[0]
    node_name = victim["metadata"]["name"]
    vm_id = victim["spec"]["providerID"].removeprefix("sim:///")
    ns = kube_cluster.create_namespace("drain")
    await env.client.create(PODS, _pod("guarded", node_name, app="guarded"), ns)
    await env.eventually(lambda: _running(env, "guarded", ns), "the pod to run")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    await env.client.create(PDBS, pdb, ns)

    async def pdb_observed() -> bool:
        got = await env.client.get(PDBS, "guard", ns)
        return (got.get("status") or {}).get("observedGeneration") == 1

    await env.eventually(pdb_observed, "the PDB's status")

    kubectl = kube_cluster.assets.kubectl if kube_cluster.assets else None
    assert kubectl is not None, "the test bed builds kubectl"
    result = await asyncio.to_thread(
        subprocess.run,
        [
            str(kubectl),
            f"--kubeconfig={kube_cluster.kubeconfig}",
            "delete",
            "node",
            node_name,
            "--wait=false",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr

    async def cordoned() -> bool:
        # The drain's first step: the kubeloop.dev/disrupting:NoSchedule taint (Karpenter's
        # karpenter.sh/disrupted), so nothing new lands on the node.
        node = await env.client.get(NODES, node_name)
        taints = node["spec"].get("taints") or ()
        return any(t["key"] == "kubeloop.dev/disrupting" for t in taints)

    await env.eventually(cordoned, "the deleted node to be tainted for its drain")
    # The PDB allows no disruption: the pod stays, so do its node and its VM.
    await env.eventually(
        lambda: _replacement_running(env, name, node_name), "a replacement node to be Ready"
    )
    assert await _running(env, "guarded", ns) is not None
    assert (await env.cloud.describe(vm_id)).state == "running"
    assert (await env.client.get(NODES, node_name))["metadata"].get("deletionTimestamp")

    await env.client.delete(PDBS, "guard", ns)  # relaxed: the eviction goes through
    await env.eventually(lambda: _gone(env, PODS, "guarded", ns), "the pod to be evicted")
    await env.eventually(lambda: _gone(env, NODES, node_name), "the node to go")
    assert (await env.cloud.describe(vm_id)).state == "terminated"
    await _wait_converged(env, name, 2)


async def _replacement_running(env: OperatorEnv, pool: str, old: str) -> bool:
    others = [n for n in await _nodes(env, pool) if n["metadata"]["name"] != old]
    return len(others) == 2 and all(_ready(n) for n in others)


async def test_a_vm_terminated_behind_the_operators_back_loses_its_node_and_is_replaced(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"killed-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))
    await _wait_converged(env, name, 2)
    victim = (await _nodes(env, name))[0]
    vm_id = victim["spec"]["providerID"].removeprefix("sim:///")

    env.cloud.terminate_behind_the_back(vm_id)

    await env.eventually(
        lambda: _gone(env, NODES, victim["metadata"]["name"]), "the dead VM's node to go"
    )
    await _wait_converged(env, name, 2)
    snapshot = env.cloud.snapshot()
    assert len(snapshot.live) == 2
    assert vm_id not in {vm.id for vm in snapshot.live}
    assert len(snapshot.instances) == 3, "exactly one replacement"
    assert await _events(env.client, name, "VMGone")


async def test_a_node_that_stops_heartbeating_is_replaced_after_the_repair_timeout(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL, node_repair_seconds=3.0)
    name = f"repair-{env.run_id}"
    # one of two nodes is 50 % of the pool: allowed here (the default threshold is 20 %)
    disruption = {"repair": {"maxUnhealthyPercent": 50}}
    await env.create(NODEPOOLS, _pool(name, 2, disruption=disruption))
    await _wait_converged(env, name, 2)
    victim = (await _nodes(env, name))[0]
    node_name = victim["metadata"]["name"]
    vm_id = victim["spec"]["providerID"].removeprefix("sim:///")

    # its kubelet dies (the VM keeps running): no more heartbeats; the node lifecycle
    # controller marks it Unknown after its grace period
    assert env.kubelets is not None
    await env.kubelets.kill(node_name)

    await env.eventually(lambda: _gone(env, NODES, node_name), "the silent node to go", timeout=120)
    assert (await env.cloud.describe(vm_id)).state == "terminated"
    await _wait_converged(env, name, 2)
    notes = await _events(env.client, name, "NodeRepair")
    assert any(node_name in note for note in notes)
    assert len(env.cloud.snapshot().instances) == 3


async def test_a_vm_whose_node_never_registers_is_replaced(operator_env: OperatorEnv) -> None:
    env = operator_env
    # no VM side at first: the VM boots, but no kubelet registers its Node
    await env.start(controllers=ONLY_NODEPOOL, kubelets=False, registration_timeout_seconds=2.0)
    name = f"noreg-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 1))

    async def replaced() -> list[str]:
        return await _events(env.client, name, "RegistrationTimeout")

    notes = await env.eventually(replaced, "the unregistered VM to be replaced")
    first = env.cloud.snapshot().instances[0]
    assert first.id in notes[0]

    async def terminated() -> bool:  # the Event says it is being replaced; the call may follow
        return (await env.cloud.describe(first.id)).state == "terminated"

    await env.eventually(terminated, "the unregistered VM to be terminated")

    await env.start_kubelets()
    await _wait_converged(env, name, 1)
    assert len(env.cloud.snapshot().live) == 1


async def test_vms_tagged_for_the_pool_are_adopted_before_any_is_launched(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"adopt-{env.run_id}"
    obj = await env.create(NODEPOOLS, _pool(name, 0))
    await _wait_converged(env, name, 0)
    pool = parse_nodepool(obj)
    m5 = next(t for t in CATALOGUE if t.name == "m5.large")
    strays = []
    for suffix in ("s1", "s2", "s3"):
        vm_name = f"{name}-{suffix}"
        boot = node_bootstrap(pool, vm_name, "m5.large", m5, run_labels=env.labels)
        tags = {POOL: name, POOL_UID: obj["metadata"]["uid"]}
        strays.append(env.cloud.leak(vm_name, tags, user_data=boot.encode()))

    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 2}})
    await _wait_converged(env, name, 2)
    snapshot = env.cloud.snapshot()
    assert env.cloud.calls()["create"] == 0, "adopted, nothing launched"
    assert len(snapshot.instances) == 3

    async def surplus_collected() -> bool:
        return len(env.cloud.snapshot().live) == 2

    await env.eventually(surplus_collected, "the third stray to be collected after its grace")
    assert {vm.id for vm in env.cloud.snapshot().live} < {vm.id for vm in strays}
    assert await _occurrences(env.client, name, "Adopted") == 2
    await _wait_converged(env, name, 2)


async def test_deleting_a_pool_never_launches_a_vm_for_an_intent(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    env.cloud.set_quota(0)  # the intent's create is refused and held back
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"nolaunch-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 1))

    async def refused() -> bool:
        pool = await env.client.get(NODEPOOLS, name)
        instances = (pool.get("status") or {}).get("instances") or []
        return env.cloud.calls()["create"] >= 1 and len(instances) == 1

    await env.eventually(refused, "an intent recorded and its create refused")
    env.cloud.set_quota(None)  # a create now would launch a VM
    await env.client.delete(NODEPOOLS, name)
    await env.eventually(lambda: _gone(env, NODEPOOLS, name), "the pool to be deleted")
    assert env.cloud.snapshot().instances == (), "no VM was ever launched"


async def test_a_terminated_vm_behind_an_intent_does_not_block_deletion(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    # every create launches (or finds) the VM and then loses the answer: no id is recorded
    env.cloud.inject("create", TransientCloudError, times=1000, applied=True)
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"deadintent-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 1))

    async def launched() -> list[Any]:
        return list(env.cloud.snapshot().live)

    (vm,) = await env.eventually(launched, "the intent's VM to be launched")
    env.cloud.terminate_behind_the_back(vm.id)
    await env.client.delete(NODEPOOLS, name)
    await env.eventually(lambda: _gone(env, NODEPOOLS, name), "the pool to be deleted")
    assert [i.state for i in env.cloud.snapshot().instances] == ["terminated"]
    env.cloud.clear_faults()


async def test_capacity_retry_after_governs_the_next_create(operator_env: OperatorEnv) -> None:
    env = operator_env
    env.cloud.set_capacity("m5.large", 0)  # CapacityUnavailable, retry_after 30 s
    mgr = await env.start(controllers=ONLY_NODEPOOL)
    name = f"retry-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 1))

    async def degraded() -> bool:
        pool = await env.client.get(NODEPOOLS, name)
        conds = (pool.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Degraded" and c["reason"] == "CapacityUnavailable" for c in conds)

    await env.eventually(degraded, "Degraded=CapacityUnavailable")
    creates = env.cloud.calls()["create"]
    (controller,) = [c for c in mgr.controllers if c.name == "nodepool"]
    before = controller.reconciles

    # passes keep coming (the periodic look for leaked VMs); none asks the cloud again
    async def passed() -> bool:
        return controller.reconciles >= before + 2

    await env.eventually(passed, "more passes over the pool")
    assert env.cloud.calls()["create"] == creates, "held until the cloud's retry-after"


async def test_a_second_autoscaler_for_the_same_pool_is_refused_with_a_condition(
    operator_env: OperatorEnv, kube_cluster: ControlPlane
) -> None:
    from nodepool_operator.api import AUTOSCALERS

    env = operator_env
    await env.start(controllers=("autoscaler",))
    name = f"twoscalers-{env.run_id}"
    ns = kube_cluster.create_namespace("scalers")
    await env.create(NODEPOOLS, _pool(name, 0))

    def scaler(scaler_name: str) -> dict[str, Any]:
        return {
            "apiVersion": "kubeloop.dev/v1alpha1",
            "kind": "Autoscaler",
            "metadata": {"name": scaler_name},
            "spec": {"nodePoolRef": {"name": name}, "namespaces": [ns]},
        }

    def ready(obj: Object) -> dict[str, Any]:
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Ready"), {})

    await env.create(AUTOSCALERS, scaler(f"{name}-a"))
    await env.eventually(
        lambda: _has_ready(env, AUTOSCALERS, f"{name}-a"), "the first Autoscaler to be Ready"
    )
    await asyncio.sleep(1.1)  # creationTimestamp has one-second resolution: be the younger
    await env.create(AUTOSCALERS, scaler(f"{name}-b"))

    async def refused() -> dict[str, Any] | None:
        cond = ready(await env.client.get(AUTOSCALERS, f"{name}-b"))
        return cond if cond.get("reason") == "ConflictingAutoscaler" else None

    cond = await env.eventually(refused, "the second Autoscaler to be refused")
    assert cond is not None
    assert cond["status"] == "False"
    assert f"{name}-a" in cond["message"]
    assert ready(await env.client.get(AUTOSCALERS, f"{name}-a"))["status"] == "True"


async def _has_ready(env: OperatorEnv, res: Resource, name: str) -> bool:
    conds = ((await env.client.get(res, name)).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


async def test_a_status_conflict_keeps_the_records_another_writer_added(
    operator_env: OperatorEnv,
) -> None:
    """The pool's status write is made from a stale copy while another writer has added a
    record: the apiserver answers 409, the write is re-applied to the latest status, and
    that record survives next to this pass's own (merge by name)."""
    from kubeloop import update_status
    from nodepool_operator.api import InstanceRecord
    from nodepool_operator.controllers.nodepool._pool_status import pool_status

    env = operator_env  # no operator running: this test is the two writers
    name = f"merge-{env.run_id}"
    stale = await env.create(NODEPOOLS, _pool(name, 2))
    theirs = {"name": f"{name}-theirs", "instanceId": "i-theirs", "state": "running"}
    await env.client.update_status(NODEPOOLS, {**stale, "status": {"instances": [theirs]}})
    mine = InstanceRecord(name=f"{name}-mine", state="creating")
    status = pool_status(
        name=name,
        generation=1,
        target=2,
        desired=2,
        min_nodes=0,
        records=[mine],
        ready=set(),
        failure=None,
    )
    written = await update_status(env.client, NODEPOOLS, stale, status.apply)
    names = [r["name"] for r in written["status"]["instances"]]
    assert names == [mine.name, theirs["name"]]
    assert written["metadata"]["resourceVersion"] != stale["metadata"]["resourceVersion"]
    server = await env.client.get(NODEPOOLS, name)
    assert [r["name"] for r in server["status"]["instances"]] == names


async def test_a_vm_stopped_behind_the_back_is_started_and_its_kubelet_comes_back(
    operator_env: OperatorEnv,
) -> None:
    from kubeloop import LEASES

    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"stopped-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 1))
    await _wait_converged(env, name, 1)
    (node,) = await _nodes(env, name)
    node_name = node["metadata"]["name"]
    vm_id = node["spec"]["providerID"].removeprefix("sim:///")

    await asyncio.to_thread(env.cloud.stop_behind_the_back, vm_id)

    async def heartbeating_again() -> bool:
        try:
            lease = await env.client.get(LEASES, node_name, "kube-node-lease")
        except NotFound:
            return False  # the silenced Lease is gone; kwok has not made its own yet
        holder = (lease.get("spec") or {}).get("holderIdentity")
        running = (await env.cloud.describe(vm_id)).state == "running"
        return running and holder not in (None, "kubeloop-silenced")

    await env.eventually(heartbeating_again, "the VM to run and kwok to hold its Lease again")
    await _wait_converged(env, name, 1)
    assert [n["metadata"]["name"] for n in await _nodes(env, name)] == [node_name]
    assert env.cloud.calls()["start"] >= 1
    assert len(env.cloud.snapshot().instances) == 1, "started again, not replaced"
