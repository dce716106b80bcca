"""The NodePool controller against the real apiserver and scheduler, with a simulated cloud.

Each test starts only the NodePool controller and asserts what it produced: VMs in the
cloud, Nodes in the cluster, the pool's status, counts of writes, conflicts and cloud
calls. Waits poll with generous deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubeloop import NODES, PODS, NotFound, Object, RuntimeMetrics
from nodepool_operator.api import AWSNODECLASSES, NODEPOOLS
from nodepool_operator.cloud import (
    CreateRequest,
    Instance,
    SimulatedCloud,
    TransientCloudError,
    instance_id_of,
)
from tests import factories
from tests._nodeadm import nodeadm_check
from tests.e2e.conftest import LABEL, OperatorEnv
from tests.e2e.test_autoscaler_zones import ZONES, raise_for_zones

pytestmark = pytest.mark.integration

POOL = "kubeloop.dev/nodepool"
POOL_UID = "kubeloop.dev/nodepool-uid"
ONLY_NODEPOOL = ("nodepool",)


def _pool(name: str, target: int, **spec: Any) -> dict[str, Any]:
    return factories.nodepool(name, target=target, **spec)


async def _get(env: OperatorEnv, name: str) -> Object:
    return await env.client.get(NODEPOOLS, name)


def _condition(pool: Object, type_: str) -> dict[str, Any]:
    for cond in pool.get("status", {}).get("conditions", []):
        if cond["type"] == type_:
            return dict(cond)
    return {}


async def _converged(env: OperatorEnv, name: str, nodes: int) -> Object | None:
    """The pool once its status says ``nodes`` Ready nodes for its latest spec, else None."""
    pool = await _get(env, name)
    status = pool.get("status", {})
    done = (
        status.get("observedGeneration") == pool["metadata"]["generation"]
        and status.get("scaleOperation") == "inactive"
        and status.get("currentNodes") == nodes
        and status.get("readyNodes") == nodes
    )
    return pool if done else None


async def _until(
    env: OperatorEnv, probe: Callable[[], Awaitable[Object | None]], what: str
) -> Object:
    found = await env.eventually(probe, what)
    assert found is not None
    return found


async def _until_long(
    env: OperatorEnv, probe: Callable[[], Awaitable[Object | None]], what: str
) -> Object:
    found = await env.eventually(probe, what, timeout=120)
    assert found is not None
    return found


async def _wait_converged(env: OperatorEnv, name: str, nodes: int) -> Object:
    async def probe() -> Object | None:
        return await _converged(env, name, nodes)

    return await _until(env, probe, f"pool {name} to converge at {nodes} nodes")


async def _nodes(env: OperatorEnv, name: str) -> list[Object]:
    nodes = await env.client.list(NODES, label_selector=f"{POOL}={name}")
    return list(nodes["items"])


async def _vms(env: OperatorEnv, name: str) -> list[Instance]:
    return await env.cloud.list({POOL: name})


def _metrics(env: OperatorEnv) -> RuntimeMetrics:
    return RuntimeMetrics(env.registry)  # the manager's families (get-or-create)


def _status_writes(env: OperatorEnv) -> float:
    writes = _metrics(env).api_writes_total
    return writes.labels("nodepool", "update", NODEPOOLS.key, "status").value


def _conflicts(env: OperatorEnv) -> float:
    conflicts = _metrics(env).conflicts_total
    return sum(
        conflicts.labels("nodepool", NODEPOOLS.key, outcome).value
        for outcome in ("retried", "gave_up")
    )


async def test_scales_up_registers_nodes_then_removes_empty_nodes_first(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    mgr = await env.start(controllers=ONLY_NODEPOOL)
    name = f"up-{env.run_id}"
    spec = {"labels": {"team": "payments"}, "maxNodes": 5}
    await env.create(NODEPOOLS, _pool(name, 0, **spec))
    await _wait_converged(env, name, 0)

    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 3}})
    pool = await _wait_converged(env, name, 3)

    status = pool["status"]
    assert status["selector"] == f"{POOL}={name}"
    assert _condition(pool, "Ready")["status"] == "True"
    assert _condition(pool, "Ready")["reason"] == "Converged"
    assert _condition(pool, "Scaling")["status"] == "False"
    assert _condition(pool, "Degraded")["status"] == "False"
    assert "kubeloop.dev/nodepool-cleanup" in pool["metadata"]["finalizers"]
    vms = await _vms(env, name)
    assert len(vms) == 3
    assert all(vm.state == "running" for vm in vms)
    assert {r["instanceId"] for r in status["instances"]} == {vm.id for vm in vms}
    assert all(r["state"] == "running" for r in status["instances"])

    nodes = await _nodes(env, name)
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(vm.name for vm in vms)
    by_id = {vm.id: vm for vm in vms}
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels[POOL] == name
        assert labels["node.kubernetes.io/instance-type"] == "m5.large"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["team"] == "payments"
        assert labels[LABEL] == env.run_id
        instance_id = node["spec"]["providerID"].removeprefix("sim:///")
        assert by_id[instance_id].name == node["metadata"]["name"]
        # no taint of the pool's (the node lifecycle's not-ready one may linger a moment)
        taints = [
            t
            for t in node["spec"].get("taints") or []
            if not t["key"].startswith("node.kubernetes.io/")
        ]
        assert taints == []
        assert not node["spec"].get("unschedulable")
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake", "kwok runs it"
        allocatable = node["status"]["allocatable"]
        assert allocatable["pods"] == "110"
        assert allocatable["cpu"] == "2"
        assert allocatable["memory"] == "8Gi"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"  # reported by kwok, the node's kubelet

    # a pod bound to one node makes that node the one to keep
    keep = nodes[1]["metadata"]["name"]
    pod_name = f"busy-{env.run_id}"
    pod = factories.pod(pod_name, node=keep, image="busybox")
    await env.create(PODS, pod, "default")
    try:

        async def pod_cached() -> bool:
            return any(
                p["metadata"]["name"] == pod_name for p in await mgr.cache.list(PODS, "default")
            )

        await env.eventually(pod_cached, "the operator's cache to see the pod")
        await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})
        await _wait_converged(env, name, 1)

        assert [n["metadata"]["name"] for n in await _nodes(env, name)] == [keep]
        assert [vm.name for vm in await _vms(env, name)] == [keep]
        assert env.cloud.duplicates() == 0
        snapshot = env.cloud.snapshot()
        assert len(snapshot.instances) == 3, "scale-down created nothing"
    finally:
        with contextlib.suppress(NotFound):
            await env.client.delete(PODS, pod_name, "default")  # kwok finishes it


async def test_status_is_written_only_when_it_changes(operator_env: OperatorEnv) -> None:
    env = operator_env
    mgr = await env.start(controllers=ONLY_NODEPOOL)
    name = f"quiet-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))
    await _wait_converged(env, name, 2)
    (controller,) = [c for c in mgr.controllers if c.name == "nodepool"]

    writes = _status_writes(env)
    assert writes >= 1
    # Wake the pool several times through its Nodes: every pass finds nothing to change.
    for node in await _nodes(env, name):
        before = controller.reconciles
        patch = {"metadata": {"annotations": {"example.com/touched": "yes"}}}
        await env.client.patch(NODES, node["metadata"]["name"], patch)

        async def reconciled(before: int = before) -> bool:
            return controller.reconciles > before

        await env.eventually(reconciled, "a pass over the quiet pool")
    assert _status_writes(env) == writes, "an unchanged status was written"
    assert await _converged(env, name, 2) is not None


async def test_user_raises_target_while_vms_boot(operator_env: OperatorEnv) -> None:
    env = operator_env
    # slow boots, so the edit surely lands while the first VMs are pending
    env.cloud = SimulatedCloud(env.settings.cloud_state, boot_seconds=3.0)
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"edit-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))

    async def booting() -> bool:
        status = (await _get(env, name)).get("status", {})
        instances = status.get("instances", [])
        return (
            status.get("scaleOperation") == "active"
            and len(instances) == 2
            and all(r.get("instanceId") and r["state"] == "pending" for r in instances)
        )

    await env.eventually(booting, "two VMs to be booting")
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 4}})
    pool = await _wait_converged(env, name, 4)

    assert pool["metadata"]["generation"] == 2
    snapshot = env.cloud.snapshot()
    assert len(snapshot.live) == 4
    assert len(snapshot.instances) == 4, "exactly 4 VMs were ever launched"
    assert snapshot.duplicates == 0
    assert len(await _nodes(env, name)) == 4
    assert _conflicts(env) <= 5, "no 409 storm"


async def test_quota_exceeded_degrades_without_a_call_storm(operator_env: OperatorEnv) -> None:
    env = operator_env
    env.cloud.set_quota(1)
    mgr = await env.start(controllers=ONLY_NODEPOOL)
    name = f"quota-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 3))

    async def degraded() -> Object | None:
        pool = await _get(env, name)
        cond = _condition(pool, "Degraded")
        ok = cond.get("status") == "True" and pool["status"].get("readyNodes") == 1
        return pool if ok else None

    pool = await _until(env, degraded, "Degraded=QuotaExceeded with the one VM registered")
    cond = _condition(pool, "Degraded")
    assert cond["reason"] == "QuotaExceeded"
    assert "quota" in cond["message"]
    assert pool["status"]["scaleOperation"] == "active"
    assert _condition(pool, "Ready")["reason"] == "Provisioning"
    creates = env.cloud.calls()["create"]
    assert creates <= 3, "one create that worked, then few refused ones"

    # Passes keep running (Node events, the periodic look for leaks); creates stay held.
    (controller,) = [c for c in mgr.controllers if c.name == "nodepool"]
    before = controller.reconciles

    async def passed() -> bool:
        return controller.reconciles >= before + 2

    await env.eventually(passed, "more passes over the pool")
    assert env.cloud.calls()["create"] == creates
    assert len(await _vms(env, name)) == 1

    # The quota is raised and the user asks again: the pool converges.
    env.cloud.set_quota(None)
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 4}})
    pool = await _wait_converged(env, name, 4)
    assert _condition(pool, "Degraded")["status"] == "False"
    assert env.cloud.duplicates() == 0
    assert len(await _vms(env, name)) == 4


async def test_a_create_whose_answer_was_lost_is_not_repeated(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    # the cloud launches the VM, then the answer is lost (a timeout): retry with the token
    env.cloud.inject("create", TransientCloudError, times=1, applied=True)
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"lost-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))
    await _wait_converged(env, name, 2)

    snapshot = env.cloud.snapshot()
    assert len(snapshot.instances) == 2, "the lost answer's VM was adopted, not relaunched"
    assert snapshot.duplicates == 0
    assert snapshot.calls["create"] == 3


async def test_capacity_shortage_degrades_then_recovers_on_its_own(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    env.cloud.set_capacity("m5.large", 1)
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"capacity-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))

    async def short() -> Object | None:
        pool = await _get(env, name)
        return pool if _condition(pool, "Degraded").get("status") == "True" else None

    pool = await _until(env, short, "Degraded=CapacityUnavailable")
    assert _condition(pool, "Degraded")["reason"] == "CapacityUnavailable"

    env.cloud.set_capacity("m5.large", None)

    async def converged() -> Object | None:  # after the cloud's retry-after; no user action
        return await _converged(env, name, 2)

    pool = await _until_long(env, converged, f"pool {name} to converge at 2 nodes")
    assert _condition(pool, "Degraded")["status"] == "False"
    assert env.cloud.duplicates() == 0
    assert len(env.cloud.snapshot().instances) == 2


async def test_a_stockout_of_the_first_type_launches_the_next_in_one_go(
    operator_env: OperatorEnv,
) -> None:
    """No m5.large at all (a stockout: the simulated cloud's fault, as moto's RunInstances
    never answers InsufficientInstanceCapacity): the pool's nodes come as r5.large, the
    cheapest of its other types that holds an m5.large's node, without waiting out a retry
    and without a Degraded pool."""
    env = operator_env
    env.cloud.set_capacity("m5.large", 0)
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"fallback-{env.run_id}"
    # c5.large is cheaper but smaller than m5.large: never launched in its place
    await env.create(NODEPOOLS, _pool(name, 2, instanceTypes=["c5.xlarge", "c5.large", "r5.large"]))

    pool = await _wait_converged(env, name, 2)

    assert _condition(pool, "Degraded").get("status") != "True"
    vms = await _vms(env, name)
    assert sorted(vm.instance_type for vm in vms) == ["r5.large", "r5.large"]
    nodes = await _nodes(env, name)
    assert sorted(n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes) == [
        "r5.large",
        "r5.large",
    ]
    # the one refused m5.large create, then each VM once: the refusal held nothing back
    assert env.cloud.calls()["create"] == 3
    assert env.cloud.duplicates() == 0


async def test_a_pool_of_three_zones_with_one_out_of_capacity_scales_in_the_other_two(
    operator_env: OperatorEnv,
) -> None:
    """A cloud of three zones whose sim-1a has no m5.large (a zone's stockout: the simulated
    cloud's fault, as moto's RunInstances never answers InsufficientInstanceCapacity): the
    pool's nodes are balanced over sim-1b and sim-1c, refused once in sim-1a and never held
    back for it; each Node says the zone its VM is in (the cloud's record) and the region."""
    env = operator_env
    zones = ("sim-1a", "sim-1b", "sim-1c")
    SimulatedCloud(env.cloud.path, zones=zones)  # stored in the cloud's file, for every process
    env.cloud.set_capacity("m5.large", 0, zone="sim-1a")
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"zones-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 4))

    pool = await _wait_converged(env, name, 4)

    assert _condition(pool, "Degraded").get("status") != "True"
    assert pool["status"]["zones"] == ["sim-1b", "sim-1c"]
    vms = await _vms(env, name)
    assert sorted(vm.zone for vm in vms) == ["sim-1b", "sim-1b", "sim-1c", "sim-1c"]
    zone_of = {vm.id: vm.zone for vm in vms}
    nodes = await _nodes(env, name)
    assert len(nodes) == 4
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert (
            labels["topology.kubernetes.io/zone"]
            == zone_of[instance_id_of(node["spec"]["providerID"])]
        )
        assert labels["topology.kubernetes.io/region"] == "sim-1"
    # one refused create in sim-1a, then each VM once
    assert env.cloud.calls()["create"] == 5
    assert env.cloud.duplicates() == 0


async def test_the_autoscalers_zone_targets_are_where_the_nodes_land(
    operator_env: OperatorEnv, kube_control_plane: Any
) -> None:
    """Both controllers on a cloud of three zones: the Autoscaler's one raise (a zone spread
    of three replicas, a StatefulSet's pod whose claim is bound to a volume pinned to zone-b:
    4 nodes, zone-b twice) is launched by the NodePool controller in those zones, and the
    scheduler binds every pod (the spread one per zone, the StatefulSet's pod on a zone-b
    node)."""
    env = operator_env
    SimulatedCloud(env.cloud.path, zones=ZONES)
    namespace = kube_control_plane.create_namespace("zones")
    pool, _ = await raise_for_zones(env, namespace)
    # a type the simulated cloud offers, the seeds' node size kept (cpu, memory overrides)
    await env.client.patch(NODEPOOLS, pool, {"spec": {"instanceType": "m5.large"}})
    await env.start(controllers=("autoscaler", "nodepool"))

    async def bound() -> list[Object] | None:
        pods = (await env.client.list(PODS, namespace))["items"]
        placed = [p for p in pods if p["spec"].get("nodeName")]
        return placed if len(pods) == len(placed) == 4 else None

    pods = await env.eventually(bound, "every pod bound", timeout=120)
    assert pods is not None
    assert sorted(vm.zone for vm in await _vms(env, pool)) == [
        "zone-a",
        "zone-b",
        "zone-b",
        "zone-c",
    ]
    zone_of = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in await _nodes(env, pool)
    }
    placed = {p["metadata"]["name"]: zone_of[p["spec"]["nodeName"]] for p in pods}
    db = next(p for p in pods if p["metadata"]["name"] == "db-0")
    assert [o["kind"] for o in db["metadata"]["ownerReferences"]] == ["StatefulSet"]
    assert db["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-db-0"
    assert placed.pop("db-0") == "zone-b"  # the node the StatefulSet's pod runs on
    assert sorted(placed.values()) == ZONES
    assert env.cloud.duplicates() == 0


async def test_unknown_instance_type_is_reported_and_not_retried(
    operator_env: OperatorEnv,
) -> None:
    env = operator_env
    mgr = await env.start(controllers=ONLY_NODEPOOL)
    name = f"badtype-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2, instanceType="z9.huge"))

    async def refused() -> Object | None:
        pool = await _get(env, name)
        return pool if _condition(pool, "Degraded").get("status") == "True" else None

    pool = await _until(env, refused, "Degraded=InvalidInstanceType")
    assert _condition(pool, "Degraded")["reason"] == "InvalidInstanceType"
    assert "z9.huge" in _condition(pool, "Degraded")["message"]
    assert _condition(pool, "Ready")["reason"] == "InvalidSpec"
    assert "spec.instanceType" in _condition(pool, "Ready")["message"]
    creates = env.cloud.calls()["create"]

    # more passes (through a periodic requeue) ask the cloud nothing new
    (controller,) = [c for c in mgr.controllers if c.name == "nodepool"]
    before = controller.reconciles

    async def passed() -> bool:
        return controller.reconciles > before

    await env.eventually(passed, "another pass over the pool")
    assert env.cloud.calls()["create"] == creates == 1

    await env.client.patch(NODEPOOLS, name, {"spec": {"instanceType": "c5.large"}})
    pool = await _wait_converged(env, name, 2)
    assert _condition(pool, "Degraded")["status"] == "False"
    assert {vm.instance_type for vm in await _vms(env, name)} == {"c5.large"}


async def test_leaked_vm_of_the_pool_is_garbage_collected(operator_env: OperatorEnv) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"gc-{env.run_id}"
    pool = await env.create(NODEPOOLS, _pool(name, 1))
    await _wait_converged(env, name, 1)
    uid = pool["metadata"]["uid"]

    leaked = env.cloud.leak(f"{name}-leak", {POOL: name, POOL_UID: uid})
    # tagged with the pool's name but another incarnation's uid: not this pool's to collect
    other = env.cloud.leak(f"{name}-other", {POOL: name, POOL_UID: "another-uid"})

    async def collected() -> bool:
        states = {i.id: i.state for i in env.cloud.snapshot().instances}
        return states[leaked.id] == "terminated"

    await env.eventually(collected, "the leaked VM to be deleted after the grace period")
    states = {i.id: i.state for i in env.cloud.snapshot().instances}
    assert states[other.id] != "terminated"
    assert await _converged(env, name, 1) is not None
    assert len(await _nodes(env, name)) == 1


async def test_deleting_the_pool_deletes_its_nodes_and_vms(operator_env: OperatorEnv) -> None:
    env = operator_env
    await env.start(controllers=ONLY_NODEPOOL)
    name = f"del-{env.run_id}"
    await env.create(NODEPOOLS, _pool(name, 2))
    await _wait_converged(env, name, 2)
    assert len(await _nodes(env, name)) == 2

    await env.client.delete(NODEPOOLS, name)

    async def gone() -> bool:
        try:
            await _get(env, name)
        except NotFound:
            return True
        return False

    await env.eventually(gone, "the pool to be deleted")
    assert await _nodes(env, name) == []
    assert await _vms(env, name) == []
    assert env.cloud.duplicates() == 0


class _GatedCloud(SimulatedCloud):
    """Creates for one pool wait for the test to open the gate: a very slow cloud."""

    def __init__(self, *args: Any, slow_pool: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slow_pool = slow_pool
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def create(self, request: CreateRequest) -> Instance:
        if request.tags.get(POOL) == self.slow_pool:
            self.waiting.set()
            await self.gate.wait()
        return await super().create(request)


async def test_a_slow_pool_does_not_block_another(operator_env: OperatorEnv) -> None:
    env = operator_env
    slow, fast = f"slow-{env.run_id}", f"fast-{env.run_id}"
    cloud = _GatedCloud(env.settings.cloud_state, boot_seconds=1.0, slow_pool=slow)
    env.cloud = cloud
    await env.start(controllers=ONLY_NODEPOOL)

    await env.create(NODEPOOLS, _pool(slow, 2))
    await asyncio.wait_for(cloud.waiting.wait(), timeout=60)
    await env.create(NODEPOOLS, _pool(fast, 2))
    await _wait_converged(env, fast, 2)

    status = (await _get(env, slow)).get("status", {})
    assert status.get("scaleOperation") == "active", "the slow pool is still provisioning"
    assert status.get("currentNodes", 0) == 0
    assert await _vms(env, slow) == []

    cloud.gate.set()
    await _wait_converged(env, slow, 2)
    assert env.cloud.duplicates() == 0


async def test_a_pool_with_an_al2023_class_joins_through_its_nodeconfig_on_the_simulated_cloud(
    operator_env: OperatorEnv,
) -> None:
    """The simulated VMs read the same NodeConfig the moto kubelets do: a pool naming an
    AL2023 class converges, its Node sized by what the NodeConfig reserves, and the real
    nodeadm takes the VM's user data."""
    env = operator_env
    name = f"al2023-{env.run_id}"
    await env.create(
        AWSNODECLASSES,
        {
            "apiVersion": AWSNODECLASSES.api_version,
            "kind": AWSNODECLASSES.kind,
            "metadata": {"name": name},
            "spec": {"amiId": "ami-0123456789abcdef0", "cluster": {"name": "sim"}},
        },
    )
    await env.create(
        NODEPOOLS,
        _pool(name, 1, labels={"team": "a"}, nodeClassRef={"name": name}),
    )
    await env.start(controllers=ONLY_NODEPOOL)
    await _wait_converged(env, name, 1)
    [vm] = await _vms(env, name)
    nodeadm_check(next(i for i in env.cloud.snapshot().instances if i.id == vm.id).user_data)
    [node] = await _nodes(env, name)
    assert node["metadata"]["name"] == vm.name
    assert node["metadata"]["labels"]["team"] == "a"
    # m5.large in the simulated catalogue: 2 vCPUs, 8Gi; 29 pods; 70m and 574Mi reserved
    assert node["status"]["allocatable"]["cpu"] == "1930m"
    assert node["status"]["allocatable"]["memory"] == f"{8192 - 574 - 100}Mi"
    assert node["status"]["allocatable"]["pods"] == "29"
