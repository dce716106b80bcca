"""Scale-down drains: the chosen Node is tainted first, its pods leave only through the Eviction
API, and the Node and VM go only once no workload pod is left.

Oracles are the apiserver's objects (the Node, its taints, the pods), the cloud's records, and
every request the operator's client sent with the answer it got (a request observer: which
evictions were made, which a PodDisruptionBudget refused with 429).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kubeloop import NODES, PODS, NotFound, Object, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests.e2e.conftest import OperatorEnv

pytestmark = pytest.mark.integration

DISRUPTING = "kubeloop.dev/disrupting"
DO_NOT_DISRUPT = "kubeloop.dev/do-not-disrupt"


class Requests:
    """Every request the operator's client made: (verb, resource, subresource, code) counts."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str, str, int]] = Counter()

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        self.seen[(verb, resource.plural if resource else "", subresource or "", code)] += 1

    def evictions(self, *, refused: bool = False) -> int:
        """Evictions the server accepted (2xx), or refused with 429 (a PDB)."""
        return sum(
            n
            for (verb, res, sub, code), n in self.seen.items()
            if (verb, res, sub) == ("create", "pods", "eviction")
            and (code == 429 if refused else 200 <= code < 300)
        )

    def pod_deletes(self) -> int:
        return sum(
            n for (verb, res, _, _), n in self.seen.items() if (verb, res) == ("delete", "pods")
        )


def pool(name: str, target: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeloop.dev/v1alpha1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"targetNodes": target, "instanceType": "m5.large", "maxNodes": 5},
    }


def pod(name: str, pool_name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {
            "nodeSelector": {POOL_LABEL: pool_name},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
        },
    }


async def nodes_of(env: OperatorEnv, name: str) -> list[Object]:
    return list((await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}"))["items"])


async def events(env: OperatorEnv, name: str, reason: str) -> list[str]:
    from tests.e2e.test_autoscaler import events_about

    return await events_about(env.client, name, "default", reason)


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("drain")


async def test_a_do_not_disrupt_pod_holds_its_node_until_the_annotation_goes(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"dnd-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 1))
    await env.start(controllers=("nodepool",))

    async def one_ready_node() -> list[Object]:
        found = await nodes_of(env, name)
        return found if len(found) == 1 else []

    (node,) = await env.eventually(one_ready_node, "one node")
    node_name = node["metadata"]["name"]
    held = pod("held", name, annotations={DO_NOT_DISRUPT: "true"})
    await env.create(PODS, held, namespace)

    async def bound() -> bool:
        current = await env.client.get(PODS, "held", namespace)
        return bool(current["spec"].get("nodeName") == node_name)

    await env.eventually(bound, "the pod to be bound to the node")
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 0}})

    async def blocked() -> list[str]:
        return await events(env, name, "DisruptionBlocked")

    notes = await env.eventually(blocked, "a DisruptionBlocked Event on the pool")
    assert f"pod {namespace}/held is annotated {DO_NOT_DISRUPT}" in notes[0]
    # Held: the Node is tainted (nothing new lands on it), the pod was not touched, the
    # Node and the VM are still there.
    node = await env.client.get(NODES, node_name)
    assert any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
    current = await env.client.get(PODS, "held", namespace)
    assert not current["metadata"].get("deletionTimestamp")
    assert requests.evictions() == 0
    assert len(env.cloud.snapshot().live) == 1

    # The annotation goes: the pod is evicted (never deleted), then the Node and the VM go.
    await env.client.patch(
        PODS, "held", {"metadata": {"annotations": {DO_NOT_DISRUPT: None}}}, namespace
    )

    async def gone() -> bool:
        return not await nodes_of(env, name) and not env.cloud.snapshot().live

    await env.eventually(gone, "the node and its VM to be removed", timeout=60)
    with pytest.raises(NotFound):
        await env.client.get(PODS, "held", namespace)
    assert requests.evictions() == 1
    assert requests.pod_deletes() == 0
