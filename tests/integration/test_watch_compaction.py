"""A watch from a compacted resourceVersion gets 410 Gone.

The apiserver's watch cache keeps its own history and would mask an etcd
compaction, so this control plane serves watches straight from etcd
(``--watch-cache=false``); then compaction is the only thing that expires a
version, as in a long-running cluster whose history has moved on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubeloop import CONFIGMAPS, Client, Gone
from kubeloop.envtest import ControlPlane, ControlPlaneOptions

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def etcd_watch_plane() -> Iterator[ControlPlane]:
    with ControlPlane(
        ControlPlaneOptions(scheduler=False, apiserver_args=["--watch-cache=false"])
    ) as cp:
        yield cp


def _cm(name: str, v: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}}


async def test_watch_from_compacted_version_is_gone(etcd_watch_plane: ControlPlane) -> None:
    ns = etcd_watch_plane.create_namespace("compact")
    async with Client.from_kubeconfig(etcd_watch_plane.kubeconfig) as client:
        first = await client.create(CONFIGMAPS, _cm("a", "0"), ns)
        old_rv = first["metadata"]["resourceVersion"]

        # before compaction the old version is still watchable: it replays what followed
        for i in range(1, 4):
            await client.patch(CONFIGMAPS, "a", {"data": {"v": str(i)}}, ns)
        seen = []
        async for event in client.watch(CONFIGMAPS, ns, resource_version=old_rv, timeout_seconds=2):
            seen.append(event.object["data"]["v"])
        assert seen == ["1", "2", "3"]

        compacted_at = etcd_watch_plane.compact_etcd()
        assert compacted_at > int(old_rv)
        with pytest.raises(Gone) as gone:
            async for _ in client.watch(CONFIGMAPS, ns, resource_version=old_rv, timeout_seconds=5):
                pass
        assert gone.value.status_code == 410
