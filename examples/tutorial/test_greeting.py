from pathlib import Path

from greeting_operator import GREETINGS, build

from kubeloop import CONFIGMAPS, Client, ManagerOptions, NotFound
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, running

HERE = Path(__file__).parent
NO_SERVERS = ManagerOptions(
    metrics_bind_address=None, health_probe_bind_address=None, handle_signals=False
)


async def test_a_greeting_gets_its_configmap(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    kube_control_plane.install_crds([HERE / "greeting_crd.yaml"])
    mgr = build(kube_client, kube_namespace, NO_SERVERS)
    greeting = {
        "apiVersion": "tutorial.kubeloop.dev/v1",
        "kind": "Greeting",
        "metadata": {"name": "hello"},
        "spec": {"message": "Hello from a test"},
    }

    async def has_configmap() -> bool:
        try:
            cm = await kube_client.get(CONFIGMAPS, "greeting-hello", kube_namespace)
        except NotFound:
            return False
        return bool(cm["data"] == {"message": "Hello from a test"})

    async with running(mgr):
        await kube_client.create(GREETINGS, greeting, kube_namespace)
        await eventually(has_configmap, "the Greeting's ConfigMap", timeout=60)
