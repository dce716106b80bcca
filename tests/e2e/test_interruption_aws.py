"""A spot interruption against moto's server (EC2 and SQS) and the real control plane: the
test puts EC2's two-minute warning on the interruption queue, as EventBridge would, and the
operator (reading the queue, never called by the test) replaces the spot node replacement
first, evicts its pods through the Eviction API within their PodDisruptionBudget, and only
then terminates the instance.

Oracle: the apiserver's watch of the pool's Nodes and the Deployment's pods, ordered by
resourceVersion; what the cluster looked like when the operator's TerminateInstances left
(a hook on its EC2 client); moto's own record of the instances and of the queue; the
operator's requests (evictions, no pod deleted); the Events and the messages metric.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiobotocore.session import AioSession

from kubeloop import NODES, PODS, Cache, Informer, Object, Registry
from kubeloop.envtest import ControlPlane, RestClient
from nodepool_operator.cloud import AwsCloud, SqsQueue, instance_id_of
from nodepool_operator.controllers._interrupted import Interrupted, interrupted
from nodepool_operator.controllers._node_manifest import CAPACITY_TYPE_LABEL
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers.interruption import InterruptionSource
from nodepool_operator.testbed import MotoKubelets, MotoServer
from tests import factories
from tests.e2e import test_expiry as expiry
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    DEPLOYMENTS_RES,
    PDBS,
    Requests,
    available,
    events,
    is_evicted,
    ready_nodes,
)
from tests.e2e.moto_pool import INSTANCE_TYPE, create_moto_pool, ec2_states
from tests.unit.nodepool_operator.controllers.interruption.fixtures import (
    EPOCH,
    health,
    rebalance,
    spot_warning,
    state_change,
)
from tests.unit.nodepool_operator.controllers.interruption.test_messages import RETIREMENT

pytestmark = pytest.mark.integration


class Timeline(expiry.Timeline):
    """The expiry test's record (each Node's first Ready and taint for removal, each pod's
    node, deletion and final state, by resourceVersion), plus the pods running where, and
    when the operator's TerminateInstances left: a copy of it and the namespace's pods as
    the apiserver had them (read there and then: this watch may lag the operator's own by
    a few milliseconds, and an eviction seen by the operator may not have reached it yet)."""

    def __init__(self, rest: RestClient, namespace: str) -> None:
        super().__init__()
        self.pod_running: dict[str, str] = {}
        self.at_terminate: list[tuple[list[str], dict[str, Any]]] = []
        self._rest = rest
        self._pods_path = f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb"

    def on_pod(self, event: Any) -> None:
        super().on_pod(event)
        node = (event.obj.get("spec") or {}).get("nodeName")
        if node and (event.obj.get("status") or {}).get("phase") == "Running":
            self.pod_running[event.obj["metadata"]["name"]] = node

    def on_terminate(self, params: dict[str, Any], **_: Any) -> None:
        # a blocking read, on purpose: the operator's call waits for it (a test hook)
        listed = self._rest.get(self._pods_path)["items"]
        state = {
            "ready": dict(self.ready),
            "pods": {p["metadata"]["name"] for p in listed},
            "pod_running": {
                p["metadata"]["name"]: p["spec"].get("nodeName")
                for p in listed
                if p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            },
        }
        self.at_terminate.append((list(params.get("InstanceIds", [])), state))


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("interruption")


@pytest.fixture
async def aws(operator_env: OperatorEnv, moto: MotoServer) -> AsyncIterator[AwsCloud]:
    async with AwsCloud(endpoint_url=moto.endpoint_url, instance_types=[INSTANCE_TYPE]) as cloud:
        operator_env.provider = cloud
        operator_env.make_kubelets = lambda client: MotoKubelets(moto.endpoint_url, client)
        yield cloud
        await operator_env.cleanup()  # while AwsCloud is open: the finalizer needs it


async def test_a_spot_warning_on_the_queue_replaces_then_drains_then_terminates(
    operator_env: OperatorEnv,
    aws: AwsCloud,
    moto: MotoServer,
    namespace: str,
    kube_control_plane: ControlPlane,
) -> None:
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"spot-{env.run_id}"
    queue = f"interruptions-{env.run_id}"
    session = AioSession()
    async with session.create_client("sqs", endpoint_url=moto.endpoint_url) as sqs:
        url = (await sqs.create_queue(QueueName=queue))["QueueUrl"]
    await create_moto_pool(env, moto.endpoint_url, name, targetNodes=1, capacityType="spot")
    await env.start(
        controllers=("nodepool",),
        interruption_queue=queue,
        aws_endpoint_url=moto.endpoint_url,
    )

    async def one() -> list[Object]:
        return await ready_nodes(env, name, 1, untainted=True)

    (old,) = await env.eventually(one, "the pool's spot node Ready", timeout=90)
    old_name = old["metadata"]["name"]
    old_instance = instance_id_of(old["spec"]["providerID"])
    assert old["metadata"]["labels"][CAPACITY_TYPE_LABEL] == "spot"
    dep = factories.deployment("web", 2, node_selector={POOL_LABEL: name})
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, factories.pdb("web", max_unavailable=1), namespace)

    async def up() -> bool:
        return await available(env, namespace, 2)

    await env.eventually(up, "the Deployment's two pods available", timeout=90)
    seen = Timeline(kube_control_plane.rest(), namespace)
    assert aws._client is not None
    aws._client.meta.events.register(
        "before-parameter-build.ec2.TerminateInstances", seen.on_terminate
    )
    nodes = Informer(env.client, NODES, label_selector=f"{POOL_LABEL}={name}")
    pods = Informer(env.client, PODS, namespace=namespace, label_selector="app=web")
    nodes.add_handler(seen.on_node)
    pods.add_handler(seen.on_pod)
    for informer in (nodes, pods):
        informer.start()
        await informer.wait_synced()
    try:
        originals = sorted(p for p, n in seen.pod_node.items() if n == old_name)
        assert len(originals) == 2
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        async with session.create_client("sqs", endpoint_url=moto.endpoint_url) as sqs:
            await sqs.send_message(QueueUrl=url, MessageBody=spot_warning(old_instance, time=now))

        async def replaced() -> bool:
            listed = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}")
            gone = old_name not in {n["metadata"]["name"] for n in listed["items"]}
            return gone and all(p in seen.pod_final for p in originals) and bool(seen.at_terminate)

        await env.eventually(replaced, "the interrupted node replaced and gone", timeout=120)
    finally:
        for informer in (nodes, pods):
            await informer.stop()

    # moto's record: the interrupted instance terminated, its replacement running
    assert await ec2_states(moto.endpoint_url, name) == ["running", "terminated"]
    ((terminated, then),) = [t for t in seen.at_terminate if old_instance in t[0]]
    assert terminated == [old_instance]
    (replacement,) = [n for n in seen.ready if n != old_name]
    # replacement first: Ready, then the old node tainted, then its pods evicted
    first_eviction = min(seen.pod_deleted[p] for p in originals)
    assert seen.ready[replacement] < seen.tainted[old_name] < first_eviction
    # when the operator terminated the instance: the replacement Ready, both pods evicted
    # (not deleted), and a successor running on the replacement (the PDB let the second
    # pod go only once the first's successor ran there)
    assert replacement in then["ready"]
    assert not then["pods"] & set(originals), "the pods were gone when it was terminated"
    assert all(is_evicted(seen.pod_final[p]) for p in originals)
    assert then["pod_running"], "a successor was running when the instance was terminated"
    assert set(then["pod_running"].values()) == {replacement}

    async def rescheduled() -> bool:
        listed = await env.client.list(PODS, namespace, label_selector="app=web")
        on = [p["spec"].get("nodeName") for p in listed["items"]]
        return await available(env, namespace, 2) and on == [replacement, replacement]

    await env.eventually(rescheduled, "both pods running again on the replacement", timeout=60)
    assert requests.evictions() >= 2
    assert not [k for k in requests.seen if k[:2] == ("delete", "pods")], "no pod deleted"
    # the message was acted on, then deleted
    async with session.create_client("sqs", endpoint_url=moto.endpoint_url) as sqs:
        attributes = (
            await sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )
        )["Attributes"]
    assert attributes == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }
    assert await events(env, name, "Interrupting")
    (note,) = await events(env, name, "Interrupted")
    assert old_name in note
    assert "SpotInterruption" in note
    metrics = env.registry.render()
    assert 'nodepool_interruption_messages_total{kind="SpotInterruption"} 1.0' in metrics


async def test_the_queue_reader_marks_nodes_deletes_every_message_and_survives_a_missing_queue(
    operator_env: OperatorEnv, moto: MotoServer
) -> None:
    """The reader alone (no controller), against moto's SQS and the real apiserver: started
    before its queue exists it logs, backs off and starts again (nothing dies); then each
    kind of message is acted on as documented and every one is deleted, the unreadable one
    too; the Nodes named carry the mark, with the deadline the message gave."""
    env = operator_env
    queue = f"reader-{env.run_id}"
    pool_name = f"marked-{env.run_id}"
    for node_name, instance in (
        ("node-a", "i-0aaaaaaaaaaaaaaaa"),
        ("node-b", "i-0bbbbbbbbbbbbbbbb"),
    ):
        await env.create(
            NODES,
            {
                "metadata": {
                    "name": f"{node_name}-{env.run_id}",
                    "labels": {POOL_LABEL: pool_name},
                },
                "spec": {"providerID": f"aws:///eu-west-1a/{instance}"},
            },
        )
    registry = Registry()
    enqueued: list[str] = []

    def open_queue() -> SqsQueue:
        return SqsQueue(queue, endpoint_url=moto.endpoint_url, wait_seconds=1)

    source = InterruptionSource(
        env.client, open_queue, registry, label_selector=env.settings.label_selector
    )
    await source.start(Cache(env.client), lambda req, _: enqueued.append(req.name))
    try:

        async def crashed() -> bool:
            return source.crashes >= 1

        await env.eventually(crashed, "the reader to fail on the missing queue", timeout=30)
        session = AioSession()
        async with session.create_client("sqs", endpoint_url=moto.endpoint_url) as sqs:
            url = (await sqs.create_queue(QueueName=queue))["QueueUrl"]
            for body in (
                "not an event",
                rebalance("i-0aaaaaaaaaaaaaaaa"),
                state_change("running", "i-0aaaaaaaaaaaaaaaa"),
                health("i-0aaaaaaaaaaaaaaaa", "i-0ccccccccccccccccc"),
                spot_warning("i-0bbbbbbbbbbbbbbbb"),
            ):
                await sqs.send_message(QueueUrl=url, MessageBody=body)

            async def drained() -> bool:
                attributes = await sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=[
                        "ApproximateNumberOfMessages",
                        "ApproximateNumberOfMessagesNotVisible",
                    ],
                )
                return set(attributes["Attributes"].values()) == {"0"} and len(enqueued) == 2

            await env.eventually(drained, "every message acted on and deleted", timeout=60)
    finally:
        await source.stop()

    a = await env.client.get(NODES, f"node-a-{env.run_id}")
    b = await env.client.get(NODES, f"node-b-{env.run_id}")
    assert interrupted(a) == Interrupted("ScheduledChange", RETIREMENT)
    assert interrupted(b) == Interrupted("SpotInterruption", EPOCH + 120)
    assert enqueued == [pool_name, pool_name]
    counted = registry.render()
    for kind, count in (
        ("Unreadable", 1),
        ("RebalanceRecommendation", 1),
        ("StateChange", 1),
        ("ScheduledChange", 1),
        ("SpotInterruption", 1),
    ):
        assert f'nodepool_interruption_messages_total{{kind="{kind}"}} {count}.0' in counted
