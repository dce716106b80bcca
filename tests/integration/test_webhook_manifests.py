"""The webhook as config/default deploys it (config/webhook, config/certmanager and the two
Deployment patches in config/default): the pieces fit together (the Service's DNS names are in
the Certificate, the Secret it fills is what the Deployment mounts where the operator's
--webhook-cert-dir looks, the port the Service targets is the one the operator serves on, the
CA injection names the Certificate), they keep fitting when the overlay's namespace changes,
and the apiserver accepts them, cert-manager's Issuer and Certificate checked against
cert-manager's own CRDs (tools/certmanager/build.sh fetches them from its Go module)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import WebhookServerOptions
from kubeloop.envtest import ControlPlane
from nodepool_operator import manifests
from nodepool_operator.__main__ import _parser
from nodepool_operator.api import (
    AUTOSCALER,
    AUTOSCALER_CONVERSION_PATH,
    AWSNODECLASS,
    CUSTOM_RESOURCES,
    INSTANCE,
    INSTANCE_CONVERSION_PATH,
    NODEPOOL,
    NODEPOOL_CONVERSION_PATH,
)
from tests.integration.manifest_support import (
    ROOT,
    apply_dry_run,
    ensure_namespaces,
    install_cert_manager_crds,
    install_monitoring_crds,
    render_kustomize,
    server_side_dry_run,
)

pytestmark = pytest.mark.integration

NAMESPACE = "nodepool-system"


def one(docs: list[dict[str, Any]], kind: str, name_part: str = "") -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and name_part in d["metadata"]["name"]]
    return doc


def assert_webhook_wired(docs: list[dict[str, Any]], namespace: str) -> None:
    """Every reference between the webhook's objects lands on the rendered object."""
    issuer, cert = one(docs, "Issuer"), one(docs, "Certificate")
    service = one(docs, "Service", "webhook")
    config = one(docs, "ValidatingWebhookConfiguration")
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [manager] = pod["containers"]

    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    assert issuer["metadata"]["namespace"] == cert["metadata"]["namespace"] == namespace
    name = service["metadata"]["name"]
    assert service["metadata"]["namespace"] == namespace
    assert cert["spec"]["dnsNames"] == [
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    ]
    # cert-manager's CA injector fills each webhook's caBundle from this Certificate
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{namespace}/{cert['metadata']['name']}"
    )
    assert len(config["webhooks"]) == 2
    for hook in config["webhooks"]:
        assert hook["clientConfig"]["service"]["name"] == name
        assert hook["clientConfig"]["service"]["namespace"] == namespace
        assert "caBundle" not in hook["clientConfig"]  # cert-manager's to fill
    # the Service selects the manager's pods and targets the port the operator serves on
    assert service["spec"]["selector"].items() <= pod_labels(deployment).items()
    [port] = service["spec"]["ports"]
    [container_port] = [p for p in manager["ports"] if p["name"] == port["targetPort"]]
    args = vars(_parser().parse_args(manager["args"]))
    assert args["webhook_port"] == container_port["containerPort"] == 9443
    # the Secret cert-manager fills is mounted where the operator reads its certificate
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    [mount] = [m for m in manager["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert Path(mount["mountPath"]) == args["webhook_cert_dir"]
    # ... which is the operator's default, and kubeloop's in the pod's /tmp (controller-runtime's)
    assert args["webhook_cert_dir"] == _parser().parse_args(["run"]).webhook_cert_dir
    assert str(args["webhook_cert_dir"]) == "/tmp/k8s-webhook-server/serving-certs"
    assert str(WebhookServerOptions().cert_dir).endswith("/k8s-webhook-server/serving-certs")
    # and the files it reads there are the keys of cert-manager's Secret (kubernetes.io/tls)
    options = WebhookServerOptions()
    assert (options.cert_name, options.key_name) == ("tls.crt", "tls.key")
    # the apiserver may reach that port through the NetworkPolicies
    policy = one(docs, "NetworkPolicy", "webhook")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(deployment).items()
    assert policy["spec"]["ingress"] == [{"ports": [{"port": 9443, "protocol": "TCP"}]}]
    assert_conversion_wired(docs, service, cert)


def assert_conversion_wired(
    docs: list[dict[str, Any]], service: dict[str, Any], cert: dict[str, Any]
) -> None:
    """The CRDs serve v1beta1 by default, converted through the webhook's Service at the
    paths the operator serves, with the CA cert-manager injects from the webhook's Certificate;
    every CRD is the generator's but for the names the overlay moves."""
    crds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}
    generated = {c["metadata"]["name"]: c for c in manifests.webhook_install_crds()}
    assert crds.keys() == generated.keys() == {c.name for c in CUSTOM_RESOURCES}
    paths = {
        NODEPOOL.name: NODEPOOL_CONVERSION_PATH,
        AUTOSCALER.name: AUTOSCALER_CONVERSION_PATH,
        INSTANCE.name: INSTANCE_CONVERSION_PATH,
    }
    converted = {n for n, c in crds.items() if "conversion" in c["spec"]}
    assert converted == paths.keys()
    for crd_name in converted:
        crd = crds[crd_name]
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]
        assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
        )
        client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert client == {
            "service": {
                "name": service["metadata"]["name"],
                "namespace": service["metadata"]["namespace"],
                "path": paths[crd_name],
                "port": service["spec"]["ports"][0]["port"],
            }
        }  # no caBundle: cert-manager's to fill
        # apart from those names, what `make manifests` generates
        want = generated[crd_name]
        assert crd["spec"]["versions"] == want["spec"]["versions"]
        assert crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] == ["v1"]
    assert crds[AWSNODECLASS.name]["spec"] == generated[AWSNODECLASS.name]["spec"]


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def test_config_default_deploys_the_webhook_wired_together() -> None:
    docs = render_kustomize(ROOT / "config" / "default")
    assert_webhook_wired(docs, NAMESPACE)
    # the patches add to config/manager's Deployment, they replace nothing in it
    [manager] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [p["name"] for p in manager["ports"]] == ["webhook-server", "metrics", "health"]
    assert manager["args"][-1] == "--webhook-port=9443"
    assert "--leader-elect" in manager["args"]
    assert {m["name"] for m in manager["volumeMounts"]} == {"webhook-cert", "tmp"}


def test_another_namespace_in_config_default_moves_the_names_that_must_agree(
    tmp_path: Path,
) -> None:
    """Kubebuilder's replacements: the DNS names and the CA injection follow the namespace."""
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    overlay = config / "default" / "kustomization.yaml"
    text = overlay.read_text()
    assert "\nnamespace: nodepool-system\n" in text
    overlay.write_text(text.replace("\nnamespace: nodepool-system\n", "\nnamespace: np-prod\n"))
    docs = render_kustomize(config / "default")
    assert_webhook_wired(docs, "np-prod")
    assert "nodepool-system" not in yaml.safe_dump_all(docs)


def test_the_apiserver_accepts_the_webhook_objects_under_cert_managers_schema(
    kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    install_monitoring_crds(kube_control_plane)
    install_cert_manager_crds(kube_control_plane)
    ensure_namespaces(kube_control_plane, [NAMESPACE])
    docs = render_kustomize(ROOT / "config" / "default")
    lines = server_side_dry_run(kube_control_plane, docs, tmp_path)
    for kind in ("issuer", "certificate", "validatingwebhookconfiguration"):
        assert any(line.startswith(f"{kind}.") for line in lines), lines
    # the CRDs with their conversion stanza and cert-manager's annotation, accepted as well
    crds = [line for line in lines if line.startswith("customresourcedefinition.")]
    assert len(crds) == 4, lines

    # the schema check is cert-manager's: a Certificate it would refuse is refused, by field
    cert = one(docs, "Certificate")
    bad = {**cert, "spec": {**cert["spec"], "privateKey": {"algorithm": "DSA"}}}
    refused = tmp_path / "refused"
    refused.mkdir()
    result = apply_dry_run(kube_control_plane, [bad], refused)
    assert result.returncode != 0
    assert "spec.privateKey.algorithm" in result.stderr, result.stderr
