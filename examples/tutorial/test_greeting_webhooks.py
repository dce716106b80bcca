from pathlib import Path

import pytest
from greeting_webhooks import GREETINGS, add_webhooks, register

from kubeloop import (
    Client,
    Forbidden,
    Manager,
    ManagerOptions,
    NotFound,
    WebhookServerOptions,
    generate_serving_certificates,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, running

HERE = Path(__file__).parent
NO_SERVERS = ManagerOptions(
    metrics_bind_address=None, health_probe_bind_address=None, handle_signals=False
)


def greeting(name: str, message: str) -> dict[str, object]:
    return {
        "apiVersion": "tutorial.kubeloop.dev/v1",
        "kind": "Greeting",
        "metadata": {"name": name},
        "spec": {"message": message},
    }


async def test_a_second_greeting_saying_the_same_is_refused(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client, tmp_path: Path
) -> None:
    kube_control_plane.install_crds([HERE / "greeting_crd.yaml"])
    ca, _ = generate_serving_certificates(tmp_path, ["127.0.0.1"])
    mgr = Manager(kube_client, NO_SERVERS)
    # port 0: any free port; register() writes the one it got into the configurations
    server = add_webhooks(mgr, WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path))
    await register(kube_client, server, ca.cert_pem, kube_namespace)
    await kube_client.create(GREETINGS, greeting("hello", "Hello there"), kube_namespace)
    refusals: list[str] = []

    async def refused() -> bool:
        # the apiserver starts calling new configurations a moment after they are written
        try:
            await kube_client.create(GREETINGS, greeting("again", " Hello  there"), kube_namespace)
        except Forbidden as err:
            refusals.append(str(err))
            return True
        await kube_client.delete(GREETINGS, "again", kube_namespace)
        return False

    async with running(mgr):
        await eventually(refused, "the duplicate refused by the webhook", timeout=30)
    # tidied by the mutating webhook first, then found taken by the validating one
    assert "Greeting hello already says 'Hello there'" in refusals[-1]
    with pytest.raises(NotFound):  # refused: never stored
        await kube_client.get(GREETINGS, "again", kube_namespace)
