"""Exec credential plugins and proxy-url against the real kube-apiserver.

The plugin is a real process (a small Python program) that prints a service-account
token the apiserver issued through the TokenRequest API; the apiserver's answer to
SelfSubjectReview says whose identity the request carried. The proxy is a real HTTP
CONNECT proxy on loopback that counts the tunnels it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import NAMESPACES, Client, Resource, load_kubeconfig
from kubeloop._errors import Unauthorized
from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration

SELF_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False
)
ADMIN = "admin"  # the envtest admin certificate's CN
SERVICEACCOUNTS_PATH = "/api/v1/namespaces/{ns}/serviceaccounts"

PLUGIN = textwrap.dedent(
    """
    import json, sys
    state = sys.argv[1]
    with open(state + ".runs", "a") as f:
        f.write("run\\n")
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": open(state).read().strip()},
    }))
    """
)


def admin_doc(cp: ControlPlane) -> dict[str, Any]:
    doc = yaml.safe_load(cp.kubeconfig.read_text())
    assert isinstance(doc, dict)
    return doc


def service_account_token(cp: ControlPlane, namespace: str, name: str) -> str:
    rest = cp.rest()
    rest.post(
        SERVICEACCOUNTS_PATH.format(ns=namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    review = rest.post(
        f"{SERVICEACCOUNTS_PATH.format(ns=namespace)}/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    token = review["status"]["token"]
    assert isinstance(token, str)
    return token


def exec_kubeconfig(cp: ControlPlane, tmp_path: Path, state: Path) -> Path:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    doc = admin_doc(cp)
    cluster = doc["clusters"][0]["cluster"]
    out = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": cluster}],
        "users": [
            {
                "name": "plugin",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": [str(script), str(state)],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "plugin", "context": {"cluster": "envtest", "user": "plugin"}}],
        "current-context": "plugin",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(out))
    return path


async def whoami(client: Client) -> str:
    review = await client.create(
        SELF_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    name = review["status"]["userInfo"]["username"]
    assert isinstance(name, str)
    return name


def plugin_runs(state: Path) -> int:
    path = Path(str(state) + ".runs")
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_exec_plugin_token_authenticates_and_is_refreshed_after_a_401(
    kube_control_plane: ControlPlane, kube_namespace: str, tmp_path: Path
) -> None:
    good = service_account_token(kube_control_plane, kube_namespace, "robot")
    state = tmp_path / "token"
    state.write_text("not-a-valid-token")
    async with Client(load_kubeconfig(exec_kubeconfig(kube_control_plane, tmp_path, state))) as c:
        with pytest.raises(Unauthorized):
            await whoami(c)
        assert plugin_runs(state) == 1
        state.write_text(good)  # the user logs in again; the plugin now prints a good token
        assert await whoami(c) == f"system:serviceaccount:{kube_namespace}:robot"
        assert plugin_runs(state) == 2  # run again because of the 401, not before
        assert await whoami(c) == f"system:serviceaccount:{kube_namespace}:robot"
        assert plugin_runs(state) == 2  # and then cached


class ConnectProxy:
    """A plain HTTP CONNECT proxy on loopback that counts the tunnels it opened."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(ConnectionError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def connect_proxy() -> AsyncIterator[ConnectProxy]:
    proxy = ConnectProxy()
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_proxy_url_sends_requests_and_watches_through_the_proxy(
    kube_control_plane: ControlPlane, connect_proxy: ConnectProxy, tmp_path: Path
) -> None:
    doc = admin_doc(kube_control_plane)
    doc["clusters"][0]["cluster"]["proxy-url"] = connect_proxy.url
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    server = doc["clusters"][0]["cluster"]["server"].removeprefix("https://")
    async with Client(load_kubeconfig(path)) as client:
        user = await whoami(client)
        namespaces = await client.list(NAMESPACES)
        rv = namespaces["metadata"]["resourceVersion"]
        async for _event in client.watch(NAMESPACES, resource_version=rv, timeout_seconds=1):
            pass
    assert user == ADMIN
    assert namespaces["items"], "listed through the proxy"
    # requests and the watch each opened tunnels, all to the apiserver
    assert len(connect_proxy.tunnels) >= 2
    assert set(connect_proxy.tunnels) == {server}
