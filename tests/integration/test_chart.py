"""The Helm chart (charts/nodepool-operator): `helm lint`, `helm template` with the default values
and with a non-default set, a server-side dry run of what it renders against the real apiserver
(as the kustomize overlay gets in test_deploy.py), and the chart kept in step with config/.

"In step" is checked object by object: with its default values the chart renders what
config/default renders (the validating webhook with cert-manager's Issuer and Certificate
included), apart from Helm's labels and the Namespace (Helm's --create-namespace makes it).
config/default's CRDs serve v1beta1 through the webhook; the chart renders those with
crds.conversion (templates, from files/crds), while its crds/ stays v1alpha1-only, as
config/crd (`make manifests` writes all of them from one generator, and
tests/unit/nodepool_operator pins the text). The operator's arguments are compared as
the operator's own
parser reads them, so a flag spelled another way but meaning the same passes, and a flag the
operator does not know fails.

helm comes from the Go module proxy through tools/helm/build.sh, built once and cached;
cert-manager's CRDs, which the dry run and the install need for the Issuer and Certificate,
through tools/certmanager/build.sh.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import generate_serving_certificates
from kubeloop.envtest import ControlPlane, ControlPlaneOptions
from kubeloop.envtest._rest import RestError
from nodepool_operator.__main__ import _parser
from nodepool_operator.api import crds
from tests.integration.manifest_support import (
    ROOT,
    ensure_namespaces,
    helm,
    install_cert_manager_crds,
    install_monitoring_crds,
    kubectl,
    load_docs,
    render_kustomize,
    server_side_dry_run,
)

pytestmark = [pytest.mark.integration, pytest.mark.release]

CHART = ROOT / "charts" / "nodepool-operator"
NAMESPACE = "nodepool-system"
# Labels Helm charts put on everything (and kustomize's part-of): not part of the comparison.
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
}
# Everything a user of AWS would change, and every optional object on.
AWS_VALUES: dict[str, Any] = {
    "image": {"repository": "registry.example.com/np", "tag": "v9"},
    "replicaCount": 3,
    "cloud": {
        "name": "aws",
        "aws": {
            "region": "eu-west-1",
            "instanceTypes": ["m5.large", "m5.xlarge"],
            "endpointUrl": "https://ec2.eu-west-1.amazonaws.com",
            "credentialsSecret": "aws-credentials",
            "interruptionQueue": "my-cluster-interruptions",
        },
    },
    "leaderElection": {"namespace": "nodepool-leases"},
    "serviceAccount": {
        "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/np"}
    },
    "operator": {
        "labelSelector": "shard in (a,b)",
        "registrationTimeoutSeconds": 600,
        "maxNodeProvisionSeconds": 1200,
        "imageResolveSeconds": 60,
        "logLevel": "debug",
        "installCRDs": True,
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
}
AWS_RELEASE = "np"
AWS_NAMESPACE = "operators"


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm()), *args], capture_output=True, text=True, timeout=120, check=False
    )


def values_file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def template(
    *args: str, release: str = "nodepool-operator", namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    result = run_helm("template", release, str(CHART), "--namespace", namespace, *args)
    assert result.returncode == 0, result.stderr
    return load_docs(result.stdout)


def by_kind_and_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    index = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(index) == len(docs), "two objects share a kind and name"
    return index


def without_helm_labels(node: Any) -> Any:
    """``node`` with Helm's labels dropped from every mapping (metadata, selectors, affinity),
    and a ``labels`` left empty by that dropped too."""
    if isinstance(node, dict):
        kept = {k: without_helm_labels(v) for k, v in node.items() if k not in HELM_LABELS}
        return {k: v for k, v in kept.items() if not (k == "labels" and v == {})}
    if isinstance(node, list):
        return [without_helm_labels(v) for v in node]
    return node


def operator_args(deployment: dict[str, Any]) -> dict[str, Any]:
    """The container's arguments as `nodepool-operator` parses them (exits on an unknown flag)."""
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["nodepool-operator"]
    return vars(_parser().parse_args(container["args"]))


# Helm's own annotation: a templated CRD (and so every NodePool) stays on `helm uninstall`.
KEEP = "helm.sh/resource-policy"


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = without_helm_labels(doc)
    annotations = out["metadata"].get("annotations") or {}
    if annotations.pop(KEEP, None) and not annotations:
        del out["metadata"]["annotations"]
    if doc["kind"] == "Deployment":
        [container] = out["spec"]["template"]["spec"]["containers"]
        container["args"] = operator_args(doc)
    return out


def rules(docs: dict[tuple[str, str], dict[str, Any]], kind: str, name: str) -> list[Any]:
    found: list[Any] = docs[(kind, name)]["rules"]
    return found


def config_rbac(file: str, kind: str) -> dict[str, Any]:
    docs = load_docs((ROOT / "config" / "rbac" / file).read_text())
    [doc] = [d for d in docs if d["kind"] == kind]
    return doc


# -- lint and template -------------------------------------------------------------------------


def test_helm_lint_passes_strict_with_the_default_and_the_aws_values(tmp_path: Path) -> None:
    for extra in ([], ["--values", str(values_file(tmp_path, AWS_VALUES))]):
        result = run_helm("lint", "--strict", str(CHART), *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_chart_versions_follow_the_operator_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version("nodepool-operator")
    [deployment] = [d for d in template() if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"nodepool-operator:{chart['appVersion']}"


def test_default_values_render_what_config_default_renders() -> None:
    chart = by_kind_and_name(
        template(
            # config/default's image, its monitoring objects and its CRDs serving v1beta1
            # through the webhook; all else is the default
            "--set",
            "image.tag=dev,serviceMonitor.enabled=true,prometheusRule.enabled=true,"
            "crds.conversion=true",
        )
    )
    kustomize = by_kind_and_name(render_kustomize(ROOT / "config" / "default"))
    # Helm makes the release namespace (--create-namespace); the chart does not own it
    assert set(kustomize) - set(chart) == {("Namespace", NAMESPACE)}
    assert set(chart) - set(kustomize) == set()
    for key, doc in chart.items():
        assert comparable(doc) == comparable(kustomize[key]), key
    crds = [doc for doc in chart.values() if doc["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 4
    assert all(doc["metadata"]["annotations"][KEEP] == "keep" for doc in crds)
    # the comparison sees the settings: the operator leads, serves on all interfaces, and
    # serves its webhook with cert-manager's certificate
    args = operator_args(chart[("Deployment", "nodepool-operator")])
    assert args["leader_elect"] is True
    assert args["metrics_bind_address"] == "0.0.0.0:8080"
    # EC2 by default, as the image's own command: the simulated cloud is a test bed the
    # image does not carry
    assert args["cloud"] == "aws"
    [container] = chart[("Deployment", "nodepool-operator")]["spec"]["template"]["spec"][
        "containers"
    ]
    assert not [a for a in container["args"] if a.startswith("--cloud-state")]
    assert args["webhook_port"] == 9443
    for key in (
        ("Issuer", "nodepool-operator-selfsigned"),
        ("Certificate", "nodepool-operator-serving-cert"),
        ("Service", "nodepool-operator-webhook"),
        ("NetworkPolicy", "nodepool-operator-webhook"),
        ("ValidatingWebhookConfiguration", "nodepool-operator-validating"),
    ):
        assert key in chart


def test_default_values_leave_the_optional_objects_out() -> None:
    kinds = sorted(d["kind"] for d in template())
    assert kinds == [
        "Certificate",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Issuer",
        "NetworkPolicy",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "Service",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ]


WEBHOOK_KINDS = {"Issuer", "Certificate", "ValidatingWebhookConfiguration"}


def test_webhook_disabled_renders_no_webhook_and_the_operator_serves_none() -> None:
    docs = template("--set", "webhook.enabled=false")
    assert not [d for d in docs if d["kind"] in WEBHOOK_KINDS]
    assert not [d for d in docs if d["metadata"]["name"].endswith("-webhook")]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert operator_args(deployment)["webhook_port"] is None
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert [p["name"] for p in container["ports"]] == ["metrics", "health"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    assert_wired(docs)


def test_webhook_with_a_certificate_of_ones_own(tmp_path: Path) -> None:
    """certManager.enabled=false: no cert-manager objects, the user's Secret mounted, the CA
    in every webhook's caBundle (and no injection annotation to overwrite it)."""
    ca, _ = generate_serving_certificates(tmp_path / "certs", ["np-webhook.operators.svc"])
    bundle = base64.b64encode(ca.cert_pem).decode()
    values = {
        "webhook": {
            "certManager": {"enabled": False},
            "certSecret": "my-webhook-tls",
            "caBundle": bundle,
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
            "port": 10443,
        }
    }
    docs = template("--values", str(values_file(tmp_path, values)))
    assert not [d for d in docs if d["kind"] in ("Issuer", "Certificate")]
    [config] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    assert "annotations" not in config["metadata"]
    assert [h["clientConfig"]["caBundle"] for h in config["webhooks"]] == [bundle, bundle]
    assert {h["failurePolicy"] for h in config["webhooks"]} == {"Ignore"}
    assert {h["timeoutSeconds"] for h in config["webhooks"]} == {5}
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert operator_args(deployment)["webhook_port"] == 10443
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-cert", "secret": {"secretName": "my-webhook-tls"}} in volumes
    assert_wired(docs)


def test_webhook_certificate_from_ones_own_issuer(tmp_path: Path) -> None:
    values = {"webhook": {"certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "ca"}}}}
    docs = template("--values", str(values_file(tmp_path, values)))
    assert not [d for d in docs if d["kind"] == "Issuer"]
    [cert] = [d for d in docs if d["kind"] == "Certificate"]
    assert cert["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "ca"}
    assert_wired(docs)


def test_aws_values_render_the_operator_for_ec2(tmp_path: Path) -> None:
    docs = by_kind_and_name(
        template(
            "--values",
            str(values_file(tmp_path, AWS_VALUES)),
            release=AWS_RELEASE,
            namespace=AWS_NAMESPACE,
        )
    )
    name = f"{AWS_RELEASE}-nodepool-operator"
    deployment = docs[("Deployment", name)]
    assert deployment["spec"]["replicas"] == 3
    args = operator_args(deployment)
    assert args["cloud"] == "aws"
    assert args["aws_region"] == "eu-west-1"
    assert args["aws_instance_types"] == "m5.large,m5.xlarge"
    assert args["aws_endpoint_url"] == "https://ec2.eu-west-1.amazonaws.com"
    assert args["interruption_queue"] == "my-cluster-interruptions"
    assert args["leader_elect"] is True
    assert args["leader_election_namespace"] == "nodepool-leases"
    assert args["label_selector"] == "shard in (a,b)"
    assert args["registration_timeout"] == 600
    assert args["max_node_provision_seconds"] == 1200
    assert args["image_resolve_seconds"] == 60
    assert args["log_level"] == "debug"
    assert args["install_crds"] is True
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "registry.example.com/np:v9"
    assert container["envFrom"] == [{"secretRef": {"name": "aws-credentials"}}]
    # no simulated cloud: no SQLite volume and no --cloud-state
    assert [v["name"] for v in pod["volumes"]] == ["webhook-cert", "tmp"]
    assert "--cloud-state" not in " ".join(container["args"])
    account = docs[("ServiceAccount", name)]
    assert account["metadata"]["annotations"] == AWS_VALUES["serviceAccount"]["annotations"]
    assert account["metadata"]["namespace"] == AWS_NAMESPACE
    # the Lease rights follow the Lease; the subject stays in the release namespace
    role = docs[("Role", f"{name}-leader-election")]
    binding = docs[("RoleBinding", f"{name}-leader-election")]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "nodepool-leases"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": AWS_NAMESPACE}
    ]
    monitor = docs[("ServiceMonitor", name)]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    rule = docs[("PrometheusRule", name)]
    config_rule = load_docs((ROOT / "config" / "prometheus" / "rules.yaml").read_text())[0]
    assert rule["spec"] == config_rule["spec"]
    # the webhook follows the release's names and namespace
    cert = docs[("Certificate", f"{name}-serving-cert")]
    assert cert["spec"]["dnsNames"][0] == f"{name}-webhook.{AWS_NAMESPACE}.svc"
    config = docs[("ValidatingWebhookConfiguration", f"{name}-validating")]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{AWS_NAMESPACE}/{name}-serving-cert"
    )
    assert_wired(list(docs.values()))


def test_simulated_cloud_values_reach_the_operator(tmp_path: Path) -> None:
    values = {
        "replicaCount": 1,
        "leaderElection": {"enabled": False},
        "cloud": {
            "name": "simulated",
            "simulated": {
                "allowAnyCluster": True,
                "statePath": "/data/cloud/vms.sqlite",
                "bootSeconds": 2.5,
                "kubelets": False,
            },
        },
        "operator": {"extraArgs": ["--node-repair-seconds=120"]},
    }
    docs = template("--values", str(values_file(tmp_path, values)))
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = operator_args(deployment)
    assert args["cloud"] == "simulated"
    assert args["allow_simulated_cloud"] is True
    assert str(args["cloud_state"]) == "/data/cloud/vms.sqlite"
    assert args["boot_seconds"] == 2.5
    assert args["simulated_kubelets"] is False
    assert args["node_repair_seconds"] == 120
    assert args["leader_elect"] is False
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {
        "webhook-cert": "/tmp/k8s-webhook-server/serving-certs",
        "cloud-state": "/data/cloud",
        "tmp": "/tmp",
    }
    # no leader election: no Lease rights
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    assert_wired(docs)


def assert_wired(docs: list[dict[str, Any]]) -> None:
    """Every reference between the rendered objects lands: bindings on the rendered roles and
    ServiceAccount, selectors on the pods' and the Service's labels, the webhook configuration
    on its Service, that Service on the operator's webhook port, the Certificate on the
    Service's DNS names and on the mounted Secret."""
    index = by_kind_and_name(docs)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    account = pod["spec"]["serviceAccountName"]
    assert ("ServiceAccount", account) in index
    namespace = deployment["metadata"]["namespace"]

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return selector.items() <= labels.items()

    assert selects(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    for doc in docs:
        kind = doc["kind"]
        if kind in ("ClusterRoleBinding", "RoleBinding"):
            assert (doc["roleRef"]["kind"], doc["roleRef"]["name"]) in index
            assert doc["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": namespace}
            ]
        elif kind == "Service":
            assert selects(doc["spec"]["selector"], pod_labels)
        elif kind in ("PodDisruptionBudget",):
            assert selects(doc["spec"]["selector"]["matchLabels"], pod_labels)
        elif kind == "NetworkPolicy":
            assert selects(doc["spec"]["podSelector"]["matchLabels"], pod_labels)
        elif kind == "ServiceMonitor":
            [service] = [d for d in docs if d["kind"] == "Service" and "webhook" not in name(d)]
            assert selects(doc["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
            ports = {p["name"] for p in service["spec"]["ports"]}
            assert {e["port"] for e in doc["spec"]["endpoints"]} <= ports
    assert_webhook_wired(index, deployment)


def name(doc: dict[str, Any]) -> str:
    found: str = doc["metadata"]["name"]
    return found


def assert_webhook_wired(
    index: dict[tuple[str, str], dict[str, Any]], deployment: dict[str, Any]
) -> None:
    configs = [d for (kind, _), d in index.items() if kind == "ValidatingWebhookConfiguration"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    port = operator_args(deployment)["webhook_port"]
    if not configs:
        assert port is None
        return
    [config] = configs
    namespace = deployment["metadata"]["namespace"]
    services = set()
    for hook in config["webhooks"]:
        ref = hook["clientConfig"]["service"]
        assert ref["namespace"] == namespace
        services.add(ref["name"])
    [service_name] = services
    service = index[("Service", service_name)]
    [service_port] = service["spec"]["ports"]
    [served] = [p for p in container["ports"] if p["name"] == service_port["targetPort"]]
    assert served["containerPort"] == port
    # replicas not yet Ready too: they convert their own reads (docs/versions.md)
    assert service["spec"]["publishNotReadyAddresses"] is True
    [volume] = [v for v in pod["volumes"] if v["name"] == "webhook-cert"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "webhook-cert"]
    assert Path(mount["mountPath"]) == operator_args(deployment)["webhook_cert_dir"]
    annotation = config["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    certs = [d for (kind, _), d in index.items() if kind == "Certificate"]
    if annotation is None:  # a certificate of the user's own
        assert not certs
        assert all(h["clientConfig"]["caBundle"] for h in config["webhooks"])
        return
    [cert] = certs
    assert annotation == f"{namespace}/{name(cert)}"
    assert f"{service_name}.{namespace}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["secretName"] == volume["secret"]["secretName"]
    issuer = cert["spec"]["issuerRef"]
    if any(kind == "Issuer" for kind, _ in index):  # the chart's own self-signed Issuer
        assert (issuer["kind"], issuer["name"]) in index


def test_the_default_render_is_wired() -> None:
    assert_wired(template())


# -- RBAC: the chart grants what config/rbac grants ---------------------------------------------


@pytest.mark.parametrize("values", ["default", "aws"])
def test_rendered_rbac_rules_are_config_rbacs_rules(values: str, tmp_path: Path) -> None:
    extra = [] if values == "default" else ["--values", str(values_file(tmp_path, AWS_VALUES))]
    release = "nodepool-operator" if values == "default" else AWS_RELEASE
    name = "nodepool-operator" if values == "default" else f"{AWS_RELEASE}-nodepool-operator"
    docs = by_kind_and_name(template(*extra, release=release))
    cluster_role = config_rbac("cluster_role.yaml", "ClusterRole")
    assert rules(docs, "ClusterRole", name) == cluster_role["rules"]
    assert (
        rules(docs, "Role", f"{name}-leader-election")
        == config_rbac("leader_election_role.yaml", "Role")["rules"]
    )
    installer = ("ClusterRole", f"{name}-crd-installer")
    if values == "default":
        # the CRD installer's rights only come with operator.installCRDs
        assert installer not in docs
        assert not [k for k in docs if k[0] == "CustomResourceDefinition"]
    else:
        config_installer = config_rbac("crd_installer_role.yaml", "ClusterRole")
        assert rules(docs, *installer) == config_installer["rules"]
        assert sorted(config_installer["rules"][1]["resourceNames"]) == sorted(
            c["metadata"]["name"] for c in crds()
        )
    roles = [k for k in docs if k[0] in ("ClusterRole", "Role")]
    assert len(roles) == (2 if values == "default" else 3)


def test_pods_patch_is_granted_only_when_the_deprecated_reserve_new_nodes_asks(
    tmp_path: Path,
) -> None:
    """Nominations need no write to a pod's spec; the one rule that allows it comes only with
    ``rbac.reserveNewNodes``, after config/rbac's rules."""
    docs = by_kind_and_name(
        template("--values", str(values_file(tmp_path, {"rbac": {"reserveNewNodes": True}})))
    )
    granted = rules(docs, "ClusterRole", "nodepool-operator")
    base = config_rbac("cluster_role.yaml", "ClusterRole")["rules"]
    assert granted == [*base, {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    assert not any("patch" in r["verbs"] for r in base if "pods" in r["resources"])


def test_the_chart_crds_are_config_crd() -> None:
    """crds/ is written with config/crd by `make manifests`; the unit test pins the text, this
    one what `helm template --include-crds` hands the apiserver: v1alpha1 only, no conversion,
    and no templated CRD beside them unless crds.conversion asks."""
    docs = template("--include-crds")
    chart_crds = sorted(
        (d for d in docs if d["kind"] == "CustomResourceDefinition"),
        key=lambda d: d["metadata"]["name"],
    )
    config_crds = sorted(
        render_kustomize(ROOT / "config" / "crd"), key=lambda d: d["metadata"]["name"]
    )
    assert len(chart_crds) == len(config_crds) == 4
    assert chart_crds == config_crds
    assert all("conversion" not in d["spec"] for d in chart_crds)


def test_crds_conversion_with_a_certificate_of_ones_own_puts_the_ca_in_the_crds() -> None:
    sets = "crds.conversion=true,webhook.certManager.enabled=false,webhook.certSecret=s,"
    docs = template("--set", sets + "webhook.caBundle=Q0E=", release="own")
    converted = [d for d in docs if "conversion" in d.get("spec", {})]
    assert sorted(d["metadata"]["name"] for d in converted) == [
        "autoscalers.kubeloop.dev",
        "instances.kubeloop.dev",
        "nodepools.kubeloop.dev",
    ]
    for crd in converted:
        client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert client["caBundle"] == "Q0E="
        assert client["service"]["name"] == "own-nodepool-operator-webhook"
        assert "cert-manager.io/inject-ca-from" not in crd["metadata"]["annotations"]


# -- bad values: a clear error naming the value -------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ("cloud.name=gcp", "/cloud/name"),
        ("cloud.aws.regoin=eu-west-1", "'regoin' not allowed"),
        ("operator.logLevel=loud", "/operator/logLevel"),
        ("replicaCount=3,leaderElection.enabled=false", "replicaCount"),
        ("serviceAccount.create=false", "serviceAccount.name"),
        ("serviceMonitor.enabled=true,metrics.service.enabled=false", "metrics.service.enabled"),
        ("webhook.certManager.enabled=false", "webhook.certSecret"),
        ("webhook.certManager.enabled=false,webhook.certSecret=s", "webhook.caBundle"),
        ("webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"),
        ("webhook.timeoutSeconds=60", "/webhook/timeoutSeconds"),
        ("webhook.certManager.issuerRef.kind=ClusterIssuer", "/webhook/certManager/issuerRef"),
        ("crds.conversion=true,webhook.enabled=false", "crds.conversion"),
        ("crds.conversion=true,operator.installCRDs=true", "operator.installCRDs"),
        ("crds.conversion=yes", "/crds/conversion"),
        ("cloud.aws.interruptionQueue=https://sqs/q", "/cloud/aws/interruptionQueue"),
    ],
)
def test_bad_values_fail_naming_the_value(sets: str, message: str) -> None:
    result = run_helm("template", "x", str(CHART), "--set", sets)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


# -- the real apiserver ----------------------------------------------------------------------------


def test_the_rendered_chart_passes_server_side_dry_run(
    kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    install_monitoring_crds(kube_control_plane)
    install_cert_manager_crds(kube_control_plane)
    ensure_namespaces(kube_control_plane, [NAMESPACE, AWS_NAMESPACE, "nodepool-leases"])
    default = template("--include-crds")
    aws = template(
        "--include-crds",
        "--values",
        str(values_file(tmp_path, AWS_VALUES)),
        release=AWS_RELEASE,
        namespace=AWS_NAMESPACE,
    )
    # the webhook with a certificate of one's own: a real CA in caBundle
    ca, _ = generate_serving_certificates(tmp_path / "certs", ["own-nodepool-operator-webhook"])
    own_cert = {
        "webhook": {
            "certManager": {"enabled": False},
            "certSecret": "own-tls",
            "caBundle": base64.b64encode(ca.cert_pem).decode(),
        }
    }
    own = template("--values", str(values_file(tmp_path, own_cert)), release="own")
    # the CRDs serving v1beta1 through the release's webhook, as config/default's
    conversion = template("--set", "crds.conversion=true")
    assert sum(d["kind"] == "CustomResourceDefinition" for d in conversion) == 4
    for label, docs in (("default", default), ("aws", aws), ("own", own), ("conv", conversion)):
        directory = tmp_path / label
        directory.mkdir()
        lines = server_side_dry_run(kube_control_plane, docs, directory)
        assert len(lines) == len(docs) >= 12
    assert len(default) >= 18
    assert {d["kind"] for d in aws} - {d["kind"] for d in default} == {
        "ServiceMonitor",
        "PrometheusRule",
    }


def test_helm_install_and_uninstall_against_the_real_apiserver(
    kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The README's release path, as a user types it: `helm install` creates the CRDs (when
    missing) and every object; `helm uninstall` removes them again, and leaves the CRDs (and
    so every NodePool) alone. No pod runs: the test bed runs no kubelet for it. cert-manager's
    CRDs are installed first, as the README asks of a cluster (its controller is not: the
    Certificate is stored, not issued)."""
    install_cert_manager_crds(kube_control_plane)
    release, namespace = "np-install", "np-install"
    env = {
        "HOME": str(tmp_path),
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
        "KUBECONFIG": str(kube_control_plane.kubeconfig),
        "PATH": os.environ.get("PATH", ""),
    }

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(helm()), *args], capture_output=True, text=True, timeout=300, env=env, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    out = run(
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--create-namespace",
        "--set",
        "image.repository=registry.example.com/nodepool-operator,image.tag=v9",
    )
    assert "STATUS: deployed" in out
    assert "Cloud: aws" in out  # NOTES.txt, with the IAM policy to grant
    assert "Webhook: on" in out  # and how to see cert-manager's certificate
    assert f"get certificate {release}-nodepool-operator-serving-cert" in out
    rest = kube_control_plane.rest()
    name = f"{release}-nodepool-operator"
    for kind in crds():
        rest.get(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{kind['metadata']['name']}"
        )
    deployment = rest.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/nodepool-operator:v9"
    rest.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
    rest.get(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}-leader-election"
    )
    webhook_config = (
        f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}-validating"
    )
    rest.get(webhook_config)
    rest.get(f"/apis/cert-manager.io/v1/namespaces/{namespace}/certificates/{name}-serving-cert")
    [listed] = yaml.safe_load(run("list", "--namespace", namespace, "--output", "yaml"))
    assert (listed["name"], listed["status"]) == (release, "deployed")

    run("uninstall", release, "--namespace", namespace, "--wait")
    for path in (
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
        webhook_config,
    ):
        with pytest.raises(RestError) as gone:
            rest.get(path)
        assert gone.value.status == 404, path
    rest.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.kubeloop.dev")


def test_the_pdb_follows_its_value() -> None:
    """On by default (two replicas: a drain leaves the leader's standby); off on request."""
    [pdb] = [d for d in template() if d["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1
    docs = template("--set", "podDisruptionBudget.enabled=false")
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert [d for d in docs if d["kind"] == "Deployment"]


# -- crds.conversion as the README installs it -------------------------------------------------

CONVERTED = ("nodepools.kubeloop.dev", "autoscalers.kubeloop.dev", "instances.kubeloop.dev")


def readme_scripts(section: str) -> list[str]:
    """The commands of each console block under the README's ``section`` heading, as a script
    (a block sits in a list item, so it is indented; a command may continue over lines)."""
    text = (CHART / "README.md").read_text()
    body = text.split(f"### {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^( *)```console\n(.*?)^\1```$", body, re.S | re.M)
    return [textwrap.dedent(block).replace("$ ", "") for _, block in blocks]


@contextmanager
def readme_cluster(tmp_path: Path) -> Iterator[Callable[[str], subprocess.CompletedProcess[str]]]:
    """A control plane of the test's own (the README's scripts leave CRDs converting through a
    webhook no pod serves, which the shared one's other tests must not meet), with cert-manager's
    CRDs, and a shell that runs a script against it with kubectl and helm on PATH, as a user
    types it. Each scenario gets a new one rather than deleting the last one's CRDs: the
    apiserver's CRD finalizer retries "storage is (re)initializing" with a growing backoff,
    which on a loaded machine kept a `kubectl delete crd` waiting past five minutes."""
    with ControlPlane(ControlPlaneOptions(scheduler=False, dir=tmp_path / "cp")) as cp:
        install_cert_manager_crds(cp)
        tools = os.pathsep.join(str(p.parent) for p in (kubectl(), helm()))
        env = {
            "HOME": str(tmp_path),
            "KUBECONFIG": str(cp.kubeconfig),
            "PATH": tools + os.pathsep + os.environ.get("PATH", ""),
        }

        def sh(script: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["bash", "-euc", script],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                check=False,
            )

        yield sh
        for name in CONVERTED:
            crd = cp.rest().get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]
            service = crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
            assert (service["namespace"], service["name"]) == (
                NAMESPACE,
                "nodepool-operator-webhook",
            )
            assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
                f"{NAMESPACE}/nodepool-operator-serving-cert"
            )


def test_crds_conversion_on_a_new_install_as_the_readme_says(tmp_path: Path) -> None:
    """The README's new install (--skip-crds, crds.conversion=true), typed as written, ends with
    the CRDs serving v1beta1 through the release's webhook Service, and `helm uninstall` leaves
    them (checked when the cluster closes)."""
    fresh, _ = readme_scripts("Serving v1beta1: `crds.conversion`")
    with readme_cluster(tmp_path) as sh:
        done = sh(fresh)
        assert done.returncode == 0, done.stderr
        uninstall = sh(f"helm uninstall nodepool-operator -n {NAMESPACE} --wait")
        assert uninstall.returncode == 0, uninstall.stderr


def test_crds_conversion_adopted_by_a_release_installed_with_crds_as_the_readme_says(
    tmp_path: Path,
) -> None:
    """A release installed the default way (its CRDs from crds/): Helm refuses the upgrade to
    crds.conversion, naming what is missing, until the README's commands, typed as written,
    hand it the CRDs; then they serve v1beta1 through the release's webhook Service."""
    _, adopt = readme_scripts("Serving v1beta1: `crds.conversion`")
    with readme_cluster(tmp_path) as sh:
        plain = sh(f"helm install nodepool-operator {CHART} -n {NAMESPACE} --create-namespace")
        assert plain.returncode == 0, plain.stderr
        refused = sh(
            f"helm upgrade nodepool-operator {CHART} -n {NAMESPACE} --set crds.conversion=true"
        )
        assert refused.returncode != 0
        assert 'missing key "app.kubernetes.io/managed-by"' in refused.stderr, refused.stderr
        done = sh(adopt)
        assert done.returncode == 0, done.stderr
