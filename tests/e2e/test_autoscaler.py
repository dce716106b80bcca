"""The Autoscaler end to end: real apiserver and kube-scheduler, the operator in-process.

Pods select their test's pool by its node label, so they land on no other test's nodes, and the
scheduler's verdict (``PodScheduled=False, reason=Unschedulable``) is what drives everything.
Who wrote what is read from the operator's metrics (``kubeloop_api_writes_total`` by controller)
and the cloud's call counts; the order of events from etcd's resourceVersions, which one etcd
orders across kinds, so no assertion depends on how fast anything ran.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubeloop import (
    EVENTS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PODS,
    Added,
    Client,
    Event,
    Informer,
    Updated,
)
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS, parse_nodepool
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers._capacity import pool_template
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.demo import api_activity
from nodepool_operator.scheduling import classify, lower_bound
from tests import factories
from tests.e2e.conftest import OperatorEnv

pytestmark = pytest.mark.integration

BOTH = ("nodepool", "autoscaler")
#: The pool of the seeds' example: 96 GiB nodes, cpu to spare.
POOL_CPU, POOL_MEMORY = "64", "96Gi"


# -- manifests ---------------------------------------------------------------------------


def pool_manifest(name: str, **spec: Any) -> dict[str, Any]:
    """The seeds' pool; ``spec`` (camelCase fields) overrides its defaults."""
    fields: dict[str, Any] = {"cpu": POOL_CPU, "memory": POOL_MEMORY, **spec}
    return factories.nodepool(name, target=0, instance_type="mem96.large", max_nodes=10, **fields)


def autoscaler_manifest(name: str, pool: str, *namespaces: str, **spec: Any) -> dict[str, Any]:
    return factories.autoscaler(name, pool=pool, namespaces=namespaces, **spec)


def pod_manifest(
    name: str,
    pool: str,
    memory: str = "28Gi",
    *,
    selector: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    app = {**factories.container("app", cpu="100m", memory=memory), **spec.pop("container", {})}
    return factories.pod(
        name,
        node_selector={POOL_LABEL: pool, **(selector or {})},
        containers=[app],
        grace=0,
        **spec,
    )


# -- observing ---------------------------------------------------------------------------


@dataclass
class Timeline:
    """What a test's own watches saw, stamped with etcd's resourceVersion.

    ``unschedulable``: pod name -> the version that first showed it as a scale-up candidate;
    ``targets``: each distinct targetNodes value of the pool with its version, in order;
    ``nodes``: node name -> the version it was created at.
    """

    unschedulable: dict[str, int] = field(default_factory=dict)
    targets: list[tuple[int, int]] = field(default_factory=list)
    nodes: dict[str, int] = field(default_factory=dict)
    informers: list[Informer] = field(default_factory=list)

    @classmethod
    async def watch(cls, client: Client, pool: str, namespace: str) -> Timeline:
        timeline = cls()
        for informer, handler in (
            (Informer(client, PODS, namespace=namespace), timeline._pod),
            (Informer(client, NODEPOOLS, field_selector=f"metadata.name={pool}"), timeline._pool),
            (Informer(client, NODES, label_selector=f"{POOL_LABEL}={pool}"), timeline._node),
        ):
            informer.add_handler(handler)
            informer.start()
            timeline.informers.append(informer)
        await asyncio.gather(*(i.wait_synced() for i in timeline.informers))
        return timeline

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers))

    @property
    def values(self) -> list[int]:
        return [value for _, value in self.targets]

    def _pod(self, event: Event) -> None:
        name = event.obj["metadata"]["name"]
        if classify(event.obj).candidate and name not in self.unschedulable:
            self.unschedulable[name] = _rv(event.obj)

    def _pool(self, event: Event) -> None:
        value = int(event.obj["spec"].get("targetNodes", 0))
        if not self.targets or self.targets[-1][1] != value:
            self.targets.append((_rv(event.obj), value))

    def _node(self, event: Event) -> None:
        if isinstance(event, Added | Updated):
            self.nodes.setdefault(event.obj["metadata"]["name"], _rv(event.obj))


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def metric(env: OperatorEnv, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for line in env.registry.render().splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(name + "{") and all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def scale_writes(env: OperatorEnv) -> float:
    return metric(env, "kubeloop_api_writes_total", controller="autoscaler", subresource="scale")


async def events_about(client: Client, name: str, namespace: str, reason: str) -> list[str]:
    """Notes of the events.k8s.io Events with ``reason`` regarding the object ``name``."""
    items = (await client.list(EVENTS, namespace))["items"]
    return [
        e.get("note", "")
        for e in items
        if e.get("regarding", {}).get("name") == name and e.get("reason") == reason
    ]


async def target_of(env: OperatorEnv, pool: str) -> int:
    return int((await env.client.get(NODEPOOLS, pool))["spec"].get("targetNodes", 0))


async def status_of(env: OperatorEnv, name: str) -> dict[str, Any]:
    return dict((await env.client.get(AUTOSCALERS, name)).get("status") or {})


def ready_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})


async def pods_in(env: OperatorEnv, namespace: str) -> list[dict[str, Any]]:
    return list((await env.client.list(PODS, namespace))["items"])


def unschedulable(pods: list[dict[str, Any]]) -> bool:
    return bool(pods) and all(classify(p).candidate for p in pods)


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("as")


@pytest.fixture
def other_namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("as-other")


def names(env: OperatorEnv) -> tuple[str, str]:
    return f"pool-{env.run_id}", f"as-{env.run_id}"


# -- scale-up ----------------------------------------------------------------------------


async def test_a_burst_is_planned_once_and_gets_the_ffd_node_count(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    # VMs that take a while to boot: the window in which a naive autoscaler scales again
    env.cloud = SimulatedCloud(env.settings.cloud_state, boot_seconds=2.5)
    await env.create(NODEPOOLS, pool_manifest(pool))
    timeline = await Timeline.watch(env.client, pool, namespace)
    try:
        await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
        await env.start(controllers=BOTH)
        burst = [pod_manifest(f"p{i}", pool, "28Gi") for i in range(7)]
        # at once, so the burst lands within one batch window even on a loaded machine
        await asyncio.gather(*(env.create(PODS, pod, namespace) for pod in burst))

        async def all_scheduled() -> bool:
            pods = await pods_in(env, namespace)
            return len(pods) == 7 and all(p["spec"].get("nodeName") for p in pods)

        await env.eventually(all_scheduled, "all 7 pods to be scheduled", timeout=90)
        template = pool_template(parse_nodepool(await env.client.get(NODEPOOLS, pool)))
        assert lower_bound(burst, template) == 3
        nodes = (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
        assert len(nodes) == 3
        assert env.cloud.calls().get("create") == 3

        # Batching packs the pods the scheduler has given up on by the time the window
        # closes; how many that is depends on the machine's speed, so the raises are
        # checked for what holds at any speed. Order, by etcd revision: each raise asks
        # for no more nodes than the pods Unschedulable before it need (no scale-up for
        # booting nodes' pods, none counted twice), the last one reaches the FFD count,
        # and one write per raise.
        raises = timeline.targets[1:]
        assert timeline.values == sorted(set(timeline.values)), timeline.values
        assert timeline.values[-1] == 3
        by_name = {p["metadata"]["name"]: p for p in burst}
        for raised_at, value in raises:
            waiting = [by_name[n] for n, rv in timeline.unschedulable.items() if rv < raised_at]
            assert value <= lower_bound(waiting, template), (raised_at, value, len(waiting))
        assert scale_writes(env) == len(raises)
        assert len(timeline.unschedulable) == 7
        assert min(timeline.nodes.values()) > raises[0][0]

        # The write went through /scale under the Autoscaler's own field manager.
        managed = (await env.client.get(NODEPOOLS, pool))["metadata"]["managedFields"]
        assert any(
            m["manager"] == "kubeloop-autoscaler" and m.get("subresource") == "scale"
            for m in managed
        )
        status = await status_of(env, scaler)
        assert status["lastScaleTime"]
        assert ready_condition(status)["status"] == "True"
        triggered = await events_about(env.client, scaler, "default", "TriggeredScaleUp")
        assert any("scale up 0 -> 3" in note for note in triggered)
        assert await events_about(env.client, pool, "default", "TriggeredScaleUp")
        # One kind of pod: the plan nominates none, so the new nodes' gates fell each on its
        # Node's own event (autoscaler-gates), not at the end of an Autoscaler pass; the
        # apiserver took the guarded lift (every node is open: the pods are bound)
        writes = api_activity(env.registry).writes_by_target
        assert writes.get("autoscaler-gates patch nodes", 0) >= 1, writes
        assert "autoscaler patch pods/status" not in writes, writes
    finally:
        await timeline.stop()


async def test_the_scale_write_alone_without_a_nodepool_controller(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """The write path on its own: targetNodes rises once, and stays, with no nodes coming."""
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
    await env.start(controllers=("autoscaler",))
    for i in range(4):
        await env.create(PODS, pod_manifest(f"p{i}", pool, "28Gi"), namespace)

    async def settled() -> dict[str, Any] | None:
        status = await status_of(env, scaler)
        decision = status.get("lastDecision", "")
        return status if decision.startswith("no scale up (target 2): 4 pods fit") else None

    # A later look sees the two requested nodes as booting and asks for nothing more.
    status = await env.eventually(settled, "a decision that counts the booting nodes")
    assert status is not None
    assert await target_of(env, pool) == 2
    # one write if all four pods were Unschedulable within one batch window, two if the
    # scheduler was slower: each write raises the target, and it went 0 -> 2
    assert 1 <= scale_writes(env) <= 2
    assert status["unschedulablePods"] == status["pendingPods"] == 4


# -- pods that must not trigger -----------------------------------------------------------


async def test_pods_no_node_would_help_trigger_nothing(
    operator_env: OperatorEnv, namespace: str, other_namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
    # a claim nothing will ever bind: its storage class does not exist
    await env.create(
        PERSISTENTVOLUMECLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "storageClassName": f"nothing-provisions-{env.run_id}",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        namespace,
    )
    await env.start(controllers=BOTH)
    noise = {
        "too-big": pod_manifest("too-big", pool, "120Gi"),
        "wrong-selector": pod_manifest("wrong-selector", pool, selector={"disktype": "ssd"}),
        "missing-secret": pod_manifest(
            "missing-secret",
            pool,
            volumes=[{"name": "creds", "secret": {"secretName": "nope"}}],
            container={"volumeMounts": [{"name": "creds", "mountPath": "/creds"}]},
        ),
        "unbound-claim": pod_manifest(
            "unbound-claim",
            pool,
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        ),
    }
    for pod in noise.values():
        await env.create(PODS, pod, namespace)
    # fits the pool, but nobody watches its namespace
    await env.create(PODS, pod_manifest("unwatched", pool), other_namespace)

    async def all_unschedulable() -> bool:
        return unschedulable(await pods_in(env, namespace)) and unschedulable(
            await pods_in(env, other_namespace)
        )

    await env.eventually(all_unschedulable, "the scheduler to give up on every pod")
    expected = {
        "too-big": "TooBig",
        "wrong-selector": "NodeSelectorMismatch",
        "missing-secret": "MissingSecret",
        "unbound-claim": "UnboundPVC",
    }

    async def reported() -> list[str] | None:
        notes = await events_about(env.client, scaler, "default", "NotTriggerScaleUp")
        return (
            notes if all(any(n.startswith(r) for n in notes) for r in expected.values()) else None
        )

    notes = await env.eventually(reported, "NotTriggerScaleUp Events for every reason")
    assert notes is not None
    assert not any("unwatched" in n for n in notes)
    for pod_name, reason in expected.items():
        on_pod = await events_about(env.client, pod_name, namespace, "NotTriggerScaleUp")
        assert any(f": {reason}: " in n for n in on_pod), (pod_name, on_pod)
    status = await status_of(env, scaler)
    decision = status["lastDecision"]
    for phrase in ("too big", "not matching node selector", "MissingSecret", "UnboundPVC"):
        assert phrase in decision
    assert status["unschedulablePods"] == 4
    assert ready_condition(status)["status"] == "True"

    assert await target_of(env, pool) == 0
    assert scale_writes(env) == 0
    assert env.cloud.calls().get("create", 0) == 0


async def test_max_nodes_is_respected_and_explained(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool, maxNodes=5))
    # the Autoscaler's own limit is the tighter one here
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, maxNodes=2))
    await env.start(controllers=BOTH)
    for i in range(8):  # three per node: 3 nodes wanted, 2 allowed
        await env.create(PODS, pod_manifest(f"p{i:02d}", pool, "28Gi"), namespace)

    async def six_scheduled() -> list[dict[str, Any]] | None:
        pods = await pods_in(env, namespace)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        return pods if len(bound) == 6 else None

    await env.eventually(six_scheduled, "6 of 8 pods to be scheduled", timeout=90)

    async def explained() -> list[str] | None:
        notes = await events_about(env.client, scaler, "default", "NotTriggerScaleUp")
        return [n for n in notes if n.startswith("MaxNodesReached: 2 pods")] or None

    await env.eventually(explained, "a MaxNodesReached Event for the 2 waiting pods")
    pods = await pods_in(env, namespace)
    assert sum(1 for p in pods if classify(p).candidate) == 2
    nodes = (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
    assert len(nodes) == 2
    assert await target_of(env, pool) == 2
    assert 1 <= scale_writes(env) <= 2  # each write raises the target (0 -> 2), as above

    async def decided() -> bool:
        # the Event may come from the cycle that scaled, before the scheduler bound the six
        return "pool at max 2 nodes" in (await status_of(env, scaler)).get("lastDecision", "")

    await env.eventually(decided, "lastDecision to name the pool's max")


# -- the pool reference ---------------------------------------------------------------------


async def test_a_missing_pool_is_reported_without_a_retry_storm(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace, frequency="1s"))
    await env.start(controllers=("autoscaler",))

    async def not_found() -> dict[str, Any] | None:
        cond = ready_condition(await status_of(env, scaler))
        return cond if cond.get("reason") == "NodePoolNotFound" else None

    cond = await env.eventually(not_found, "Ready=False, reason NodePoolNotFound")
    assert cond is not None
    assert cond["status"] == "False"
    assert pool in cond["message"]

    def reconciles() -> float:
        return metric(env, "controller_runtime_reconcile_total", controller="autoscaler")

    before = reconciles()
    await asyncio.sleep(3)  # a window in which a retry loop would run many times
    assert reconciles() - before <= 1
    assert metric(env, "controller_runtime_reconcile_errors_total", controller="autoscaler") == 0

    # The pool's watch, not a retry, brings the Autoscaler back.
    await env.create(NODEPOOLS, pool_manifest(pool))

    async def ready() -> bool:
        return ready_condition(await status_of(env, scaler)).get("status") == "True"

    await env.eventually(ready, "Ready=True once the pool exists")


# -- sharing targetNodes ----------------------------------------------------------------------


async def test_a_target_someone_else_raised_is_never_lowered(
    operator_env: OperatorEnv, namespace: str, kube_control_plane: ControlPlane
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool))
    await env.create(AUTOSCALERS, autoscaler_manifest(scaler, pool, namespace))
    await env.start(controllers=BOTH)
    # a person scales the pool by hand through their own client, as `kubectl scale` does:
    # a merge patch of the scale subresource, no resourceVersion precondition
    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig, field_manager="kubectl"
    ) as person:
        await person.patch_scale(NODEPOOLS, pool, {"spec": {"replicas": 3}})
    await env.create(PODS, pod_manifest("p0", pool, "28Gi"), namespace)

    async def scheduled() -> bool:
        pods = await pods_in(env, namespace)
        return bool(pods) and all(p["spec"].get("nodeName") for p in pods)

    await env.eventually(scheduled, "the pod to be scheduled", timeout=90)

    async def decided() -> str | None:
        decision = (await status_of(env, scaler)).get("lastDecision", "")
        return decision if decision.startswith("no scale up (target 3)") else None

    await env.eventually(decided, "a decision against the raised target")
    assert await target_of(env, pool) == 3
    assert scale_writes(env) == 0


async def test_scale_down_lowers_to_min_nodes_after_the_unneeded_time(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    pool, scaler = names(env)
    await env.create(NODEPOOLS, pool_manifest(pool, minNodes=1))
    await env.create(
        AUTOSCALERS,
        autoscaler_manifest(
            scaler,
            pool,
            namespace,
            frequency="1s",
            scaleDownEnabled=True,
            scaleDownUnneededTime="2s",
        ),
    )
    await env.start(controllers=BOTH)
    for i in range(4):  # 2 nodes
        await env.create(PODS, pod_manifest(f"p{i}", pool, "28Gi"), namespace)

    async def scheduled() -> bool:
        pods = await pods_in(env, namespace)
        return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

    await env.eventually(scheduled, "4 pods on 2 nodes", timeout=90)
    assert await target_of(env, pool) == 2
    for pod in await pods_in(env, namespace):
        await env.client.delete(PODS, pod["metadata"]["name"], namespace)

    async def lowered() -> int | None:
        target = await target_of(env, pool)
        return target if target < 2 else None

    assert await env.eventually(lowered, "targetNodes to be lowered", timeout=60) == 1

    async def one_node() -> bool:
        nodes = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={pool}")
        return len(nodes["items"]) == 1

    await env.eventually(one_node, "the pool to shrink to minNodes", timeout=60)
    assert await events_about(env.client, scaler, "default", "ScaleDown")
    decision = (await status_of(env, scaler))["lastDecision"]
    assert decision.startswith(("scale down 2 -> 1", "no scale up (target 1)"))
    # never below minNodes, however long the last node stays empty
    assert await target_of(env, pool) == 1
