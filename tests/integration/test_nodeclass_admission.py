"""AwsNodeClass against the real kube-apiserver: bad launch settings are refused at admission
with the field named, good ones are stored as written, and NodePools and Instances take a
``nodeClassRef``. Python's parser agrees with admission on every case (it guards objects
written before a schema change).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeloop.envtest import ControlPlane, RestClient, RestError
from nodepool_operator.api import (
    AWSNODECLASSES,
    INSTANCES,
    NODEPOOLS,
    InvalidField,
    parse_instance,
    parse_nodeclass,
    parse_nodepool,
)

pytestmark = pytest.mark.integration

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
AMI = "ami-0abcdef1234567890"


@pytest.fixture(scope="module")
def rest(kube_control_plane: ControlPlane) -> RestClient:
    kube_control_plane.install_crds(sorted(CRD_DIR.glob("kubeloop.dev_*.yaml")))
    return kube_control_plane.rest()


@pytest.fixture
def name(rest: RestClient) -> Iterator[str]:
    value = f"t-{uuid.uuid4().hex[:8]}"
    yield value
    for res in (AWSNODECLASSES, NODEPOOLS):
        try:
            rest.delete(res.path(name=value))
        except RestError as err:
            if err.status != 404:
                raise


def nodeclass(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": AWSNODECLASSES.api_version,
        "kind": AWSNODECLASSES.kind,
        "metadata": {"name": name},
        "spec": {"amiId": AMI, **spec},
    }


def create(rest: RestClient, obj: dict[str, Any]) -> Any:
    return rest.post(AWSNODECLASSES.path() + "?fieldValidation=Strict", obj)


BAD = [
    pytest.param({"amiId": None}, ["exactly one of amiId and amiSsmParameter"], id="no-ami"),
    pytest.param(
        {"amiSsmParameter": "/aws/service/x"},
        ["exactly one of amiId and amiSsmParameter"],
        id="both-amis",
    ),
    pytest.param({"amiId": "ubuntu-22.04"}, ["spec.amiId"], id="ami-not-an-id"),
    pytest.param({"amiFamily": "AL2"}, ["spec.amiFamily", "AL2023"], id="unknown-ami-family"),
    pytest.param({"cluster": {"name": ""}}, ["spec.cluster.name"], id="empty-cluster-name"),
    pytest.param(
        {"cluster": {"name": "prod", "endpoint": "http://plain"}},
        ["spec.cluster.endpoint"],
        id="cluster-endpoint-not-https",
    ),
    pytest.param({"kubelet": {"maxPods": 0}}, ["spec.kubelet.maxPods"], id="max-pods-zero"),
    pytest.param(
        {"amiId": None, "amiSsmParameter": "aws/service/x"},
        ["spec.amiSsmParameter"],
        id="ssm-parameter-not-a-path",
    ),
    pytest.param({"subnetIds": ["subnet-xyz"]}, ["spec.subnetIds[0]"], id="subnet-not-an-id"),
    pytest.param(
        {"subnetIds": ["subnet-0123abcd", "subnet-0123abcd"]},
        ["spec.subnetIds[1]", "Duplicate value"],
        id="subnet-twice",
    ),
    pytest.param(
        {"securityGroupIds": ["sg-0123abcd"] + [f"sg-0123abc{i}" for i in range(5)]},
        ["spec.securityGroupIds", "must have at most 5 items"],
        id="too-many-security-groups",
    ),
    pytest.param(
        {"securityGroupIds": ["default"]}, ["spec.securityGroupIds[0]"], id="group-by-name"
    ),
    pytest.param(
        {"instanceProfile": "nodes role"}, ["spec.instanceProfile"], id="profile-with-space"
    ),
    pytest.param(
        {"userData": "#!/bin/sh\necho ${nodename}\n"},
        ["spec.userData", "placeholders"],
        id="user-data-unknown-placeholder",
    ),
    pytest.param(
        {"userData": "x" * 16385},
        ["spec.userData", "16384"],
        id="user-data-too-large",
    ),
    pytest.param({"tags": {"Name": "x"}}, ["spec.tags", "reserved"], id="tag-name-reserved"),
    pytest.param(
        {"tags": {"aws:cloudformation:stack": "x"}}, ["spec.tags", "reserved"], id="tag-aws"
    ),
    pytest.param(
        {"tags": {"kubeloop.dev/launch-token": "x"}},
        ["spec.tags", "reserved"],
        id="tag-operator-reserved",
    ),
    pytest.param(
        {"rootVolume": {"sizeGib": 2}},
        ["spec.rootVolume.sizeGib", "greater than or equal to 4"],
        id="root-volume-too-small",
    ),
    pytest.param(
        {"rootVolume": {"volumeType": "st1"}},
        ["spec.rootVolume.volumeType", "Unsupported value"],
        id="root-volume-type",
    ),
    pytest.param(
        {"rootVolume": {"deviceName": "xvda"}},
        ["spec.rootVolume.deviceName", "should match"],
        id="root-volume-device",
    ),
    pytest.param(
        {"tags": {"kubernetes.io/cluster/demo": "owned"}},
        ["spec.tags", "reserved"],
        id="tag-cluster-ownership-reserved",
    ),
    pytest.param(
        {"tags": {"eks:eks-cluster-name": "demo"}},
        ["spec.tags", "reserved"],
        id="tag-eks-cluster-reserved",
    ),
    pytest.param({"tags": {"k" * 129: "x"}}, ["spec.tags", "128"], id="tag-key-too-long"),
    pytest.param(
        {"tags": {f"t{i}": "x" for i in range(41)}},
        ["spec.tags", "must have at most 40 items"],
        id="too-many-tags",
    ),
    pytest.param({"tags": {"team": "v" * 257}}, ["spec.tags.team"], id="tag-value-too-long"),
    pytest.param({"subnets": ["subnet-0123abcd"]}, ['unknown field "spec.subnets"'], id="typo"),
    pytest.param(
        {"subnetIds": ["subnet-0123abcd"], "subnetSelectorTerms": [{"tags": {"team": "a"}}]},
        ["spec.subnetSelectorTerms", "set subnetIds or subnetSelectorTerms, not both"],
        id="subnets-two-ways",
    ),
    pytest.param(
        {
            "securityGroupIds": ["sg-0123abcd"],
            "securityGroupSelectorTerms": [{"name": "nodes"}],
        },
        ["spec.securityGroupSelectorTerms", "not both"],
        id="groups-two-ways",
    ),
    pytest.param(
        {"subnetSelectorTerms": [{"tags": {"team": "a"}, "id": "subnet-0123abcd"}]},
        ["spec.subnetSelectorTerms[0]", "exactly one of tags and id"],
        id="subnet-term-two-ways",
    ),
    pytest.param(
        {"subnetSelectorTerms": [{}]},
        ["spec.subnetSelectorTerms[0]", "exactly one of tags and id"],
        id="subnet-term-empty",
    ),
    pytest.param(
        {"subnetSelectorTerms": []},
        ["spec.subnetSelectorTerms", "at least 1 item"],
        id="subnet-terms-empty",
    ),
    pytest.param(
        {"subnetSelectorTerms": [{"id": "subnet-xyz"}]},
        ["spec.subnetSelectorTerms[0].id"],
        id="subnet-term-not-an-id",
    ),
    pytest.param(
        {"securityGroupSelectorTerms": [{"id": "sg-0123abcd", "name": "nodes"}]},
        ["spec.securityGroupSelectorTerms[0]", "exactly one of tags, id and name"],
        id="group-term-two-ways",
    ),
]


@pytest.mark.parametrize(("spec", "fragments"), BAD)
def test_bad_launch_settings_are_refused_naming_the_field(
    rest: RestClient, name: str, spec: dict[str, Any], fragments: list[str]
) -> None:
    obj = nodeclass(name, **spec)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    with pytest.raises(RestError) as caught:
        create(rest, obj)
    assert caught.value.status in (400, 422), caught.value.body
    message = json.loads(caught.value.body)["message"]
    for fragment in fragments:
        assert fragment in message, message
    if "unknown field" not in fragments[0]:
        with pytest.raises(InvalidField):
            parse_nodeclass(obj)


def test_full_nodeclass_is_accepted_as_written(rest: RestClient, name: str) -> None:
    spec = {
        "amiSsmParameter": "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/"
        "standard/recommended/image_id",
        "subnetIds": ["subnet-0123abcd", "subnet-4567ef01"],
        "securityGroupIds": ["sg-0123abcd"],
        "instanceProfile": "kubeloop-nodes",
        "amiFamily": "Custom",
        "cluster": {
            "name": "prod",
            "endpoint": "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
            "certificateAuthority": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
            "serviceCidr": "10.100.0.0/16",
        },
        "kubelet": {"maxPods": 58, "systemReserved": {"cpu": "100m"}, "prefixDelegation": True},
        "rootVolume": {
            "sizeGib": 50,
            "volumeType": "io2",
            "encrypted": True,
            "deviceName": "/dev/xvda",
        },
        "userData": "#!/bin/sh\n/usr/local/bin/join --node-name ${nodeName} "
        "--kubelet-extra-args '--node-labels=pool=${poolName},type=${instanceType}'\n$HOME\n",
        "tags": {"team": "platform", "cost-center": "42"},
    }
    stored = create(rest, {**nodeclass(name), "spec": spec})
    assert stored["spec"] == spec
    parsed = parse_nodeclass(stored)
    assert parsed.spec.image == f"resolve:ssm:{spec['amiSsmParameter']}"
    rendered = parsed.spec.render_user_data(
        node_name="pool-abcde", pool_name="pool", instance_type="m5.large"
    )
    assert rendered is not None
    assert "--node-name pool-abcde" in rendered
    assert "pool=pool,type=m5.large" in rendered
    assert "$HOME" in rendered, "shell variables are left alone"


def test_nodepools_and_instances_take_a_node_class_ref(rest: RestClient, name: str) -> None:
    pool = rest.post(
        NODEPOOLS.path() + "?fieldValidation=Strict",
        {
            "apiVersion": NODEPOOLS.api_version,
            "kind": NODEPOOLS.kind,
            "metadata": {"name": name},
            "spec": {"instanceType": "m5.large", "nodeClassRef": {"name": "nodes"}},
        },
    )
    ref = parse_nodepool(pool).spec.node_class_ref
    assert ref is not None
    assert ref.name == "nodes"
    with pytest.raises(RestError) as caught:
        rest.post(
            NODEPOOLS.path() + "?fieldValidation=Strict",
            {
                "apiVersion": NODEPOOLS.api_version,
                "kind": NODEPOOLS.kind,
                "metadata": {"name": name + "-x"},
                "spec": {"instanceType": "m5.large", "nodeClassRef": {"name": ""}},
            },
        )
    assert "spec.nodeClassRef.name" in json.loads(caught.value.body)["message"]
    inst = rest.post(
        INSTANCES.path("default") + "?fieldValidation=Strict",
        {
            "apiVersion": INSTANCES.api_version,
            "kind": INSTANCES.kind,
            "metadata": {"name": name},
            "spec": {"image": AMI, "instanceType": "m5.large", "nodeClassRef": {"name": "nodes"}},
        },
    )
    try:
        ref = parse_instance(inst).spec.node_class_ref
        assert ref is not None
        assert ref.name == "nodes"
    finally:
        rest.delete(INSTANCES.path("default", name))


def test_selector_terms_are_accepted_as_written(rest: RestClient, name: str) -> None:
    spec = {
        "subnetSelectorTerms": [
            {"tags": {"kubernetes.io/role/internal-elb": "1", "discovery": "*"}},
            {"id": "subnet-0123abcd"},
        ],
        "securityGroupSelectorTerms": [
            {"tags": {"discovery": "prod"}},
            {"id": "sg-0123abcd"},
            {"name": "eks-cluster-sg-prod"},
        ],
    }
    stored = create(rest, nodeclass(name, **spec))
    parsed = parse_nodeclass(stored).spec
    assert [(t.tags, t.id) for t in parsed.subnet_selector_terms] == [
        ({"kubernetes.io/role/internal-elb": "1", "discovery": "*"}, None),
        (None, "subnet-0123abcd"),
    ]
    assert [(t.tags, t.id, t.name) for t in parsed.security_group_selector_terms] == [
        ({"discovery": "prod"}, None, None),
        (None, "sg-0123abcd", None),
        (None, None, "eks-cluster-sg-prod"),
    ]
    assert parsed.subnet_ids == []
