"""The fence's deadline counts the time spent fetching credentials (issue 23, bug 8).

The fence bounds a leader-only write by the lease left when it is handed the write;
the transport then fetched the credentials (an exec plugin can take seconds) and only
then started the request's clock and sent ``?timeout=`` with the whole bound: a write
could be sent after the lease had run out, and commit. The plugin here is a real
process that takes 1.5 s; the lease has 1 s left."""

from __future__ import annotations

import dataclasses
import sys
import time

import pytest

from kubeloop import CONFIGMAPS, Client, NotFound, NotLeader, _log
from kubeloop._config import load_kubeconfig
from kubeloop._exec import ExecConfig
from kubeloop._fence import FencedTransport
from kubeloop._transport import HttpTransport
from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration

SLOW_PLUGIN = (
    "import json, time; time.sleep(1.5); print(json.dumps({"
    "'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
    "'status': {'token': 'not-needed-the-client-certificate-authenticates'}}))"
)


async def test_a_write_whose_credentials_outlast_the_lease_is_not_sent(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    base = load_kubeconfig(kube_control_plane.kubeconfig)
    plugin = ExecConfig(command=sys.executable, args=("-c", SLOW_PLUGIN))
    config = dataclasses.replace(base, exec=plugin)
    fence = FencedTransport(HttpTransport(config), lambda controller: True)
    lease_ends = time.monotonic() + 1.0
    fence.lease_left = lambda: lease_ends - time.monotonic()
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}
    async with Client(config, transport=fence) as client:
        token = _log.CONTROLLER.set("leader-only")
        try:
            with pytest.raises(NotLeader):
                await client.create(CONFIGMAPS, body, kube_namespace)
        finally:
            _log.CONTROLLER.reset(token)
    with pytest.raises(NotFound):
        await kube_client.get(CONFIGMAPS, "late", kube_namespace)
