"""examples/configmap_child: the AppConfig operator, run as a process as a user would.

What is checked is the apiserver's state: each AppConfig's ConfigMap holds its spec's
data, is controlled by that AppConfig (by UID), and the status names the generation acted
on; a deleted AppConfig's ConfigMap goes; a re-created one gets a new ConfigMap.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, Client, NotFound
from kubeloop.envtest import ControlPlane
from kubeloop.envtest._process import Process
from kubeloop.testing import eventually
from kubeloop.testing.faults import FaultProxy, Hang
from tests.faults import appconfig

pytestmark = pytest.mark.integration

EXAMPLE = appconfig.EXAMPLE
APPCONFIGS = appconfig.APPCONFIGS


@contextlib.asynccontextmanager
async def operator(
    cp: ControlPlane, namespace: str, log: Path, kubeconfig: Path | None = None
) -> AsyncIterator[Process]:
    proc = Process(
        "appconfig",
        [
            sys.executable,
            str(EXAMPLE),
            "--kubeconfig",
            str(kubeconfig or cp.kubeconfig),
            "--namespace",
            namespace,
        ],
        log,
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop(timeout=30)


def appcfg(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "examples.kubeloop.dev/v1",
        "kind": "AppConfig",
        "metadata": {"name": name},
        "spec": {"data": data},
    }


async def converged(client: Client, ns: str, name: str) -> bool:
    """The ConfigMap matches the spec, is controlled by this AppConfig, status is current."""
    try:
        app = await client.get(APPCONFIGS, name, ns)
        child = await client.get(CONFIGMAPS, name, ns)
    except NotFound:
        return False
    status = app.get("status") or {}
    return bool(
        child.get("data", {}) == app["spec"]["data"]
        and appconfig.owner_uid(child) == app["metadata"]["uid"]
        and status.get("observedGeneration") == app["metadata"]["generation"]
    )


async def gone(client: Client, ns: str, name: str) -> bool:
    try:
        await client.get(CONFIGMAPS, name, ns)
    except NotFound:
        return True
    return False


async def test_children_follow_spec_changes_deletes_and_recreates(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    await appconfig.install_crd(kube_client)
    async with operator(kube_control_plane, ns, tmp_path / "operator.log") as proc:
        names = [f"app-{i}" for i in range(5)]
        for name in names:
            await kube_client.create(APPCONFIGS, appcfg(name, greeting="hello"), ns)
        for name in names:
            await eventually(functools.partial(converged, kube_client, ns, name), name, 60)

        # a spec change: new data in the child, the new generation in status
        app = await kube_client.get(APPCONFIGS, "app-0", ns)
        app["spec"]["data"] = {"greeting": "bonjour", "colour": "blue"}
        await kube_client.update(APPCONFIGS, app)
        await eventually(lambda: converged(kube_client, ns, "app-0"), "app-0 changed", 60)
        status = (await kube_client.get(APPCONFIGS, "app-0", ns))["status"]
        assert (status["observedGeneration"], status["keys"]) == (2, 2)
        assert status["conditions"][0]["reason"] == "ConfigMapInSync"

        # delete: the child goes too (no garbage collector runs here)
        await kube_client.delete(APPCONFIGS, "app-1", ns)
        await eventually(lambda: gone(kube_client, ns, "app-1"), "app-1's ConfigMap deleted", 60)

        # delete and re-create under the same name: the child belongs to the new one
        old_uid = (await kube_client.get(APPCONFIGS, "app-2", ns))["metadata"]["uid"]
        await kube_client.delete(APPCONFIGS, "app-2", ns)
        new = await kube_client.create(APPCONFIGS, appcfg("app-2", greeting="again"), ns)
        assert new["metadata"]["uid"] != old_uid
        await eventually(lambda: converged(kube_client, ns, "app-2"), "app-2 re-created", 60)

        assert proc.exited() is None, proc.log_tail()
        children = (await kube_client.list(CONFIGMAPS, ns, label_selector=appconfig.CHILD_LABEL))[
            "items"
        ]
        assert sorted(c["metadata"]["name"] for c in children) == [
            "app-0",
            "app-2",
            "app-3",
            "app-4",
        ]


async def test_a_child_collected_with_its_owner_is_not_recreated_from_a_stale_cache(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    """The AppConfig watch is held (throttled, partitioned) while the AppConfig is deleted
    and its ConfigMap collected: the ConfigMap watch tells the operator its child is gone,
    its AppConfig cache still holds the owner. It must not create the child again (CI saw
    that under a 429 storm: created and collected twice). The oracle is the proxy's log
    of the operator's writes and the apiserver's state."""
    ns = kube_namespace
    await appconfig.install_crd(kube_client)
    async with FaultProxy(kube_control_plane) as proxy:
        kubeconfig = proxy.kubeconfig_for("op")
        async with operator(kube_control_plane, ns, tmp_path / "op.log", kubeconfig) as proc:
            await kube_client.create(APPCONFIGS, appcfg("app-0", greeting="hello"), ns)
            await eventually(lambda: converged(kube_client, ns, "app-0"), "app-0", 60)

            held = proxy.add_rule(Hang(), client="op", resource="appconfigs")
            assert proxy.cut_watches(client="op", resource="appconfigs") == 1
            mark = max(e.seq for e in proxy.log)
            await kube_client.delete(APPCONFIGS, "app-0", ns)
            await kube_client.delete(CONFIGMAPS, "app-0", ns)  # as the garbage collector does

            def acted() -> bool:
                late = proxy.log.entries(client="op", where=lambda e: e.seq > mark)
                return any(
                    (e.resource, e.verb, e.name)
                    in {
                        ("configmaps", "create", "app-0"),
                        ("appconfigs", "get", "app-0"),
                    }
                    for e in late
                )

            await eventually(acted, "the operator to act on the ConfigMap's deletion", 60)
            proxy.remove_rule(held)
            back = functools.partial(
                proxy.log.entries,
                client="op",
                verb={"list", "watch"},
                resource="appconfigs",
                action="forward",
                where=lambda e: e.seq > mark,
            )
            await eventually(lambda: bool(back()), "the AppConfig informer to be back", 60)
            await eventually(lambda: gone(kube_client, ns, "app-0"), "no ConfigMap app-0", 60)
            writes = proxy.log.writes(client="op", resource="configmaps")
            assert [e.verb for e in writes] == ["create"], [(e.verb, e.name) for e in writes]
            assert proc.exited() is None, proc.log_tail()
