"""Webhooks end to end: the real kube-apiserver calls kubeloop's webhook server.

The server runs in a :class:`~kubeloop.Manager` on 127.0.0.1 with certificates from
:func:`~kubeloop.generate_serving_certificates`; webhook configurations and a CRD point
at it with ``clientConfig.url`` (as controller-runtime's envtest does) and get the CA
through :func:`~kubeloop.inject_ca_bundle`. Each configuration is scoped to the test's
namespace, so the session's other tests never meet it, and removed afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import importlib.util
import json
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from kubeloop import (
    CONFIGMAPS,
    CRDS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Admission,
    AdmissionRequest,
    ApiError,
    Cause,
    Client,
    Invalid,
    Manager,
    ManagerOptions,
    NotFound,
    Object,
    Registry,
    Request,
    Resource,
    Result,
    WebhookServer,
    WebhookServerOptions,
    generate_serving_certificates,
    inject_ca_bundle,
)
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually

pytestmark = pytest.mark.integration

GROUP = "webhooks.kubeloop.dev"
ALPHA = Resource(GROUP, "v1alpha1", "widgets", "Widget")
BETA = Resource(GROUP, "v1beta1", "widgets", "Widget")


# -- the handlers the apiserver calls ------------------------------------------------------
class Handlers:
    """What the test's webhooks do, and what they saw."""

    def __init__(self) -> None:
        self.seen: list[AdmissionRequest] = []
        self.slow_seconds = 3.0

    async def validate(self, req: AdmissionRequest) -> Admission | None:
        self.seen.append(req)
        if req.operation == "DELETE":
            assert req.object is None
            assert req.old_object is not None
            if req.old_object["metadata"].get("labels", {}).get("protected") == "true":
                return Admission.deny(f"{req.name} is protected: remove the label first")
            return None
        assert req.object is not None
        data = req.object.get("data") or {}
        if "crash" in data:
            raise KeyError("crash")
        if "forbidden" in data:
            return Admission.deny(
                "data.forbidden is not allowed in this namespace",
                Cause("FieldValueForbidden", "not allowed here", "data.forbidden"),
                code=422,
            )
        if "banned" in data:
            return Admission.deny(f"{req.name}: data.banned is banned by policy")
        if "deprecated" in data:
            return Admission.allow("data.deprecated is deprecated: use data.current")
        return None

    def mutate(self, req: AdmissionRequest, obj: Object) -> None:
        self.seen.append(req)
        labels = obj.setdefault("metadata", {}).setdefault("labels", {})
        labels["mutated"] = "true"
        if req.operation == "UPDATE":
            assert req.old_object is not None
            labels["previous-version"] = req.old_object["metadata"]["resourceVersion"]
        obj.setdefault("data", {}).pop("secret-ish", None)

    async def slow(self, req: AdmissionRequest) -> None:
        await asyncio.sleep(self.slow_seconds)


def load_example() -> ModuleType:
    """docs/webhooks.md's example module: its converter is the one the apiserver calls here."""
    path = Path(__file__).resolve().parents[2] / "examples" / "webhooks" / "widget_webhooks.py"
    spec = importlib.util.spec_from_file_location("widget_webhooks_example", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = load_example()
TIER_ANNOTATION = EXAMPLE.TIER


# -- the bed: a manager serving the webhooks, and configurations pointing at it ---------
class Bed:
    def __init__(self, cp: ControlPlane, client: Client, ns: str, cert_dir: Path) -> None:
        self.cp, self.client, self.ns, self.cert_dir = cp, client, ns, cert_dir
        self.handlers = Handlers()
        self.registry = Registry()
        self.ca, self.pair = generate_serving_certificates(cert_dir, ["127.0.0.1"])
        self.mgr = Manager(
            client,
            ManagerOptions(
                metrics_bind_address="127.0.0.1:0",
                health_probe_bind_address="127.0.0.1:0",
                handle_signals=False,
                registry=self.registry,
            ),
        )
        self.server: WebhookServer = self.mgr.webhook_server(
            WebhookServerOptions(
                bind_address="127.0.0.1:0", cert_dir=cert_dir, cert_reload_interval=0.2
            )
        )
        self.server.add_validating("/validate", self.handlers.validate)
        self.server.add_mutating("/mutate", self.handlers.mutate)
        self.server.add_validating("/slow", self.handlers.slow)
        self.server.add_conversion("/convert", EXAMPLE.widgets)
        self.configs: list[tuple[Resource, str]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.mgr.run())
        await eventually(lambda: self.server.address is not None, "the webhook server listens")

    async def stop(self) -> None:
        if self.task is not None:
            self.mgr.stop()
            await self.task
            self.task = None

    async def configure(
        self,
        res: Resource,
        path: str,
        *,
        operations: tuple[str, ...] = ("CREATE", "UPDATE"),
        failure_policy: str = "Fail",
        timeout_seconds: int = 10,
        url: str | None = None,
    ) -> str:
        """A webhook configuration for ConfigMaps in the test namespace, calling ``path``;
        its caBundle comes from inject_ca_bundle."""
        name = f"kubeloop-test-{uuid.uuid4().hex[:8]}"
        webhook: dict[str, Any] = {
            "name": f"{path.strip('/')}.{GROUP}",
            "clientConfig": {"url": url or self.server.url(path)},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": list(operations),
                    "resources": ["configmaps"],
                    "scope": "Namespaced",
                }
            ],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": timeout_seconds,
        }
        await self.client.create(
            res,
            {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"name": name},
             "webhooks": [webhook]},
        )  # fmt: skip
        self.configs.append((res, name))
        kind = "validating" if res is VALIDATING_WEBHOOK_CONFIGURATIONS else "mutating"
        await inject_ca_bundle(self.client, self.ca.cert_pem, **{kind: [name]})
        return name

    async def cleanup(self) -> None:
        for res, name in self.configs:
            with contextlib.suppress(NotFound):
                await self.client.delete(res, name)

    def configmap(self, name: str, **data: str) -> Object:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}

    def requests(self, path: str, code: str) -> float:
        return self.server.metrics.requests_total.labels(path, code).value


@pytest.fixture
async def bed(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str, tmp_path: Path
) -> AsyncIterator[Bed]:
    bed = Bed(kube_control_plane, kube_client, kube_namespace, tmp_path / "certs")
    await bed.start()
    try:
        yield bed
    finally:
        await bed.cleanup()
        await bed.stop()


async def until_enforced(bed: Bed, probe: Object) -> ApiError:
    """The apiserver picks up a new configuration (and then its caBundle) a moment after
    it is written: create ``probe`` (which the webhook refuses) until our webhook refuses
    it; return the refusal."""
    refused: list[ApiError] = []

    async def attempt() -> bool:
        try:
            await bed.client.create(CONFIGMAPS, dict(probe), bed.ns)
        except ApiError as err:
            # before the injected caBundle reaches the apiserver, calls fail on x509
            if "denied the request" not in err.message:
                return False
            refused.append(err)
            return True
        await bed.client.delete(CONFIGMAPS, probe["metadata"]["name"], bed.ns)
        return False

    await eventually(attempt, "the webhook configuration is enforced", timeout=30)
    return refused[-1]


def kubectl(
    cp: ControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert cp.assets is not None
    assert cp.assets.kubectl is not None
    return subprocess.run(
        [str(cp.assets.kubectl), f"--kubeconfig={cp.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def served_serial(server: WebhookServer) -> int:
    """The serial number of the certificate the server presents to a new TLS client."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    assert server.address is not None
    _reader, writer = await asyncio.open_connection(*server.address, ssl=ctx)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


# -- the tests ---------------------------------------------------------------------------
async def test_validating_webhook_denies_with_our_message(bed: Bed) -> None:
    await bed.configure(
        VALIDATING_WEBHOOK_CONFIGURATIONS, "/validate", operations=("CREATE", "UPDATE", "DELETE")
    )
    err = await until_enforced(bed, bed.configmap("probe", forbidden="x"))

    # the client sees our message, our code (422: Invalid) and our field cause
    assert isinstance(err, Invalid), err
    assert 'admission webhook "validate.webhooks.kubeloop.dev" denied the request' in err.message
    assert "data.forbidden is not allowed in this namespace" in err.message
    assert [(c.field, c.message) for c in err.causes] == [("data.forbidden", "not allowed here")]
    with pytest.raises(NotFound):
        await bed.client.get(CONFIGMAPS, "probe", bed.ns)

    # and so does kubectl: for a 422 it prints the field causes, otherwise the message
    manifest = json.dumps(bed.configmap("by-kubectl", forbidden="x"))
    out = await asyncio.to_thread(
        kubectl, bed.cp, "-n", bed.ns, "create", "-f", "-", stdin=manifest
    )
    assert out.returncode != 0
    assert out.stderr == "The request is invalid: data.forbidden: not allowed here\n"
    manifest = json.dumps(bed.configmap("by-kubectl", banned="x"))
    out = await asyncio.to_thread(
        kubectl, bed.cp, "-n", bed.ns, "create", "-f", "-", stdin=manifest
    )
    assert out.returncode != 0
    assert out.stderr.startswith("Error from server (Forbidden)"), out.stderr
    assert (
        'admission webhook "validate.webhooks.kubeloop.dev" denied the request: '
        "by-kubectl: data.banned is banned by policy"
    ) in out.stderr
    # a warning reaches kubectl's stderr on an allowed create
    manifest = json.dumps(bed.configmap("warned", deprecated="x"))
    out = await asyncio.to_thread(
        kubectl, bed.cp, "-n", bed.ns, "create", "-f", "-", stdin=manifest
    )
    assert out.returncode == 0, out.stderr
    assert "Warning: data.deprecated is deprecated: use data.current" in out.stderr

    # dryRun and the user reach the handler; nothing is stored on a dry run
    bed.handlers.seen.clear()
    manifest = json.dumps(bed.configmap("dry", ok="1"))
    out = await asyncio.to_thread(
        kubectl, bed.cp, "-n", bed.ns, "create", "--dry-run=server", "-f", "-", stdin=manifest
    )
    assert out.returncode == 0, out.stderr
    [dry] = [r for r in bed.handlers.seen if r.name == "dry"]
    assert dry.dry_run is True
    assert dry.operation == "CREATE"
    assert dry.user.username == "admin"
    assert "system:masters" in dry.user.groups
    with pytest.raises(NotFound):
        await bed.client.get(CONFIGMAPS, "dry", bed.ns)

    # the old object on DELETE: a protected ConfigMap cannot be deleted
    protected = bed.configmap("keep")
    protected["metadata"]["labels"] = {"protected": "true"}
    await bed.client.create(CONFIGMAPS, protected, bed.ns)
    with pytest.raises(ApiError, match="keep is protected: remove the label first"):
        await bed.client.delete(CONFIGMAPS, "keep", bed.ns)
    await bed.client.patch(
        CONFIGMAPS, "keep", {"metadata": {"labels": {"protected": None}}}, bed.ns
    )
    await bed.client.delete(CONFIGMAPS, "keep", bed.ns)

    # a handler that raises is a clear denial (no 500): the error is named
    with pytest.raises(ApiError) as crashed:
        await bed.client.create(CONFIGMAPS, bed.configmap("boom", crash="1"), bed.ns)
    assert crashed.value.status_code == 403
    assert "webhook /validate failed: KeyError: 'crash'" in crashed.value.message

    # per-webhook metrics, controller-runtime's names, on the manager's registry
    assert bed.requests("/validate", "200") >= 6
    assert bed.requests("/validate", "500") == 0
    assert bed.server.metrics.requests_in_flight.labels("/validate").value == 0
    text = bed.registry.render()
    assert 'controller_runtime_webhook_requests_total{code="200",webhook="/validate"}' in text
    assert 'controller_runtime_webhook_latency_seconds_count{webhook="/validate"}' in text


async def test_mutating_webhook_patch_is_applied(bed: Bed) -> None:
    await bed.configure(MUTATING_WEBHOOK_CONFIGURATIONS, "/mutate")

    async def mutated() -> bool:
        name = f"m-{uuid.uuid4().hex[:6]}"
        try:
            created = await bed.client.create(CONFIGMAPS, bed.configmap(name, a="1"), bed.ns)
        except ApiError:  # the injected caBundle has not reached the apiserver yet
            return False
        return (created["metadata"].get("labels") or {}).get("mutated") == "true"

    await eventually(mutated, "the mutating webhook is called", timeout=30)

    created = await bed.client.create(
        CONFIGMAPS, bed.configmap("cm", a="1", **{"secret-ish": "x"}), bed.ns
    )
    stored = await bed.client.get(CONFIGMAPS, "cm", bed.ns)
    assert stored["metadata"]["labels"] == {"mutated": "true"}
    assert stored["data"] == {"a": "1"}  # the handler's removal is in the patch too
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    # UPDATE: the handler sees the old object and records its resourceVersion
    stored["data"]["b"] = "2"
    updated = await bed.client.update(CONFIGMAPS, stored)
    assert updated["metadata"]["labels"] == {
        "mutated": "true",
        "previous-version": stored["metadata"]["resourceVersion"],
    }
    assert (await bed.client.get(CONFIGMAPS, "cm", bed.ns))["data"] == {"a": "1", "b": "2"}


async def test_conversion_round_trip_keeps_fields(bed: Bed) -> None:
    def version(name: str, spec: dict[str, Any], storage: bool) -> dict[str, Any]:
        return {
            "name": name,
            "served": True,
            "storage": storage,
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": spec}},
                }
            },
        }

    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                version("v1alpha1", {"size": {"type": "integer"}}, storage=False),
                version(
                    "v1beta1",
                    {"replicas": {"type": "integer"}, "tier": {"type": "string"}},
                    storage=True,
                ),
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": bed.server.url("/convert")},
                },
            },
        },
    }
    await asyncio.to_thread(bed.cp.install_crds, [crd])
    await inject_ca_bundle(bed.client, bed.ca.cert_pem, crds=[crd["metadata"]["name"]])
    try:
        stored_bundle = (await bed.client.get(CRDS, crd["metadata"]["name"]))["spec"]["conversion"]
        assert (
            stored_bundle["webhook"]["clientConfig"]["caBundle"]
            == base64.b64encode(bed.ca.cert_pem).decode()
        )
        alpha = {
            "apiVersion": ALPHA.api_version,
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
        }

        async def created() -> bool:
            try:
                await bed.client.create(ALPHA, dict(alpha), bed.ns)
            except ApiError:  # until the apiserver trusts the injected CA
                return False
            return True

        await eventually(created, "a Widget is created as v1alpha1", timeout=30)

        # stored as the hub: read as v1beta1
        beta = await bed.client.get(BETA, "w", bed.ns)
        assert beta["apiVersion"] == BETA.api_version
        assert beta["spec"] == {"replicas": 3}

        # a field v1alpha1 cannot hold survives a round trip through v1alpha1
        await bed.client.patch(BETA, "w", {"spec": {"tier": "gold"}}, bed.ns)
        as_alpha = await bed.client.get(ALPHA, "w", bed.ns)
        assert as_alpha["spec"] == {"size": 3}
        assert as_alpha["metadata"]["annotations"] == {TIER_ANNOTATION: "gold"}
        as_alpha["spec"]["size"] = 5
        await bed.client.update(ALPHA, as_alpha)
        beta = await bed.client.get(BETA, "w", bed.ns)
        assert beta["spec"] == {"replicas": 5, "tier": "gold"}
        assert TIER_ANNOTATION not in (beta["metadata"].get("annotations") or {})
        # and back again
        assert (await bed.client.get(ALPHA, "w", bed.ns))["spec"] == {"size": 5}
        assert bed.requests("/convert", "200") >= 4
    finally:
        with contextlib.suppress(NotFound):
            await bed.client.delete(CRDS, crd["metadata"]["name"])


async def test_webhook_down_fail_refuses_and_ignore_admits(bed: Bed) -> None:
    name = await bed.configure(VALIDATING_WEBHOOK_CONFIGURATIONS, "/validate")
    await until_enforced(bed, bed.configmap("probe", forbidden="x"))
    await bed.stop()  # the webhook server is down now

    async def refused() -> ApiError | None:
        try:
            await bed.client.create(CONFIGMAPS, bed.configmap(f"d-{uuid.uuid4().hex[:6]}"), bed.ns)
        except ApiError as err:
            return err
        return None

    err = await refused()
    assert err is not None, "failurePolicy Fail let a write through with the webhook down"
    assert 'failed calling webhook "validate.webhooks.kubeloop.dev"' in err.message
    # a new connection is refused; a kept-alive one the server closed ends in EOF
    assert err.message.endswith(("connect: connection refused", ": EOF")), err.message

    config = await bed.client.get(VALIDATING_WEBHOOK_CONFIGURATIONS, name)
    config["webhooks"][0]["failurePolicy"] = "Ignore"
    await bed.client.update(VALIDATING_WEBHOOK_CONFIGURATIONS, config)
    await eventually(lambda: _is_none(refused()), "failurePolicy Ignore admits writes", timeout=30)
    # and the webhook's own rule is not applied: nobody is there to apply it
    await bed.client.create(CONFIGMAPS, bed.configmap("unchecked", forbidden="x"), bed.ns)


async def _is_none(value: Any) -> bool:
    return (await value) is None


async def test_rotated_certificate_is_served_without_restart(bed: Bed) -> None:
    await bed.configure(VALIDATING_WEBHOOK_CONFIGURATIONS, "/validate")
    await until_enforced(bed, bed.configmap("probe", forbidden="x"))
    assert await served_serial(bed.server) == bed.pair.serial
    address = bed.server.address

    # cert-manager renews: a new CA and certificate land in the watched directory
    new_ca, new_pair = generate_serving_certificates(bed.cert_dir, ["127.0.0.1"])
    assert new_pair.serial != bed.pair.serial

    async def serving_new() -> bool:
        return await served_serial(bed.server) == new_pair.serial

    await eventually(serving_new, "the new certificate is served", timeout=30)
    assert bed.server.cert_watcher.reloads == 1
    assert bed.server.address == address
    assert bed.task is not None
    assert not bed.task.done()

    # only the new CA is trusted from now on: the apiserver's calls succeed with it
    [(_, name)] = bed.configs
    await inject_ca_bundle(bed.client, new_ca.cert_pem, validating=[name])
    bed.handlers.seen.clear()

    async def called_with_new_ca() -> bool:
        probe = f"r-{uuid.uuid4().hex[:6]}"
        try:
            await bed.client.create(CONFIGMAPS, bed.configmap(probe), bed.ns)
        except ApiError:  # the old caBundle may still be in use for a moment
            return False
        return any(r.name == probe for r in bed.handlers.seen)

    await eventually(called_with_new_ca, "a call verified against the new CA", timeout=30)
    err = await until_enforced(bed, bed.configmap("probe2", forbidden="x"))
    assert "data.forbidden is not allowed" in err.message


async def test_slow_handler_hits_the_webhook_timeout(bed: Bed) -> None:
    await bed.configure(VALIDATING_WEBHOOK_CONFIGURATIONS, "/slow", timeout_seconds=1)
    before = bed.requests("/slow", "200")

    async def timed_out() -> str | None:
        try:
            await bed.client.create(CONFIGMAPS, bed.configmap(f"s-{uuid.uuid4().hex[:6]}"), bed.ns)
        except ApiError as err:
            return err.message
        return None

    messages: list[str] = []

    async def refused() -> bool:
        message = await timed_out()
        if message is not None:
            messages.append(message)
        # an x509 error: the injected caBundle has not reached the apiserver yet
        return message is not None and "x509" not in message

    await eventually(refused, "the slow webhook refuses the write", timeout=30)
    # the apiserver's words: an internal error naming the webhook, its URL with the
    # timeout it passed (?timeout=1s) and the deadline
    message = messages[-1]
    assert message.startswith(
        'Internal error occurred: failed calling webhook "slow.webhooks.kubeloop.dev": '
        f'failed to call webhook: Post "{bed.server.url("/slow")}?timeout=1s": '
    ), message
    assert message.endswith("context deadline exceeded"), message
    # our handler did finish later, answering a client that had gone
    await eventually(
        lambda: bed.requests("/slow", "200") > before, "the slow handler finished", timeout=10
    )


async def test_a_standby_serves_webhooks(
    kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    """The apiserver calls whichever replica the Service picks: the webhook server runs
    while the manager waits for a lease another replica holds."""
    ns = kube_namespace
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await kube_client.create(
        LEASES,
        {
            "metadata": {"name": "widgets-leader"},
            "spec": {
                "holderIdentity": "the-other-replica",
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
            },
        },
        ns,
    )
    ca, _ = generate_serving_certificates(tmp_path, ["127.0.0.1"])
    mgr = Manager(
        kube_client,
        ManagerOptions(
            name="widgets",
            leader_election=True,
            leader_election_namespace=ns,
            identity="this-replica",
            metrics_bind_address="0",
            health_probe_bind_address="127.0.0.1:0",
            handle_signals=False,
            registry=Registry(),
        ),
    )
    reconciled: list[str] = []

    async def reconcile(req: Request) -> Result:
        reconciled.append(req.name)
        return Result()

    mgr.controller("leader-only").for_(CONFIGMAPS).complete(reconcile)
    server = mgr.webhook_server(WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path))
    server.add_validating("/validate", Handlers().validate)
    task = asyncio.get_running_loop().create_task(mgr.run())
    try:
        await eventually(lambda: server.address is not None, "the standby's webhook server")
        await eventually(lambda: mgr.elector is not None, "the election has begun")
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "standby-1",
                "operation": "CREATE",
                "name": "cm",
                "namespace": ns,
                "object": {"metadata": {"name": "cm"}, "data": {"forbidden": "x"}},
            },
        }
        tls = ssl.create_default_context(cadata=ca.cert_pem.decode())
        async with (
            aiohttp.ClientSession() as http,
            http.post(server.url("/validate"), json=review, ssl=tls) as resp,
        ):
            assert resp.status == 200
            answer = (await resp.json())["response"]
        assert answer["uid"] == "standby-1"
        assert answer["allowed"] is False
        assert answer["status"]["message"] == "data.forbidden is not allowed in this namespace"
        assert mgr.elector is not None
        assert not mgr.elector.is_leader
        assert reconciled == []  # the leader-only controller did not start
        ready = mgr.endpoints.url("probes") + "/readyz"
        async with aiohttp.ClientSession() as http, http.get(ready) as resp:
            assert "[+]webhook ok" in await resp.text()
    finally:
        mgr.stop()
        await task
