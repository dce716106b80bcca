"""config/webhook and config/certmanager: they render, fit together (the Service's DNS names
are in the Certificate, the Secret it fills is what the Deployment patch mounts where the
webhook server looks), and the apiserver accepts the Service, the NetworkPolicy and the
patched Deployment of config/default. cert-manager's own kinds are checked for shape only:
its CRDs are not installed in the test control plane."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from kubeloop import WebhookServerOptions
from kubeloop.envtest import ControlPlane
from tests.integration.manifest_support import (
    ROOT,
    ensure_namespaces,
    install_monitoring_crds,
    render_kustomize,
    server_side_dry_run,
)

pytestmark = pytest.mark.integration

NAMESPACE = "nodepool-system"


def test_certificate_covers_the_service_and_fills_the_mounted_secret() -> None:
    certs = {d["kind"]: d for d in render_kustomize(ROOT / "config" / "certmanager")}
    assert set(certs) == {"Issuer", "Certificate"}
    cert = certs["Certificate"]
    assert cert["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": certs["Issuer"]["metadata"]["name"],
    }
    webhook_docs = render_kustomize(ROOT / "config" / "webhook")
    [service] = [d for d in webhook_docs if d["kind"] == "Service"]
    # cert-manager's CA injector fills the configuration's caBundle from this Certificate
    [config] = [d for d in webhook_docs if d["kind"] == "ValidatingWebhookConfiguration"]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
    )
    name, ns = service["metadata"]["name"], service["metadata"]["namespace"]
    assert f"{name}.{ns}.svc" in cert["spec"]["dnsNames"]
    assert cert["metadata"]["namespace"] == ns == NAMESPACE

    patch = yaml.safe_load((ROOT / "config" / "webhook" / "manager_webhook_patch.yaml").read_text())
    pod = patch["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    [container] = pod["containers"]
    [mount] = container["volumeMounts"]
    assert mount["name"] == volume["name"]
    # where WebhookServerOptions.cert_dir looks by default, as controller-runtime does
    assert mount["mountPath"] == "/tmp/k8s-webhook-server/serving-certs"
    assert str(WebhookServerOptions().cert_dir).endswith("/k8s-webhook-server/serving-certs")
    [port] = container["ports"]
    assert port["name"] == service["spec"]["ports"][0]["targetPort"]
    assert port["containerPort"] == 9443  # WebhookServerOptions.bind_address's default


def test_the_apiserver_accepts_the_webhook_service_and_the_patched_deployment(
    kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    for patch in ("manager_webhook_patch.yaml", "manager_webhook_args_patch.yaml"):
        shutil.copy(ROOT / "config" / "webhook" / patch, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [
                    os.path.relpath(ROOT / "config" / part, overlay)
                    for part in ("default", "webhook")
                ],
                "patches": [
                    {"path": "manager_webhook_patch.yaml"},
                    {
                        "path": "manager_webhook_args_patch.yaml",
                        "target": {"kind": "Deployment", "name": "nodepool-operator"},
                    },
                ],
            }
        )
    )
    docs = render_kustomize(overlay)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [manager] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"} in manager["ports"]
    # the operator serves its webhook on that port (appended: the other flags stay)
    assert manager["args"][-1] == "--webhook-port=9443"
    assert "--leader-elect" in manager["args"]
    [config] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    [service] = [d for d in docs if d["kind"] == "Service" and "webhook" in d["metadata"]["name"]]
    for hook in config["webhooks"]:
        assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    assert any(
        v["name"] == "webhook-cert" for v in deployment["spec"]["template"]["spec"]["volumes"]
    )
    install_monitoring_crds(kube_control_plane)
    ensure_namespaces(kube_control_plane, [NAMESPACE])
    server_side_dry_run(kube_control_plane, docs, tmp_path)
