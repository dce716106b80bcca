"""config/conversion: the NodePool, Autoscaler and Instance CRDs serving v1beta1, as
`make manifests` writes them, pointing at the Service, paths and Certificate that
config/webhook, the operator and config/certmanager actually have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nodepool_operator import manifests
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

ROOT = Path(__file__).resolve().parents[3]
CONVERSION = ROOT / manifests.CONVERSION_OUT
KINDS = [("nodepools", NODEPOOL.name, NODEPOOL_CONVERSION_PATH),
         ("autoscalers", AUTOSCALER.name, AUTOSCALER_CONVERSION_PATH),
         ("instances", INSTANCE.name, INSTANCE_CONVERSION_PATH)]  # fmt: skip
each_kind = pytest.mark.parametrize(("plural", "name", "path"), KINDS, ids=[k[0] for k in KINDS])


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


@pytest.mark.parametrize("out", [manifests.CONVERSION_OUT, manifests.CHART_CONVERSION_OUT])
def test_committed_files_match_the_types(out: Path) -> None:
    """config/conversion and the chart's files/crds: the same whole set of CRDs."""
    committed = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / out).glob("kubeloop.dev_*")}
    assert committed == manifests.render_conversion(), "run `make manifests`"
    assert sorted(committed) == sorted(f"kubeloop.dev_{c.plural}.yaml" for c in CUSTOM_RESOURCES)


def test_the_kustomization_lists_every_crd() -> None:
    kustomization = yaml.safe_load((CONVERSION / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in CONVERSION.glob("kubeloop.dev_*")
    )


def test_the_node_class_has_one_version_as_in_config_crd() -> None:
    (crd,) = _load(CONVERSION / f"kubeloop.dev_{AWSNODECLASS.plural}.yaml")
    (plain,) = _load(ROOT / "config" / "crd" / f"kubeloop.dev_{AWSNODECLASS.plural}.yaml")
    assert crd == plain


@each_kind
def test_it_serves_both_versions_and_stores_v1alpha1(plural: str, name: str, path: str) -> None:
    (crd,) = _load(CONVERSION / f"kubeloop.dev_{plural}.yaml")
    served = [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]]
    assert served == [("v1alpha1", True, True), ("v1beta1", True, False)]
    # v1alpha1 exactly as config/crd serves it, so applying this over it changes nothing else
    (plain,) = _load(ROOT / "config" / "crd" / f"kubeloop.dev_{plural}.yaml")
    assert crd["spec"]["versions"][0] == plain["spec"]["versions"][0]
    assert crd["metadata"]["name"] == name


@each_kind
def test_the_conversion_calls_the_operators_webhook_service(
    plural: str, name: str, path: str
) -> None:
    (crd,) = _load(CONVERSION / f"kubeloop.dev_{plural}.yaml")
    conversion = crd["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["conversionReviewVersions"] == ["v1"]
    service = conversion["webhook"]["clientConfig"]["service"]
    (svc,) = _load(ROOT / "config" / "webhook" / "service.yaml")
    assert (service["namespace"], service["name"]) == (
        svc["metadata"]["namespace"],
        svc["metadata"]["name"],
    )
    assert service["port"] == svc["spec"]["ports"][0]["port"]
    assert service["path"] == path


@each_kind
def test_cert_manager_injects_the_webhooks_ca(plural: str, name: str, path: str) -> None:
    (crd,) = _load(CONVERSION / f"kubeloop.dev_{plural}.yaml")
    cert = next(
        d
        for d in _load(ROOT / "config" / "certmanager" / "certificate.yaml")
        if d["kind"] == "Certificate"
    )
    want = f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
    assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == want
    assert "caBundle" not in crd["spec"]["conversion"]["webhook"]["clientConfig"]
    kustomization = yaml.safe_load((CONVERSION / "kustomization.yaml").read_text())
    assert f"kubeloop.dev_{plural}.yaml" in kustomization["resources"]
