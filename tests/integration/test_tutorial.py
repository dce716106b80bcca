"""docs/tutorial.md's operator (examples/tutorial/, the same file as the page's inline code:
test_tutorial_as_written.py checks that and runs the page itself) as a process against the
real control plane, through more cases than the page shows."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from kubeloop import CONFIGMAPS, Client, NotFound, Resource
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "examples" / "tutorial"
GREETINGS = Resource("tutorial.kubeloop.dev", "v1", "greetings", "Greeting")


async def test_tutorial_operator_end_to_end(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    kube_control_plane.install_crds([TUTORIAL / "greeting_crd.yaml"])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(TUTORIAL / "greeting_operator.py"),
        "--kubeconfig",
        str(kube_control_plane.kubeconfig),
        "--namespace",
        ns,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await kube_client.create(
            GREETINGS,
            {
                "apiVersion": "tutorial.kubeloop.dev/v1",
                "kind": "Greeting",
                "metadata": {"name": "hello"},
                "spec": {"message": "Hello, kubeloop"},
            },
            ns,
        )

        async def ready(message: str, generation: int) -> bool:
            try:
                cm = await kube_client.get(CONFIGMAPS, "greeting-hello", ns)
            except NotFound:
                return False
            g = await kube_client.get(GREETINGS, "hello", ns)
            status = g.get("status") or {}
            conds = {c["type"]: c for c in status.get("conditions", [])}
            return (
                cm["data"] == {"message": message}
                and status.get("observedGeneration") == generation
                and conds.get("Ready", {}).get("status") == "True"
            )

        await eventually(lambda: ready("Hello, kubeloop", 1), "the first greeting", timeout=60)
        cm = await kube_client.get(CONFIGMAPS, "greeting-hello", ns)
        greeting = await kube_client.get(GREETINGS, "hello", ns)
        [owner] = cm["metadata"]["ownerReferences"]
        assert owner["uid"] == greeting["metadata"]["uid"]
        assert owner["controller"] is True

        # a spec edit reaches the child and the status
        await kube_client.patch(GREETINGS, "hello", {"spec": {"message": "Bye"}}, ns)
        await eventually(lambda: ready("Bye", 2), "the edited greeting", timeout=60)

        # a deleted child is put back (owns())
        await kube_client.delete(CONFIGMAPS, "greeting-hello", ns)
        await eventually(lambda: ready("Bye", 2), "the child put back", timeout=60)

        # switched off: the child goes; a later reconcile finds it gone and is content
        # (delete(..., ignore_not_found=True)), so the status follows each generation
        async def disabled(generation: int) -> bool:
            try:
                await kube_client.get(CONFIGMAPS, "greeting-hello", ns)
            except NotFound:
                g = await kube_client.get(GREETINGS, "hello", ns)
                status = g.get("status") or {}
                conds = {c["type"]: c for c in status.get("conditions", [])}
                ready = conds.get("Ready", {})
                return status.get("observedGeneration") == generation and (
                    ready.get("status"),
                    ready.get("reason"),
                ) == ("False", "Disabled")
            return False

        await kube_client.patch(GREETINGS, "hello", {"spec": {"enabled": False}}, ns)
        await eventually(lambda: disabled(3), "the child deleted", timeout=60)
        await kube_client.patch(GREETINGS, "hello", {"spec": {"message": "Off"}}, ns)
        await eventually(lambda: disabled(4), "a reconcile with the child gone", timeout=60)

        # bad input is refused at admission with the field named
        with pytest.raises(Exception, match=r"spec\.message"):
            await kube_client.create(
                GREETINGS,
                {
                    "apiVersion": "tutorial.kubeloop.dev/v1",
                    "kind": "Greeting",
                    "metadata": {"name": "empty"},
                    "spec": {"message": ""},
                },
                ns,
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err
