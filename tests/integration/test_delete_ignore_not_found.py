"""`Client.delete(..., ignore_not_found=True)`: "make it absent", for a reconcile or a
finalizer that deletes a child someone else may have deleted first."""

from __future__ import annotations

import pytest

from kubeloop import CONFIGMAPS, Client, NotFound

pytestmark = pytest.mark.integration


async def test_delete_ignoring_not_found(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    await kube_client.create(CONFIGMAPS, {"metadata": {"name": "child"}, "data": {}}, ns)
    gone = await kube_client.delete(CONFIGMAPS, "child", ns, ignore_not_found=True)
    assert gone is not None  # the server's answer for the delete it did
    with pytest.raises(NotFound):
        await kube_client.get(CONFIGMAPS, "child", ns)
    # a second delete: None instead of NotFound; without the option it still raises
    assert await kube_client.delete(CONFIGMAPS, "child", ns, ignore_not_found=True) is None
    with pytest.raises(NotFound):
        await kube_client.delete(CONFIGMAPS, "child", ns)
