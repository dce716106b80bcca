"""The webhook server without an apiserver: what it answers to reviews that no apiserver
would send (malformed ones), the patch it computes, conversion through the hub, and
how it loads and refuses certificates. Real HTTPS on loopback, verified against the
generated CA; the apiserver's side is in tests/integration/test_webhooks.py."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubeloop import (
    Admission,
    AdmissionRequest,
    CertificateError,
    CertWatcher,
    ClusterConfig,
    ConversionError,
    Converter,
    Manager,
    ManagerOptions,
    Object,
    Registry,
    WebhookServer,
    WebhookServerOptions,
    generate_serving_certificates,
)
from kubeloop._client import Client
from kubeloop.webhook._admission import json_patch


def review(obj: Object | None, *, operation: str = "CREATE", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": operation,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm",
            "namespace": "ns",
            "object": obj,
            "userInfo": {"username": "alice", "groups": ["devs"]},
            **extra,
        },
    }


class Served:
    def __init__(self, server: WebhookServer, ca_pem: bytes) -> None:
        self.server = server
        self.ssl = ssl.create_default_context(cadata=ca_pem.decode())

    async def post(self, path: str, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                self.server.url(path),
                data=data,
                headers={"Content-Type": "application/json"},
                ssl=self.ssl,
            ) as resp,
        ):
            text = await resp.text()
            return resp.status, (json.loads(text) if resp.status == 200 else text)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    ca, _ = generate_serving_certificates(tmp_path)
    server = WebhookServer(
        WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path), registry=Registry()
    )

    def validate(req: AdmissionRequest) -> Admission | None:
        assert req.object is not None
        if req.object.get("data", {}).get("bad"):
            return Admission.deny("bad data", code=422)
        if req.object.get("data", {}).get("crash"):
            raise RuntimeError("handler bug")
        return None

    async def mutate(req: AdmissionRequest, obj: Object) -> None:
        obj["metadata"].setdefault("labels", {})["app.kubernetes.io/name"] = "x"
        obj["data"].pop("drop", None)
        obj["data"]["user"] = req.user.username

    conv = Converter(hub="v2")

    @conv.to_hub("v1")
    def v1_to_v2(obj: Object) -> Object:
        return {**obj, "spec": {"count": obj["spec"]["n"]}}

    @conv.from_hub("v1")
    def v2_to_v1(obj: Object) -> Object:
        return {**obj, "spec": {"n": obj["spec"]["count"]}}

    @conv.to_hub("v3")
    def v3_to_v2(obj: Object) -> Object:
        return {**obj, "spec": {"count": int(obj["spec"]["total"])}}

    @conv.from_hub("v3")
    def v2_to_v3(obj: Object) -> Object:
        return {**obj, "spec": {"total": str(obj["spec"]["count"])}}

    server.add_validating("/validate", validate)
    server.add_mutating("/mutate", mutate)
    server.add_conversion("/convert", conv)
    await server.start()
    try:
        yield Served(server, ca.cert_pem)
    finally:
        await server.stop()


async def test_validation_answers_and_counts(served: Served) -> None:
    status, body = await served.post("/validate", review({"data": {}}))
    assert status == 200
    assert body["response"] == {"uid": "u-1", "allowed": True}

    status, body = await served.post("/validate", review({"data": {"bad": "1"}}))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"] == {
        "status": "Failure",
        "code": 422,
        "reason": "Invalid",
        "message": "bad data",
    }

    # a handler bug is a denial naming the webhook, inside an HTTP 200
    status, body = await served.post("/validate", review({"data": {"crash": "1"}}))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        "webhook /validate failed: RuntimeError: handler bug"
    )
    assert body["response"]["status"]["code"] == 403

    metrics = served.server.metrics
    assert metrics.requests_total.labels("/validate", "200").value == 3
    assert metrics.requests_total.labels("/validate", "400").value == 0
    assert metrics.latency_seconds.labels("/validate").count == 3
    assert metrics.requests_in_flight.labels("/validate").value == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"not json", "request body is not JSON"),
        (b"[]", "an AdmissionReview must be a JSON object"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
            "expected apiVersion admission.k8s.io/v1 kind AdmissionReview",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "AdmissionReview.request is missing",
        ),
        (json.dumps(review({}, operation="PATCH")), "operation 'PATCH' is not known"),
        (
            json.dumps(review(None, object=[])),
            "request.object must be an object or null, got list",
        ),
    ],
)
async def test_a_malformed_review_gets_400_with_a_message(
    served: Served, raw: str | bytes, expected: str
) -> None:
    data = raw.encode() if isinstance(raw, str) else raw
    status, text = await served.post("/validate", None, raw=data)
    assert status == 400
    assert expected in text
    assert served.server.metrics.requests_total.labels("/validate", "400").value == 1


async def test_mutation_answers_with_the_json_patch_of_the_copy(served: Served) -> None:
    obj = {"metadata": {"name": "cm"}, "data": {"keep": "1", "drop": "2"}}
    status, body = await served.post("/mutate", review(obj))
    response = body["response"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    # "/" in a label key is escaped as ~1 (RFC 6901)
    assert sorted(patch, key=lambda op: op["path"]) == [
        {"op": "remove", "path": "/data/drop"},
        {"op": "add", "path": "/data/user", "value": "alice"},
        {"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/name": "x"}},
    ]
    # DELETE carries no object: nothing to patch
    status, body = await served.post("/mutate", review(None, operation="DELETE", oldObject=obj))
    assert status == 200
    assert "patch" not in body["response"]


def test_json_patch_escapes_pointer_characters() -> None:
    before = {"metadata": {"labels": {"a/b": "1", "c~d": "2"}}, "list": [1, 2]}
    after = {"metadata": {"labels": {"a/b": "3", "c~d": "2"}}, "list": [1, 2, 3]}
    assert json_patch(before, after) == [
        {"op": "replace", "path": "/metadata/labels/a~1b", "value": "3"},
        {"op": "add", "path": "/list/2", "value": 3},
    ]
    assert json_patch(before, before) == []


def conversion_review(desired: str, *objects: Object) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": desired, "objects": list(objects)},
    }


def widget(version: str, spec: dict[str, Any]) -> Object:
    return {"apiVersion": f"g.dev/{version}", "kind": "W", "metadata": {"name": "w"}, "spec": spec}


async def test_conversion_goes_through_the_hub(served: Served) -> None:
    # spoke to spoke: v1 -> hub v2 -> v3
    status, body = await served.post(
        "/convert",
        conversion_review("g.dev/v3", widget("v1", {"n": 4}), widget("v2", {"count": 5})),
    )
    assert status == 200
    assert body["response"]["result"] == {"status": "Success"}
    assert body["response"]["uid"] == "c-1"
    assert body["response"]["convertedObjects"] == [
        widget("v3", {"total": "4"}),
        widget("v3", {"total": "5"}),
    ]
    # a version nobody registered fails the whole review, naming the object and version
    status, body = await served.post(
        "/convert", conversion_review("g.dev/v1", widget("v1", {"n": 1}), widget("v9", {}))
    )
    assert body["response"]["result"]["status"] == "Failure"
    assert body["response"]["convertedObjects"] == []
    assert body["response"]["result"]["message"] == (
        "converting W /w to g.dev/v1: no conversion to hub v2 for version v9 (known: v2, v1, v3)"
    )
    status, text = await served.post("/convert", {"kind": "ConversionReview"})
    assert status == 400
    assert "expected apiVersion apiextensions.k8s.io/v1" in text


def test_converter_refuses_bad_registrations_and_groups() -> None:
    conv = Converter(hub="v1")
    with pytest.raises(ValueError, match="that is the hub version itself"):
        conv.to_hub("v1")
    with pytest.raises(ValueError, match="hub must be a version name"):
        Converter(hub="g.dev/v1")
    with pytest.raises(ConversionError, match="another group"):
        conv.convert(widget("v1", {}), "other.dev/v1")


def test_admission_deny_needs_a_message_and_an_error_code() -> None:
    with pytest.raises(ValueError, match="needs a message"):
        Admission.deny("")
    with pytest.raises(ValueError, match="not an HTTP error code"):
        Admission.deny("no", code=200)


async def test_missing_certificate_fails_start_with_a_clear_error(tmp_path: Path) -> None:
    server = WebhookServer(
        WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path), registry=Registry()
    )
    with pytest.raises(CertificateError, match=r"no serving certificate at .*tls\.crt"):
        await server.start()
    assert server.address is None


async def test_manager_run_refuses_to_start_without_a_certificate(tmp_path: Path) -> None:
    client = Client(ClusterConfig("https://127.0.0.1:1"), qps=None)
    mgr = Manager(
        client,
        ManagerOptions(
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            handle_signals=False,
            registry=Registry(),
        ),
    )
    server = mgr.webhook_server(WebhookServerOptions(bind_address="127.0.0.1:0", cert_dir=tmp_path))
    assert mgr.webhook_server() is server
    assert mgr.endpoints.readyz["webhook"]() == "webhook server not started"
    with pytest.raises(CertificateError):
        await mgr.run()
    assert mgr.endpoints._runners == []  # no port left open
    await client.close()


def test_cert_watcher_keeps_the_last_good_pair(tmp_path: Path) -> None:
    _, first = generate_serving_certificates(tmp_path)
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key", interval=1)
    assert watcher.load() is True
    assert watcher.load() is False  # unchanged files: nothing reloaded
    # a key that does not match the certificate (half a rotation) is refused
    _, other = generate_serving_certificates(tmp_path / "other")
    (tmp_path / "tls.key").write_bytes(other.key_pem)
    with pytest.raises(CertificateError, match="not a usable certificate and key"):
        watcher.load()
    assert watcher.reloads == 0
    (tmp_path / "tls.crt").write_bytes(other.cert_pem)
    assert watcher.load() is True
    assert watcher.reloads == 1
    assert first.serial != other.serial


def test_generating_certificates_without_cryptography_names_the_extra(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.modules['cryptography'] = None\n"
        "import kubeloop\n"
        "kubeloop.generate_serving_certificates(sys.argv[1])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: kubeloop makes certificates with the cryptography package: "
        "pip install 'kubeloop[testing]' (in production, serve the certificate "
        "cert-manager mounts instead)"
    )
