"""config/conversion against the real kube-apiserver: kustomize renders it, and the apiserver
accepts each CRD over config/crd's (a server-side dry run: nothing changes for the
other tests sharing this control plane)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kubeloop.envtest import ControlPlane
from tests.integration.manifest_support import kubectl, render_kustomize

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("plural", ["nodepools", "autoscalers", "instances"])
def test_the_apiserver_accepts_the_two_version_crd(
    kube_control_plane: ControlPlane, plural: str
) -> None:
    kube_control_plane.install_crds([ROOT / "config" / "crd" / f"kubeloop.dev_{plural}.yaml"])
    rendered = render_kustomize(ROOT / "config" / "conversion")
    (crd,) = [c for c in rendered if c["spec"]["names"]["plural"] == plural]
    result = subprocess.run(
        [
            str(kubectl()),
            f"--kubeconfig={kube_control_plane.kubeconfig}",
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
        ],
        input=json.dumps(crd),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    applied = json.loads(result.stdout)
    assert [v["name"] for v in applied["spec"]["versions"]] == ["v1alpha1", "v1beta1"]
    assert applied["spec"]["conversion"]["strategy"] == "Webhook"
    # a dry run: the stored CRD still serves v1alpha1 only
    stored = kube_control_plane.rest().get(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.kubeloop.dev"
    )
    assert [v["name"] for v in stored["spec"]["versions"]] == ["v1alpha1"]
