"""The operator's validating webhook, called by the real kube-apiserver.

The operator runs in-process with ``webhook_bind_address`` on 127.0.0.1 and certificates
from :func:`~kubeloop.generate_serving_certificates`. The ValidatingWebhookConfiguration is
config/webhook's own, with its Service swapped for ``url`` (the apiserver cannot reach a
Service here, as in controller-runtime's envtest), its caBundle set by
:func:`~kubeloop.inject_ca_bundle`, and an objectSelector on the test's label so no other
test's objects meet it. Writes go through the control plane's kubectl, as a user's would.

Without the webhook, the controllers' conditions report the same cases:
``test_node_lifecycle.py::test_a_second_autoscaler_for_the_same_pool_is_refused_with_a_condition``
for two Autoscalers, and the last test here for a missing node class.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import (
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    NotFound,
    Object,
    Resource,
    generate_serving_certificates,
    inject_ca_bundle,
)
from kubeloop.envtest import ControlPlane
from nodepool_operator.admission import AUTOSCALER_PATH, NODEPOOL_PATH
from nodepool_operator.api import (
    AUTOSCALER_CONVERSION_PATH,
    AUTOSCALERS,
    AWSNODECLASSES,
    INSTANCE_CONVERSION_PATH,
    NODEPOOL_CONVERSION_PATH,
    NODEPOOLS,
)
from tests import factories
from tests.e2e.conftest import LABEL, OperatorEnv
from tests.e2e.webhooks import kubectl, serve_webhooks

pytestmark = pytest.mark.integration

MANIFEST = (
    Path(__file__).resolve().parents[2]
    / "config"
    / "webhook"
    / "validating_webhook_configuration.yaml"
)


def pool(env: OperatorEnv, name: str, node_class: str | None = None) -> dict[str, Any]:
    return env.labelled(factories.nodepool(name, target=0, node_class=node_class))


def autoscaler(env: OperatorEnv, name: str, pool_name: str, *ns: str) -> dict[str, Any]:
    scaler = factories.autoscaler(
        name, pool=pool_name, namespaces=ns or ["default"], frequency=None
    )
    return env.labelled(scaler)


async def install_webhook(env: OperatorEnv, base_url: str, ca_pem: bytes) -> str:
    """config/webhook's configuration, its Service swapped for ``base_url`` + each path;
    returns its name (deleted by the caller)."""
    config = yaml.safe_load(MANIFEST.read_text())
    config["metadata"] = {"name": f"nodepool-operator-{env.run_id}"}
    paths = {hook["clientConfig"]["service"]["path"] for hook in config["webhooks"]}
    assert paths == {AUTOSCALER_PATH, NODEPOOL_PATH}
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": base_url + hook["clientConfig"]["service"]["path"]}
        hook["objectSelector"] = {"matchLabels": env.labels}
    await env.client.create(VALIDATING_WEBHOOK_CONFIGURATIONS, config)
    await inject_ca_bundle(env.client, ca_pem, validating=[config["metadata"]["name"]])
    return str(config["metadata"]["name"])


async def until_enforced(env: OperatorEnv, name: str) -> ApiError:
    """Create a pool naming a missing class until our webhook refuses it (the apiserver
    loads a new configuration, then its caBundle, a moment after they are written)."""
    refusals: list[ApiError] = []

    async def refused() -> bool:
        try:
            await env.client.create(NODEPOOLS, pool(env, name, f"{name}-missing"))
        except ApiError as err:
            if "denied the request" in err.message:
                refusals.append(err)
                return True
            return False  # x509: the caBundle has not reached the apiserver yet
        await env.client.delete(NODEPOOLS, name)
        return False

    await env.eventually(refused, "the webhook configuration to be enforced", timeout=30)
    return refusals[-1]


@dataclass
class Webhooked:
    """The operator serving its webhook, the configuration enforced."""

    env: OperatorEnv
    cp: ControlPlane
    #: the refusal that showed the configuration enforced (a pool naming a missing class)
    probe: ApiError

    async def apply(self, obj: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
        return await kubectl(self.cp, "apply", *flags, stdin=json.dumps(obj))


@pytest.fixture
async def webhooked(
    operator_env: OperatorEnv, kube_control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[Webhooked]:
    env = operator_env
    mgr, ca = await serve_webhooks(env, tmp_path / "certs")
    assert mgr.webhooks is not None
    conversions = {NODEPOOL_CONVERSION_PATH, AUTOSCALER_CONVERSION_PATH, INSTANCE_CONVERSION_PATH}
    assert set(mgr.webhooks.paths) == {AUTOSCALER_PATH, NODEPOOL_PATH, *conversions}
    name = await install_webhook(env, mgr.webhooks.url(), ca.cert_pem)
    try:
        probe = await until_enforced(env, f"probe-{env.run_id}")
        yield Webhooked(env, kube_control_plane, probe)
    finally:
        with contextlib.suppress(NotFound):
            await env.client.delete(VALIDATING_WEBHOOK_CONFIGURATIONS, name)


def denied(result: subprocess.CompletedProcess[str], webhook: str, message: str) -> None:
    """kubectl failed with our webhook's refusal, starting with ``message``."""
    assert result.returncode == 1, result.stdout
    assert f'admission webhook "{webhook}.kubeloop.dev" denied the request: {message}' in (
        result.stderr
    )


async def test_a_second_autoscaler_for_a_pool_is_refused_at_admission(webhooked: Webhooked) -> None:
    wh = webhooked
    env = wh.env
    name = f"dup-{env.run_id}"
    await env.create(NODEPOOLS, pool(env, name))
    # the first is admitted, and the second is refused at once: no wait for any cache
    first = await wh.apply(autoscaler(env, f"{name}-a", name))
    assert first.returncode == 0, first.stderr
    env.created.append((AUTOSCALERS, f"{name}-a", None))
    second = autoscaler(env, f"{name}-b", name)
    for dry_run in ("--dry-run=server", None):
        refused = await wh.apply(second, *([dry_run] if dry_run else []))
        denied(refused, "vautoscaler", f"NodePool {name} is already scaled by Autoscaler {name}-a")
    with pytest.raises(NotFound):
        await env.client.get(AUTOSCALERS, f"{name}-b")

    # the Status names the field
    with pytest.raises(ApiError) as err:
        await env.client.create(AUTOSCALERS, autoscaler(env, f"{name}-b", name))
    assert err.value.status_code == 403
    assert [c.field for c in err.value.causes] == ["spec.nodePoolRef.name"]

    # editing the first (its reference unchanged) is admitted, and so is a second for
    # another pool; moving that one onto the taken pool is refused
    edited = await wh.apply(autoscaler(env, f"{name}-a", name, "x"))
    assert edited.returncode == 0, edited.stderr
    await env.create(NODEPOOLS, pool(env, f"{name}-other"))
    await env.create(AUTOSCALERS, autoscaler(env, f"{name}-b", f"{name}-other"))
    moved = await wh.apply(second)
    denied(moved, "vautoscaler", f"NodePool {name} is already scaled by Autoscaler {name}-a")
    scaler_b = await env.client.get(AUTOSCALERS, f"{name}-b")
    assert scaler_b["spec"]["nodePoolRef"]["name"] == f"{name}-other"

    # once the first is gone, the pool is free
    await env.client.delete(AUTOSCALERS, f"{name}-a")
    await env.eventually(lambda: _gone(env, f"{name}-a"), "the first Autoscaler to go")
    freed = await wh.apply(second)
    assert freed.returncode == 0, freed.stderr
    scaler_b = await env.client.get(AUTOSCALERS, f"{name}-b")
    assert scaler_b["spec"]["nodePoolRef"]["name"] == name


async def _gone(env: OperatorEnv, name: str, res: Resource = AUTOSCALERS) -> bool:
    try:
        await env.client.get(res, name)
    except NotFound:
        return True
    return False


async def test_a_pool_naming_a_missing_node_class_is_refused_naming_the_field(
    webhooked: Webhooked,
) -> None:
    wh = webhooked
    env = wh.env
    name = f"nc-{env.run_id}"
    assert [c.field for c in wh.probe.causes] == ["spec.nodeClassRef.name"]

    manifest = pool(env, name, name)
    refused = await wh.apply(manifest)
    denied(refused, "vnodepool", f"spec.nodeClassRef.name: AwsNodeClass {name} not found")
    with pytest.raises(NotFound):
        await env.client.get(NODEPOOLS, name)

    # once the class exists, the same apply is admitted
    await env.create(
        AWSNODECLASSES,
        {"apiVersion": AWSNODECLASSES.api_version, "kind": AWSNODECLASSES.kind,
         "metadata": {"name": name}, "spec": {"amiId": "ami-0123456789abcdef0"}},
    )  # fmt: skip
    admitted = await wh.apply(manifest)
    assert admitted.returncode == 0, admitted.stderr
    env.created.append((NODEPOOLS, name, None))

    # the class deleted later: the pool can still be edited (its reference unchanged)...
    await env.client.delete(AWSNODECLASSES, name)
    edited = {**pool(env, name, name)}
    edited["spec"]["targetNodes"] = 0
    edited["metadata"]["annotations"] = {"edited": "yes"}
    applied = await wh.apply(edited)
    assert applied.returncode == 0, applied.stderr
    # ...but not pointed at another missing class
    edited["spec"]["nodeClassRef"] = {"name": f"{name}-other"}
    moved = await wh.apply(edited)
    denied(moved, "vnodepool", f"spec.nodeClassRef.name: AwsNodeClass {name}-other not found")


async def test_without_the_webhook_a_missing_node_class_is_a_pool_condition(
    operator_env: OperatorEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """The fallback: no webhook configuration, the pool is stored, and the NodePool
    controller says why it launches nothing; it retries with backoff as a failure, not a
    crash (no traceback for a user's missing object)."""
    caplog.set_level(logging.WARNING, logger="kubeloop.controller")
    env = operator_env
    name = f"ncfall-{env.run_id}"
    created = await env.create(NODEPOOLS, {**pool(env, name, name), "spec": {
        "targetNodes": 1, "instanceType": "m5.large", "nodeClassRef": {"name": name}}})  # fmt: skip
    assert created["metadata"]["labels"][LABEL] == env.run_id
    await env.start(controllers=("nodepool",), kubelets=False)

    async def reported() -> dict[str, Any] | None:
        obj: Object = await env.client.get(NODEPOOLS, name)
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c.get("reason") == "NodeClassUnavailable"), None)

    cond = await env.eventually(reported, "a NodeClassUnavailable condition on the pool")
    assert cond is not None
    assert f"spec.nodeClassRef: AwsNodeClass {name!r} not found" in cond["message"]
    assert len(env.cloud.snapshot().instances) == 0, "nothing is launched without the class"

    def retries() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "retrying with backoff" in r.getMessage()]

    async def retried() -> bool:
        return bool(retries())

    await env.eventually(retried, "a retry with backoff")
    assert all("reconcile failed" in r.getMessage() and r.exc_info is None for r in retries()), [
        r.getMessage() for r in retries()
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_the_command_serves_the_webhook_with_webhook_port(
    operator_env: OperatorEnv, kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``nodepool-operator run --webhook-port N --webhook-cert-dir DIR`` as a process: the
    flags alone turn the webhook on (every interface, so 127.0.0.1 reaches it)."""
    env = operator_env
    ca, _pair = generate_serving_certificates(tmp_path / "certs", ["127.0.0.1"])
    port = free_port()
    log = (tmp_path / "operator.log").open("w")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodepool_operator",
        "run",
        f"--kubeconfig={kube_control_plane.kubeconfig}",
        f"--cloud-state={tmp_path / 'cloud.sqlite'}",
        "--no-simulated-kubelets",
        f"--label-selector={LABEL}={env.run_id}",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        f"--webhook-port={port}",
        f"--webhook-cert-dir={tmp_path / 'certs'}",
        stdout=log,
        stderr=log,
    )
    name = await install_webhook(env, f"https://127.0.0.1:{port}", ca.cert_pem)
    try:
        name_pool = f"cli-{env.run_id}"
        probe = await until_enforced(env, name_pool)
        assert probe.message.startswith(
            'admission webhook "vnodepool.kubeloop.dev" denied the request: '
            f"spec.nodeClassRef.name: AwsNodeClass {name_pool}-missing not found"
        )
        await env.create(NODEPOOLS, pool(env, name_pool))
        await env.create(AUTOSCALERS, autoscaler(env, f"{name_pool}-a", name_pool))
        refused = await kubectl(
            kube_control_plane,
            "apply",
            stdin=json.dumps(autoscaler(env, f"{name_pool}-b", name_pool)),
        )
        denied(
            refused,
            "vautoscaler",
            f"NodePool {name_pool} is already scaled by Autoscaler {name_pool}-a",
        )
        assert proc.returncode is None, "the operator is still running"
    finally:
        with contextlib.suppress(NotFound):
            await env.client.delete(VALIDATING_WEBHOOK_CONFIGURATIONS, name)
        # while the operator runs: it removes the finalizer it put on the pool
        await env.cleanup()
        await env.eventually(lambda: _gone(env, f"cli-{env.run_id}", NODEPOOLS), "the pool to go")
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=60)
        log.close()
    # SIGTERM: a graceful stop
    assert proc.returncode == 0, (tmp_path / "operator.log").read_text()[-2000:]
