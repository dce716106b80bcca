"""docs/webhooks.md's example (examples/webhooks/, the files the page includes) runs as a
process against the real control plane, as a reader would run it: the apiserver calls its
validating, mutating and conversion webhooks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from kubeloop import (
    CRDS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    Client,
    Forbidden,
    NotFound,
    Resource,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "webhooks"
GROUP = "examples.kubeloop.dev"
ALPHA = Resource(GROUP, "v1alpha1", "widgets", "Widget")
BETA = Resource(GROUP, "v1beta1", "widgets", "Widget")


def test_the_page_includes_the_tested_files() -> None:
    page = (ROOT / "docs" / "webhooks.md").read_text()
    for section in ("validate", "mutate", "convert", "main"):
        assert f'--8<-- "examples/webhooks/widget_webhooks.py:{section}"' in page
    assert '--8<-- "examples/webhooks/widget_crd.yaml"' in page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def widget(version: str, name: str, spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


async def test_example_webhooks_end_to_end(
    kube_control_plane: ControlPlane, kube_namespace: str, kube_client: Client
) -> None:
    ns = kube_namespace
    kube_control_plane.install_crds([EXAMPLE / "widget_crd.yaml"])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE / "widget_webhooks.py"),
        "--kubeconfig",
        str(kube_control_plane.kubeconfig),
        "--namespace",
        ns,
        "--port",
        str(free_port()),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # the validating webhook refuses too many replicas, naming the field
        refusals: list[Forbidden] = []

        async def refused() -> bool:
            try:
                await kube_client.create(BETA, widget("v1beta1", "big", {"replicas": 50}), ns)
            except Forbidden as err:
                refusals.append(err)
                return True
            except ApiError:  # the webhooks are not registered, or not trusted, yet
                return False
            await kube_client.delete(BETA, "big", ns)
            return False

        await eventually(refused, "the example's validating webhook", timeout=60)
        err = refusals[-1]
        assert err.message == (
            'admission webhook "validate.examples.kubeloop.dev" denied the request: '
            "spec.replicas: 50 is more than 10"
        )
        assert [c.field for c in err.causes] == ["spec.replicas"]

        # created as v1alpha1: converted for storage, defaulted by the mutating webhook
        await kube_client.create(ALPHA, widget("v1alpha1", "w", {"size": 3}), ns)
        stored = await kube_client.get(BETA, "w", ns)
        assert stored["spec"] == {"replicas": 3, "tier": "standard"}
        assert stored["metadata"]["labels"] == {f"{GROUP}/tier": "standard"}

        # the tier, which v1alpha1 cannot hold, survives a write through v1alpha1
        await kube_client.patch(BETA, "w", {"spec": {"tier": "gold"}}, ns)
        alpha = await kube_client.get(ALPHA, "w", ns)
        assert alpha["spec"] == {"size": 3}
        alpha["spec"]["size"] = 4
        await kube_client.update(ALPHA, alpha)
        assert (await kube_client.get(BETA, "w", ns))["spec"] == {"replicas": 4, "tier": "gold"}
        assert proc.returncode is None, "the example exited"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        stderr = (await asyncio.wait_for(proc.stderr.read(), 60)).decode()
        code = await asyncio.wait_for(proc.wait(), 60)
        for res, name in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, "widgets-validate"),
            (MUTATING_WEBHOOK_CONFIGURATIONS, "widgets-mutate"),
            (CRDS, f"widgets.{GROUP}"),
        ):
            with contextlib.suppress(NotFound):
                await kube_client.delete(res, name)
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
