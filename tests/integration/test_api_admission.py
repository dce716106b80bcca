"""The generated CRDs against the real kube-apiserver: bad input is refused at admission with
the field named (over REST and through ``kubectl apply``), good input is defaulted, and the
printer columns, scale and status subresources behave as the types promise.

Cases follow the bad-input matrix (reliability-anchors §7.5): reject wherever the schema can
express the constraint.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import Resource
from kubeloop.envtest import ControlPlane, RestClient, RestError, find_assets
from nodepool_operator.api import (
    AUTOSCALERS,
    INSTANCES,
    NODEPOOLS,
    parse_autoscaler,
    parse_nodepool,
    to_api,
)
from tests import factories

pytestmark = pytest.mark.integration

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
MERGE = "application/merge-patch+json"


# -- fixtures and helpers --------------------------------------------------------------------
@pytest.fixture(scope="module")
def rest(kube_control_plane: ControlPlane) -> RestClient:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))
    return kube_control_plane.rest()


class Kubectl:
    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self._argv = [str(binary), "--kubeconfig", str(kubeconfig)]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._argv, *args], capture_output=True, text=True, timeout=60, check=False
        )


@pytest.fixture(scope="module")
def kubectl(kube_control_plane: ControlPlane, rest: RestClient) -> Kubectl:
    binary = find_assets().kubectl
    # make setup builds kubectl; its absence is a failure, never a skip
    assert binary is not None, "kubectl not found; run `make setup`"
    return Kubectl(binary, kube_control_plane.kubeconfig)


@pytest.fixture
def name(rest: RestClient) -> Iterator[str]:
    """A fresh object name; cluster-scoped objects of that name are deleted afterwards."""
    value = f"t-{uuid.uuid4().hex[:8]}"
    yield value
    for res in (NODEPOOLS, AUTOSCALERS):
        try:
            rest.delete(res.path(name=value))
        except RestError as err:
            if err.status != 404:
                raise


def nodepool(name: str, **spec: Any) -> dict[str, Any]:
    return factories.nodepool(name, target=None, **spec)


def autoscaler(name: str, **spec: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"namespaces": ["prod"], "frequency": None, **spec}
    return factories.autoscaler(name, pool="pool", **fields)


def instance(name: str, **spec: Any) -> dict[str, Any]:
    return factories.instance(name, image="ami-0abc", **spec)


def create(rest: RestClient, res: Resource, obj: dict[str, Any], ns: str | None = None) -> Any:
    # Strict is what kubectl sends by default: an unknown field is an error, not pruned away
    return rest.post(res.path(ns) + "?fieldValidation=Strict", obj)


# -- bad input: refused at admission, field named --------------------------------------------
Builder = Callable[..., dict[str, Any]]

BAD = [
    pytest.param(nodepool, {"targetNodes": -1}, 422, ["spec.targetNodes"], id="negative-target"),
    pytest.param(
        nodepool,
        {"minNodes": 5, "maxNodes": 3},
        422,
        ["spec.minNodes", "minNodes must be less than or equal to maxNodes"],
        id="min-above-max",
    ),
    pytest.param(nodepool, {"memory": "28Gb"}, 422, ["spec.memory"], id="memory-28Gb"),
    pytest.param(
        autoscaler, {"frequency": "5 minutes"}, 422, ["spec.frequency"], id="frequency-5-minutes"
    ),
    pytest.param(
        nodepool, {"targetNode": 3}, 400, ['unknown field "spec.targetNode"'], id="unknown-field"
    ),
    pytest.param(
        nodepool,
        {"taints": [{"key": "dedicated", "effect": "NoScheduel"}]},
        422,
        ["spec.taints[0].effect", "NoScheduel"],
        id="taint-effect-typo",
    ),
    # the rest of §7.5 that the schema can express
    pytest.param(
        nodepool,
        {"targetNodes": 11},
        422,
        ["spec.targetNodes", "targetNodes must be less than or equal to maxNodes"],
        id="target-above-max",
    ),
    pytest.param(nodepool, {"targetNodes": 1000000}, 422, ["spec.targetNodes"], id="huge-target"),
    pytest.param(nodepool, {"targetNodes": "3"}, 422, ["spec.targetNodes"], id="target-string"),
    pytest.param(nodepool, {"diskSize": "-1Gi"}, 422, ["spec.diskSize"], id="negative-disk"),
    pytest.param(nodepool, {"instanceType": ""}, 422, ["spec.instanceType"], id="empty-type"),
    pytest.param(
        nodepool,
        {"labels": {"kubeloop.dev/nodepool": "other"}},
        422,
        ["spec.labels", "reserved"],
        id="reserved-label",
    ),
    pytest.param(
        nodepool, {"labels": {"bad key!": "x"}}, 422, ["spec.labels"], id="invalid-label-key"
    ),
    pytest.param(autoscaler, {"namespaces": []}, 422, ["spec.namespaces"], id="no-namespaces"),
    pytest.param(autoscaler, {"frequency": "0s"}, 422, ["spec.frequency"], id="frequency-zero"),
    pytest.param(
        autoscaler, {"nodePoolRef": None}, 422, ["spec.nodePoolRef"], id="missing-pool-ref"
    ),
    pytest.param(autoscaler, {"weight": 101}, 422, ["spec.weight"], id="weight-above-100"),
]


@pytest.mark.parametrize(("build", "spec", "status", "fragments"), BAD)
def test_rest_rejects_bad_input_naming_the_field(
    rest: RestClient,
    name: str,
    build: Builder,
    spec: dict[str, Any],
    status: int,
    fragments: list[str],
) -> None:
    obj = build(name, **spec)
    res = NODEPOOLS if build is nodepool else AUTOSCALERS
    with pytest.raises(RestError) as caught:
        create(rest, res, obj)
    assert caught.value.status == status, caught.value.body
    message = json.loads(caught.value.body)["message"]
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(("build", "spec", "status", "fragments"), BAD)
def test_kubectl_apply_rejects_bad_input_naming_the_field(
    kubectl: Kubectl,
    tmp_path: Path,
    name: str,
    build: Builder,
    spec: dict[str, Any],
    status: int,
    fragments: list[str],
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(build(name, **spec)))
    result = kubectl("apply", "-f", str(manifest))
    assert result.returncode != 0, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr


# -- good input ------------------------------------------------------------------------------
def test_nodepool_defaults_filled_in(rest: RestClient, name: str) -> None:
    created = create(rest, NODEPOOLS, nodepool(name))
    assert created["spec"] == {
        "instanceType": "m5.large",
        "targetNodes": 0,
        "minNodes": 0,
        "maxNodes": 10,
        "reserveNewNodes": False,
        "capacityType": "on-demand",
    }
    # the Python side fills in the same defaults, so a round trip changes nothing
    pool = parse_nodepool(created)
    assert to_api(pool.spec) == created["spec"]
    assert pool.metadata.name == name
    assert pool.metadata.generation == 1


def test_autoscaler_defaults_filled_in(rest: RestClient, name: str) -> None:
    created = create(rest, AUTOSCALERS, autoscaler(name))
    assert created["spec"] == {
        "nodePoolRef": {"name": "pool"},
        "namespaces": ["prod"],
        "frequency": "5m",
        "scaleDownEnabled": False,
        "scaleDownUnneededTime": "10m",
        "scaleDownConsolidation": True,
        "weight": 0,
    }
    scaler = parse_autoscaler(created)
    assert scaler.spec.frequency.total_seconds() == 300
    assert to_api(scaler.spec) == created["spec"]


def test_full_nodepool_is_accepted_as_written(rest: RestClient, name: str) -> None:
    spec = {
        "targetNodes": 2,
        "minNodes": 1,
        "maxNodes": 5,
        "instanceType": "mem96.large",
        "cpu": 12,
        "memory": "96Gi",
        "diskSize": "100Gi",
        "labels": {"team": "money-maker", "example.com/tier": "prod"},
        "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
        "reserveNewNodes": True,
        "capacityType": "spot",
    }
    created = create(rest, NODEPOOLS, nodepool(name, **spec))
    assert created["spec"] == spec
    assert to_api(parse_nodepool(created).spec) == {**spec, "cpu": "12"}


def test_kubectl_get_shows_printer_columns(rest: RestClient, kubectl: Kubectl, name: str) -> None:
    create(rest, NODEPOOLS, nodepool(name, targetNodes=3))
    rest.request(
        "PATCH",
        NODEPOOLS.path(name=name, subresource="status"),
        {"status": {"readyNodes": 2, "scaleOperation": "active", "zones": ["sim-1b", "sim-1c"]}},
        content_type=MERGE,
    )
    table = kubectl("get", "nodepools", name)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "TARGET", "READY", "SCALING", "AGE"]
    assert row.split()[:4] == [name, "3", "2", "active"]
    wide = kubectl("get", "np", name, "-o", "wide")  # the short name, and the priority-1 column
    assert wide.returncode == 0, wide.stderr
    header, row = wide.stdout.splitlines()
    assert header.split() == ["NAME", "TARGET", "READY", "SCALING", "TYPE", "ZONES", "AGE"]
    assert row.split()[4:6] == ["m5.large", '["sim-1b","sim-1c"]']


def test_kubectl_get_autoscalers_and_instances_columns(
    rest: RestClient, kubectl: Kubectl, kube_namespace: str, name: str
) -> None:
    create(rest, AUTOSCALERS, autoscaler(name))
    table = kubectl("get", "autoscalers", name)
    assert table.returncode == 0, table.stderr
    assert table.stdout.split()[:5] == ["NAME", "POOL", "PENDING", "DECISION", "AGE"]

    create(rest, INSTANCES, instance("vm"), kube_namespace)
    rest.request(
        "PATCH",
        INSTANCES.path(kube_namespace, "vm", "status"),
        {"status": {"instanceId": "i-123", "state": "running", "publicIP": "203.0.113.7"}},
        content_type=MERGE,
    )
    table = kubectl("get", "instances", "vm", "-n", kube_namespace)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "ID", "STATE", "IP", "AGE"]
    assert row.split()[:4] == ["vm", "i-123", "running", "203.0.113.7"]


def test_kubectl_scale_sets_target_nodes(rest: RestClient, kubectl: Kubectl, name: str) -> None:
    create(rest, NODEPOOLS, nodepool(name))
    result = kubectl("scale", f"nodepool/{name}", "--replicas=3")
    assert result.returncode == 0, result.stderr
    pool = rest.get(NODEPOOLS.path(name=name))
    assert pool["spec"]["targetNodes"] == 3
    assert pool["metadata"]["generation"] == 2  # a spec change, as the seeds say

    refused = kubectl("scale", f"nodepool/{name}", "--replicas=-1")
    assert refused.returncode != 0
    # and past kubectl's own check, the apiserver refuses it too, as it does beyond maxNodes
    for replicas in (-1, 11):
        with pytest.raises(RestError) as caught:
            rest.request(
                "PATCH",
                NODEPOOLS.path(name=name, subresource="scale"),
                {"spec": {"replicas": replicas}},
                content_type=MERGE,
            )
        assert caught.value.status == 422
        assert "spec.targetNodes" in caught.value.body
    assert rest.get(NODEPOOLS.path(name=name))["spec"]["targetNodes"] == 3


def test_scale_subresource_reports_status_and_selector(rest: RestClient, name: str) -> None:
    create(rest, NODEPOOLS, nodepool(name, targetNodes=4))
    rest.request(
        "PATCH",
        NODEPOOLS.path(name=name, subresource="status"),
        {"status": {"currentNodes": 2, "selector": f"kubeloop.dev/nodepool={name}"}},
        content_type=MERGE,
    )
    scale = rest.get(NODEPOOLS.path(name=name, subresource="scale"))
    assert scale["spec"]["replicas"] == 4
    assert scale["status"] == {"replicas": 2, "selector": f"kubeloop.dev/nodepool={name}"}


def test_status_subresource_is_separate_from_spec(rest: RestClient, name: str) -> None:
    created = create(rest, NODEPOOLS, nodepool(name, targetNodes=1))
    # a write to the main resource ignores status ...
    created["spec"]["targetNodes"] = 2
    created["status"] = {"currentNodes": 7}
    updated = rest.request("PUT", NODEPOOLS.path(name=name), created)
    assert updated["spec"]["targetNodes"] == 2
    assert "status" not in updated
    # ... and a write to /status ignores spec, leaving generation alone
    patched = rest.request(
        "PATCH",
        NODEPOOLS.path(name=name, subresource="status"),
        {"spec": {"targetNodes": 9}, "status": {"currentNodes": 2}},
        content_type=MERGE,
    )
    assert patched["spec"]["targetNodes"] == 2
    assert patched["status"]["currentNodes"] == 2
    assert patched["metadata"]["generation"] == updated["metadata"]["generation"]
    # status defaults come with the first status write, as parse_nodepool assumes
    assert patched["status"]["scaleOperation"] == "inactive"
    assert parse_nodepool(patched).status.current_nodes == 2


def test_status_is_validated_too(rest: RestClient, name: str) -> None:
    create(rest, NODEPOOLS, nodepool(name))
    with pytest.raises(RestError) as caught:
        rest.request(
            "PATCH",
            NODEPOOLS.path(name=name, subresource="status"),
            {"status": {"scaleOperation": "busy"}},
            content_type=MERGE,
        )
    assert caught.value.status == 422
    assert "status.scaleOperation" in caught.value.body


def test_kubectl_explain_shows_descriptions(kubectl: Kubectl) -> None:
    # the apiserver publishes a new CRD's OpenAPI asynchronously
    deadline = time.monotonic() + 30
    while True:
        result = kubectl("explain", "nodepools.spec.targetNodes")
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.returncode == 0, result.stderr
    assert "How many nodes the pool should have" in result.stdout
