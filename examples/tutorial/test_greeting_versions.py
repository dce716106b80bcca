from pathlib import Path

from greeting_versions import GREETINGS, add_conversion, install

from kubeloop import (
    Client,
    Manager,
    ManagerOptions,
    NotFound,
    WebhookServerOptions,
    generate_serving_certificates,
)
from kubeloop.testing import eventually, running

NO_SERVERS = ManagerOptions(
    metrics_bind_address=None, health_probe_bind_address=None, handle_signals=False
)
V1, V2 = GREETINGS.resource("v1"), GREETINGS.resource("v2")


async def test_a_greeting_written_as_v2_reads_as_v1_and_back(
    kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    ca, _ = generate_serving_certificates(tmp_path, ["127.0.0.1"])
    mgr = Manager(kube_client, NO_SERVERS)
    options = WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path)
    server = add_conversion(mgr, options)
    await install(kube_client, server, ca.cert_pem)

    async def served() -> bool:
        # the apiserver serves a new CRD, and a new version, a moment after it is written
        try:
            await kube_client.list(V2, kube_namespace)
        except NotFound:
            return False
        return True

    quiet = {
        "apiVersion": V2.api_version,
        "kind": "Greeting",
        "metadata": {"name": "quiet"},
        "spec": {"message": "Not now", "suspend": True},
    }
    async with running(mgr):
        await eventually(served, "Greeting v2 served", timeout=30)
        await kube_client.create(V2, quiet, kube_namespace)
        stored = await kube_client.get(V1, "quiet", kube_namespace)
        back = await kube_client.get(V2, "quiet", kube_namespace)
    assert stored["spec"] == {"message": "Not now", "enabled": False}
    assert back["spec"] == quiet["spec"]
