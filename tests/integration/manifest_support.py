"""What the deploy tests share: the tools built from the Go module proxy (promtool and the
Prometheus Operator's CRDs, cert-manager's CRDs, helm), rendering config/ with kubectl's
kustomize, and a server-side dry run of rendered objects against the real apiserver.

The kustomize overlay (test_deploy.py) and the Helm chart (test_chart.py) go through the same
dry run, so "the apiserver accepts it" means the same thing for both.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kubeloop.envtest import ControlPlane
from kubeloop.envtest._assets import find_assets
from kubeloop.envtest._rest import RestError

ROOT = Path(__file__).resolve().parents[2]


def _built(script: str) -> Path:
    """Run a tools/*/build.sh (cached under ~/.cache/kubeloop after the first build) and return
    the directory it prints last."""
    out = subprocess.run(
        ["bash", str(ROOT / "tools" / script)],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return Path(out.stdout.strip().splitlines()[-1])


@functools.cache
def monitoring_tools() -> Path:
    """promtool and the ServiceMonitor and PrometheusRule CRDs (tools/monitoring/build.sh)."""
    return _built("monitoring/build.sh")


@functools.cache
def cert_manager_crds() -> Path:
    """cert-manager's Certificate and Issuer CRDs from its Go module (tools/certmanager)."""
    return _built("certmanager/build.sh")


@functools.cache
def helm() -> Path:
    """The helm binary (tools/helm/build.sh)."""
    return _built("helm/build.sh") / "helm"


def kubectl() -> Path:
    kubectl_bin = find_assets().kubectl
    assert kubectl_bin is not None, "kubectl is built with the control plane"
    return kubectl_bin


def load_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def render_kustomize(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(kubectl()), "kustomize", str(directory)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return load_docs(out.stdout)


def install_monitoring_crds(control_plane: ControlPlane) -> None:
    """The Prometheus Operator's CRDs, so a ServiceMonitor and a PrometheusRule dry-run."""
    tools = monitoring_tools()
    control_plane.install_crds(
        [
            tools / "monitoring.coreos.com_servicemonitors.yaml",
            tools / "monitoring.coreos.com_prometheusrules.yaml",
        ]
    )


def install_cert_manager_crds(control_plane: ControlPlane) -> None:
    """cert-manager's Certificate and Issuer CRDs, so the apiserver checks config/certmanager's
    objects (and the chart's) against cert-manager's own schema, as a cluster with cert-manager
    would. Only the CRDs: no cert-manager runs, so no Secret is issued."""
    crds = cert_manager_crds()
    control_plane.install_crds(
        [crds / "cert-manager.io_certificates.yaml", crds / "cert-manager.io_issuers.yaml"]
    )


def ensure_namespaces(control_plane: ControlPlane, names: Iterable[str]) -> None:
    """Namespaced objects need their namespace to exist, even in a dry run."""
    rest = control_plane.rest()
    for name in names:
        try:
            rest.get(f"/api/v1/namespaces/{name}")
        except RestError:
            rest.post(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )


def apply_dry_run(
    control_plane: ControlPlane, docs: list[dict[str, Any]], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --server-side --dry-run=server`` of ``docs``, whatever it answers.

    With ``--force-conflicts``: the control plane is the session's, where other tests install
    the operator's CRDs (config/crd) under another field manager, and config/default's CRDs
    change their versions and conversion; who owns a field in this shared bed says nothing
    of the manifests, and the apiserver still validates every object in full."""
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(docs))
    return subprocess.run(
        [
            str(kubectl()),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-f",
            str(rendered),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def server_side_dry_run(
    control_plane: ControlPlane, docs: list[dict[str, Any]], tmp_path: Path
) -> list[str]:
    """``kubectl apply --server-side --dry-run=server`` of ``docs``; fails unless the apiserver
    accepts every one of them. Returns kubectl's lines, one per object."""
    result = apply_dry_run(control_plane, docs, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == len(docs), result.stdout
    assert all("serverside-applied (server dry run)" in line for line in lines), result.stdout
    return lines
