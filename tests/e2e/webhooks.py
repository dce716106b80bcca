"""Shared set-up of the e2e tests where the real kube-apiserver calls the operator's webhook
server: the operator started in-process serving it on 127.0.0.1 with development
certificates, and kubectl run beside it."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from kubeloop import CertificateAuthority, Manager, generate_serving_certificates
from kubeloop.envtest import ControlPlane
from tests.e2e.conftest import OperatorEnv


async def kubectl(
    cp: ControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl in a thread: the webhook server it reaches runs on this test's event loop;
    with ``stdin``, the manifest it reads (``-f -``)."""
    assert cp.assets is not None
    assert cp.assets.kubectl is not None
    manifest = ["-f", "-"] if stdin is not None else []
    return await asyncio.to_thread(
        subprocess.run,
        [str(cp.assets.kubectl), f"--kubeconfig={cp.kubeconfig}", *args, *manifest],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def serve_webhooks(env: OperatorEnv, cert_dir: Path) -> tuple[Manager, CertificateAuthority]:
    """The operator with no controllers (what is checked is the webhook alone), its webhook
    server listening with a fresh CA's certificate in ``cert_dir``; the manager and the CA."""
    ca, _pair = generate_serving_certificates(cert_dir, ["127.0.0.1"])
    mgr = await env.start(
        controllers=(),
        kubelets=False,
        webhook_bind_address="127.0.0.1:0",
        webhook_cert_dir=cert_dir,
    )

    async def listening() -> bool:
        return mgr.webhooks is not None and mgr.webhooks.address is not None

    await env.eventually(listening, "the webhook server to listen")
    return mgr, ca
