"""docs/eks.md's chart values, rendered by the real helm (tools/helm/build.sh): helm checks
them against the chart's values.schema.json, and the Deployment and ServiceAccount it renders
carry what the guide says they do (the region flag, the IRSA annotation)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.manifest_support import helm, load_docs
from tests.unit.nodepool_operator.test_eks_guide import GUIDE, VALUES_MARK, yaml_blocks

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "nodepool-operator"

# helm is built by make test-release, as for the chart's own tests
pytestmark = [pytest.mark.integration, pytest.mark.release]


def test_the_guides_values_render_with_the_region_and_the_role(tmp_path: Path) -> None:
    blocks = [b for b in yaml_blocks(GUIDE.read_text()) if b.startswith(VALUES_MARK)]
    assert len(blocks) == 1
    values = tmp_path / "values.yaml"
    values.write_text(blocks[0])
    done = subprocess.run(
        [
            str(helm()),
            "template",
            "nodepool-operator",
            str(CHART),
            "--namespace",
            "nodepool-system",
            "-f",
            str(values),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    docs = load_docs(done.stdout)
    by_kind: dict[str, dict[str, Any]] = {d["kind"]: d for d in docs}
    container = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/nodepool-operator:v0.1.0"
    assert "--cloud=aws" in container["args"]
    assert "--aws-region=eu-west-1" in container["args"]
    account = by_kind["ServiceAccount"]
    assert account["metadata"]["name"] == "nodepool-operator"  # the guide's SERVICE_ACCOUNT
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(
        ":role/my-cluster-nodepool-operator"
    )


def test_helm_refuses_a_misspelt_value(tmp_path: Path) -> None:
    """The check above is helm's schema check, which would catch a drifted key."""
    values = tmp_path / "values.yaml"
    values.write_text("cloud:\n  aws:\n    regoin: eu-west-1\n")
    done = subprocess.run(
        [str(helm()), "template", "np", str(CHART), "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "regoin" in done.stderr
