"""The NodePool controller's Node patch (``_node_sync.sync_patch``) against kube-apiserver's
own JSON-patch implementation: its guards are on the fields it replaces, so a status
heartbeat between the read and the patch does not refuse it, a taint added meanwhile does
(422), and ``test`` with ``null`` on a missing field passes (the apiserver's library reads
a missing member as null; RFC 6902 alone would not say)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop import NODES, Client, Invalid, PatchType
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers.nodepool._node_sync import OWNED_ANNOTATION, sync_patch
from tests import factories

pytestmark = pytest.mark.integration

FIN = "kubeloop.dev/termination"
GPU = {"key": "gpu", "effect": "NoSchedule"}


_names = itertools.count()


@pytest.fixture
async def node(kube_client: Client) -> AsyncIterator[dict[str, Any]]:
    """A Node as read right after it registered: no finalizers, annotations or taints, so
    every guard tests a missing field."""
    name = f"sync-{next(_names)}"
    body = factories.node(name, labels={"kubernetes.io/hostname": name})
    yield await kube_client.create(NODES, body)
    await kube_client.patch(NODES, name, {"metadata": {"finalizers": None}})
    await kube_client.delete(NODES, name)


async def _heartbeat(client: Client, name: str) -> None:
    status = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    await client.patch(NODES, name, {"status": status}, subresource="status")


async def test_a_heartbeat_between_read_and_patch_does_not_refuse_it(
    kube_client: Client, node: dict[str, Any]
) -> None:
    name = node["metadata"]["name"]
    ops = sync_patch(node_fields(node), {"team": "a"}, [GPU], finalizers=(FIN,))
    assert {"op": "test", "path": "/metadata/finalizers", "value": None} in ops
    await _heartbeat(kube_client, name)  # the resourceVersion moves, nothing we touch
    out = await kube_client.patch(NODES, name, ops, patch_type=PatchType.JSON)
    assert out["metadata"]["labels"]["team"] == "a"
    assert out["spec"]["taints"] == [GPU]
    assert out["metadata"]["finalizers"] == [FIN]
    assert OWNED_ANNOTATION in out["metadata"]["annotations"]
    assert sync_patch(node_fields(out), {"team": "a"}, [GPU], finalizers=(FIN,)) == []


async def test_a_taint_added_between_read_and_patch_refuses_it(
    kube_client: Client, node: dict[str, Any]
) -> None:
    name = node["metadata"]["name"]
    ops = sync_patch(node_fields(node), {"team": "a"}, [GPU])
    cordon = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    await kube_client.patch(NODES, name, {"spec": {"taints": [cordon]}})
    with pytest.raises(Invalid):
        await kube_client.patch(NODES, name, ops, patch_type=PatchType.JSON)
    live = await kube_client.get(NODES, name)
    assert live["spec"]["taints"] == [cordon], "the other writer's taint is kept"
    assert "team" not in live["metadata"]["labels"], "nothing of the refused patch applied"
    # the next pass reads again and keeps it
    again = sync_patch(node_fields(live), {"team": "a"}, [GPU])
    out = await kube_client.patch(NODES, name, again, patch_type=PatchType.JSON)
    assert out["spec"]["taints"] == [cordon, GPU]
