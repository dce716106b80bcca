"""docs/crds.md's example (examples/crds/website_api.py) against the real kube-apiserver: the
CRD generated from the types is accepted and serves two versions with one stored; for every
case the apiserver and the Python parser agree on refusing (naming the same field, with the
same CEL message) or admitting (with the same defaults); scale and status subresources and
the printer columns behave as declared."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kubeloop import crd
from kubeloop.envtest import ControlPlane, RestClient, RestError, find_assets

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crds"
MERGE = "application/merge-patch+json"


def example() -> ModuleType:
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    return importlib.import_module("website_api")


@pytest.fixture(scope="module")
def rest(kube_control_plane: ControlPlane) -> RestClient:
    kube_control_plane.install_crds([EXAMPLE / "examples.kubeloop.dev_websites.yaml"])
    return kube_control_plane.rest()


@pytest.fixture
def namespace(rest: RestClient) -> Iterator[str]:
    name = f"crd-{uuid.uuid4().hex[:8]}"
    rest.post("/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    rest.delete(f"/api/v1/namespaces/{name}")


def path(namespace: str, version: str = "v1", name: str | None = None) -> str:
    base = f"/apis/examples.kubeloop.dev/{version}/namespaces/{namespace}/websites"
    return f"{base}/{name}" if name else base


def website(name: str, version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"examples.kubeloop.dev/{version}",
        "kind": "Website",
        "metadata": {"name": name},
        "spec": {
            "hostname": "www.example.com",
            "source": {"bucket": "site-files"},
            **spec,
        },
    }


def create(rest: RestClient, namespace: str, obj: dict[str, Any]) -> tuple[int, str]:
    """The apiserver's answer to a create: its status code and body."""
    try:
        stored = rest.post(path(namespace), obj)
    except RestError as err:
        return err.status, err.body
    return 201, json.dumps(stored)


# (spec fields over the minimal valid spec, the field the refusal names or None, the message)
CASES: list[tuple[dict[str, Any], str | None, str]] = [
    ({}, None, ""),
    ({"replicas": 3, "maxReplicas": 3, "cacheTTL": "1s", "memory": "256Mi"}, None, ""),
    ({"replicas": 11}, "spec.replicas", "replicas must be less than or equal to maxReplicas"),
    ({"replicas": -1}, "spec.replicas", "greater than or equal to 0"),
    ({"maxReplicas": 101}, "spec.maxReplicas", "less than or equal to 100"),
    ({"cacheTTL": "500ms"}, "spec.cacheTTL", "must be at least 1s"),
    ({"cacheTTL": "5 minutes"}, "spec.cacheTTL", ""),
    ({"memory": "-1Gi"}, "spec.memory", "must not be negative"),
    ({"memory": "lots"}, "spec.memory", ""),
    ({"labels": {"examples.kubeloop.dev/x": "y"}}, "spec.labels", "examples.kubeloop.dev/ is ours"),
    ({"labels": {"team": "web"}}, None, ""),
    (
        {"source": {"bucket": "b-1", "gitRepository": "https://git.example.com/site"}},
        "spec.source",
        "exactly one of gitRepository and bucket must be set",
    ),
    ({"source": {}}, "spec.source", "exactly one of gitRepository and bucket must be set"),
    ({"source": {"gitRepository": "http://insecure"}}, "spec.source.gitRepository", ""),
    ({"paths": ["/a", "/a"]}, "spec.paths[1]", "Duplicate value"),
    ({"paths": ["relative"]}, "spec.paths[0]", ""),
    ({"hostname": "Not A Host"}, "spec.hostname", ""),
]


@pytest.mark.parametrize(("spec", "field", "message"), CASES, ids=[str(c[0]) for c in CASES])
def test_apiserver_and_parser_agree(
    rest: RestClient, namespace: str, spec: dict[str, Any], field: str | None, message: str
) -> None:
    api = example()
    obj = website(f"w-{uuid.uuid4().hex[:6]}", **spec)
    try:
        api.parse_website(obj)
    except crd.InvalidField as err:
        parsed_path: str | None = err.path
        parsed_detail = err.detail
    else:
        parsed_path, parsed_detail = None, ""
    status, body = create(rest, namespace, obj)
    if status == 201:
        assert field is None, f"the apiserver admitted what should be refused at {field}"
        # admitted: the server's defaults are the parser's
        stored = json.loads(body)
        assert crd.to_api(api.parse_website(stored).spec) == stored["spec"]
    else:
        assert status == 422, body
        assert field is not None, f"the apiserver refused what the parser admits: {body}"
        causes = [c.get("field") for c in json.loads(body)["details"]["causes"]]
        assert field in causes, (field, causes)
        assert message in body
    assert parsed_path == field, parsed_detail
    assert message in parsed_detail


def test_two_versions_one_stored(rest: RestClient, namespace: str) -> None:
    crd_obj = rest.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/websites.examples.kubeloop.dev"
    )
    served = {v["name"]: (v["served"], v["storage"]) for v in crd_obj["spec"]["versions"]}
    assert served == {"v1": (True, True), "v1alpha1": (True, False)}
    rest.post(path(namespace, "v1alpha1"), website("old", "v1alpha1", replicas=2))
    as_v1 = rest.get(path(namespace, "v1", "old"))
    assert (as_v1["apiVersion"], as_v1["spec"]["replicas"]) == ("examples.kubeloop.dev/v1", 2)
    as_alpha = rest.get(path(namespace, "v1alpha1", "old"))
    assert as_alpha["apiVersion"] == "examples.kubeloop.dev/v1alpha1"
    crd_obj = rest.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/websites.examples.kubeloop.dev"
    )
    assert crd_obj["status"]["storedVersions"] == ["v1"]


def test_scale_status_and_columns(
    kube_control_plane: ControlPlane, rest: RestClient, namespace: str
) -> None:
    rest.post(path(namespace), website("site", replicas=1))
    scale = rest.get(path(namespace, name="site") + "/scale")
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 1)
    rest.request(
        "PATCH",
        path(namespace, name="site") + "/scale",
        {"spec": {"replicas": 4}},
        content_type=MERGE,
    )
    assert rest.get(path(namespace, name="site"))["spec"]["replicas"] == 4
    # status only through its subresource: a status in a main-resource write is dropped
    rest.request(
        "PATCH",
        path(namespace, name="site") + "/status",
        {"status": {"replicas": 4, "selector": "app=site", "url": "http://site"}},
        content_type=MERGE,
    )
    got = example().parse_website(rest.get(path(namespace, name="site")))
    assert (got.status.replicas, got.status.url) == (4, "http://site")
    scale = rest.get(path(namespace, name="site") + "/scale")
    assert (scale["status"]["replicas"], scale["status"]["selector"]) == (4, "app=site")

    kubectl = find_assets().kubectl
    assert kubectl is not None, "kubectl not found; run `make setup`"
    out = subprocess.run(
        [
            str(kubectl),
            "--kubeconfig",
            str(kube_control_plane.kubeconfig),
            "-n",
            namespace,
            "get",
            "site",
            "-o",
            "wide",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    assert out[0].split() == ["NAME", "HOST", "REPLICAS", "URL", "AGE"]
    assert out[1].split()[:4] == ["site", "www.example.com", "4", "http://site"]
