"""config/default renders with kubectl's kustomize and the real apiserver accepts every object
(server-side apply, dry run); the alert rules and the dashboard's PromQL parse with promtool.

promtool and the Prometheus Operator's CRDs (for ServiceMonitor and PrometheusRule) come from
the Go module proxy through tools/monitoring/build.sh, built once and cached like the control
plane; cert-manager's CRDs (for the webhook's Issuer and Certificate) likewise, through
tools/certmanager/build.sh.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop.envtest import ControlPlane
from tests.integration.manifest_support import (
    ROOT,
    ensure_namespaces,
    install_cert_manager_crds,
    install_monitoring_crds,
    monitoring_tools,
    render_kustomize,
    server_side_dry_run,
)

pytestmark = pytest.mark.integration

NAMESPACE = "nodepool-system"
EXPECTED_KINDS = {
    "CustomResourceDefinition",
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "ServiceMonitor",
    "PrometheusRule",
    "ValidatingWebhookConfiguration",
    "Issuer",
    "Certificate",
}


def test_overlay_renders_everything_in_one_namespace_with_the_image_set(
    tmp_path: Path,
) -> None:
    docs = render_kustomize(ROOT / "config" / "default")
    assert {d["kind"] for d in docs} == EXPECTED_KINDS
    cluster_scoped = {
        "CustomResourceDefinition",
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
    }
    for d in docs:
        if d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == NAMESPACE, d["metadata"]["name"]
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "nodepool-operator"
    # the CRD installer is not part of the deployment: the operator never writes CRDs
    assert not [d for d in docs if "crd-installer" in d["metadata"]["name"]]
    # what `make deploy IMG=...` does: an overlay over config/default that sets the image
    overlay = tmp_path / "deploy"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize takes only relative roots (as make deploy writes it)
                "resources": [os.path.relpath(ROOT / "config" / "default", overlay)],
                "images": [
                    {
                        "name": "nodepool-operator",
                        "newName": "registry.example.com/np",
                        "newTag": "v9",
                    }
                ],
            }
        )
    )
    [deploy] = [d for d in render_kustomize(overlay) if d["kind"] == "Deployment"]
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/np:v9"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deploy["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert "--install-crds" not in container["args"]


def test_overlay_applies_to_the_real_apiserver_with_server_side_dry_run(
    kube_control_plane: ControlPlane, tmp_path: Path
) -> None:
    install_monitoring_crds(kube_control_plane)
    install_cert_manager_crds(kube_control_plane)
    ensure_namespaces(kube_control_plane, [NAMESPACE])
    server_side_dry_run(kube_control_plane, render_kustomize(ROOT / "config" / "default"), tmp_path)


def promtool_check(tools: Path, groups: list[dict[str, Any]], tmp_path: Path) -> str:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    result = subprocess.run(
        [str(tools / "promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise AssertionError(result.stdout + result.stderr)
    return result.stdout


def test_alert_rules_parse_with_promtool(tmp_path: Path) -> None:
    tools = monitoring_tools()
    rule = yaml.safe_load((ROOT / "config" / "prometheus" / "rules.yaml").read_text())
    groups = rule["spec"]["groups"]
    count = sum(len(g["rules"]) for g in groups)
    assert count >= 5
    out = promtool_check(tools, groups, tmp_path)
    assert f"SUCCESS: {count} rules found" in out
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    # the list: reconcile errors, workqueue depth, leader changes, loops, scale-up failures
    assert {
        "NodePoolOperatorReconcileErrors",
        "NodePoolOperatorWorkqueueBacklog",
        "NodePoolOperatorLeaderChanges",
        "NodePoolOperatorReconcileLoop",
        "NodePoolScaleUpFailures",
    } <= alerts


def test_dashboard_queries_parse_with_promtool_and_a_broken_one_fails(tmp_path: Path) -> None:
    tools = monitoring_tools()
    dashboard = json.loads((ROOT / "config" / "grafana" / "nodepool-operator.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) == len(dashboard["panels"]) >= 10
    # Grafana variables are not PromQL: substitute what Grafana would
    rules = [
        {"record": f"dashboard:panel_{i}", "expr": e.replace("$job", ".*")}
        for i, e in enumerate(exprs)
    ]
    out = promtool_check(tools, [{"name": "dashboard", "rules": rules}], tmp_path)
    assert f"SUCCESS: {len(rules)} rules found" in out
    broken = [{"record": "dashboard:broken", "expr": "sum by (controller (rate(x[5m]))"}]
    with pytest.raises(AssertionError, match=r"parse error|unexpected"):
        promtool_check(tools, [{"name": "dashboard", "rules": broken}], tmp_path)
