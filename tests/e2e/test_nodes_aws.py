"""Nodes on EC2 (moto's server) join as EKS sees them, through AL2023 user data nodeadm takes.

The pool names an AL2023 AwsNodeClass: the operator reads the cluster's coordinates with EKS
DescribeCluster and launches each instance with a nodeadm NodeConfig (merged after the
class's own script). The oracle is EC2's own record, read with a separate client, and the
real nodeadm's verdict on each instance's user data as EC2 returns it. The moto kubelets
register each Node from that user data and from EC2 alone (:mod:`nodepool_operator.testbed`),
so what is asserted of the Nodes is what the NodeConfig carried.
"""

from __future__ import annotations

import base64
import contextlib
import tomllib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiobotocore.session import AioSession

from kubeloop import NODES, Object
from nodepool_operator.api import AWSNODECLASSES, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.testbed import MotoServer, seed_launch_environment
from tests._nodeadm import nodeadm_check
from tests.e2e.conftest import LABEL, OperatorEnv
from tests.e2e.moto_pool import operator_on_moto

pytestmark = pytest.mark.integration


@pytest.fixture
async def aws_env(operator_env: OperatorEnv, moto: MotoServer) -> AsyncIterator[OperatorEnv]:
    async with operator_on_moto(operator_env, moto) as env:
        yield env


async def _instances(endpoint_url: str, pool: str) -> list[dict[str, Any]]:
    async with AioSession().create_client("ec2", endpoint_url=endpoint_url) as ec2:
        reply = await ec2.describe_instances(
            Filters=[{"Name": f"tag:{POOL_LABEL}", "Values": [pool]}]
        )
        found: list[dict[str, Any]] = [
            dict(i) for r in reply["Reservations"] for i in r["Instances"]
        ]
        for raw in found:
            attribute = await ec2.describe_instance_attribute(
                InstanceId=raw["InstanceId"], Attribute="userData"
            )
            raw["UserDataText"] = base64.b64decode(attribute["UserData"]["Value"]).decode()
    return sorted(found, key=lambda raw: raw["InstanceId"])


async def _tag_subnets(
    endpoint_url: str, subnet_ids: Sequence[str], tags: dict[str, str]
) -> dict[str, str]:
    """Tag the subnets (as an administrator marks the nodes' subnets); their zones by id."""
    async with AioSession().create_client("ec2", endpoint_url=endpoint_url) as ec2:
        await ec2.create_tags(
            Resources=list(subnet_ids), Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
        )
        reply = await ec2.describe_subnets(SubnetIds=list(subnet_ids))
    zones = {s["SubnetId"]: s["AvailabilityZone"] for s in reply["Subnets"]}
    assert len(set(zones.values())) == len(zones), "the seeded subnets are in different zones"
    return zones


#: A node class's own user data of each family, which the operator's bootstrap is merged with.
USER_DATA = {
    "AL2023": "#!/bin/bash\necho joining ${poolName}\n",
    "Bottlerocket": "[settings.host-containers.admin]\nenabled = true\n# joining ${poolName}\n",
}


def _kubelet_owned(node: Object) -> dict[str, Any]:
    """The fields the kubelet's own write (the registration) set."""
    for entry in node["metadata"].get("managedFields") or ():
        if entry.get("manager") == "kubelet" and entry.get("operation") == "Update":
            return dict(entry.get("fieldsV1") or {})
    return {}


@pytest.mark.parametrize("family", ["AL2023", "Bottlerocket"])
async def test_nodes_are_named_and_labelled_as_eks_registers_them(
    aws_env: OperatorEnv, moto: MotoServer, family: str
) -> None:
    env = aws_env
    name = f"eks-{env.run_id}"
    seeded = await seed_launch_environment(moto.endpoint_url, name=name)
    # two of the seeded subnets (two zones) are the nodes': found by a tag, not by id
    chosen = await _tag_subnets(moto.endpoint_url, seeded.subnet_ids[:2], {"discovery": name})
    spec = {k: v for k, v in seeded.node_class_spec().items() if k != "subnetIds"}
    await env.create(
        AWSNODECLASSES,
        {
            "apiVersion": AWSNODECLASSES.api_version,
            "kind": AWSNODECLASSES.kind,
            "metadata": {"name": name},
            "spec": {
                **spec,
                "subnetSelectorTerms": [{"tags": {"discovery": name}}],
                "amiFamily": family,
                "userData": USER_DATA[family],
                "kubelet": {"systemReserved": {"cpu": "100m", "memory": "100Mi"}},
            },
        },
    )
    await env.create(
        NODEPOOLS,
        {
            "apiVersion": NODEPOOLS.api_version,
            "kind": NODEPOOLS.kind,
            "metadata": {"name": name},
            "spec": {
                "instanceType": "m5.large",
                "targetNodes": 2,
                "maxNodes": 3,
                "labels": {"team": "payments", "node-role.kubernetes.io/worker": ""},
                "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
                "nodeClassRef": {"name": name},
            },
        },
    )
    await env.start(controllers=("nodepool",))

    async def registered() -> list[dict[str, Any]] | None:
        pool = await env.client.get(NODEPOOLS, name)
        records = (pool.get("status") or {}).get("instances") or []
        named = [r for r in records if r.get("nodeName")]
        return named if len(named) == 2 else None

    records = await env.eventually(registered, "both instances' Nodes registered", timeout=90)
    assert records is not None
    instances = await _instances(moto.endpoint_url, name)
    assert len(instances) == 2
    assert {r["nodeName"] for r in records} == {i["PrivateDnsName"] for i in instances}
    # EC2's record: one instance in each tagged subnet (balanced over their two zones)
    assert sorted(i["SubnetId"] for i in instances) == sorted(chosen)
    assert sorted(i["Placement"]["AvailabilityZone"] for i in instances) == sorted(chosen.values())
    pool = await env.client.get(NODEPOOLS, name)
    assert pool["status"]["zones"] == sorted(chosen.values())

    for raw in instances:
        user_data = raw["UserDataText"]
        if family == "AL2023":
            nodeadm_check(user_data)  # the real nodeadm takes what EC2 holds
            assert user_data.startswith("MIME-Version: 1.0\n")
            assert f"echo joining {name}" in user_data  # the class's script is kept
            assert "--register-with-taints=dedicated=payments:NoSchedule" in user_data
        else:
            settings = tomllib.loads(user_data)["settings"]
            assert settings["host-containers"]["admin"] == {"enabled": True}  # kept
            assert settings["kubernetes"]["node-taints"] == {"dedicated": ["payments:NoSchedule"]}

        node_name = raw["PrivateDnsName"]
        node = await env.client.get(NODES, node_name)
        zone = raw["Placement"]["AvailabilityZone"]
        assert node["spec"]["providerID"] == f"aws:///{zone}/{raw['InstanceId']}"
        labels = node["metadata"]["labels"]
        assert labels[POOL_LABEL] == name
        assert labels[LABEL] == env.run_id
        assert labels["team"] == "payments"
        assert labels["kubernetes.io/hostname"] == node_name
        assert labels["node.kubernetes.io/instance-type"] == "m5.large"
        assert labels["topology.kubernetes.io/zone"] == zone
        assert env.provider is not None
        assert labels["topology.kubernetes.io/region"] == env.provider.region
        assert {"key": "dedicated", "value": "payments", "effect": "NoSchedule"} in node["spec"][
            "taints"
        ]
        # m5.large: 2 vCPUs, 8 GiB, 29 pods (3 ENIs of 10 addresses); kube-reserved 70m and
        # 574Mi (EKS's formula), system-reserved as the class says, eviction at 100Mi
        assert node["status"]["allocatable"]["cpu"] == "1830m"
        assert node["status"]["allocatable"]["memory"] == f"{8192 - 574 - 100 - 100}Mi"
        assert node["status"]["allocatable"]["pods"] == "29"

        # present at registration: the kubelet's own create set them...
        owned = _kubelet_owned(node)
        owned_labels = owned["f:metadata"]["f:labels"]
        assert f"f:{POOL_LABEL}" in owned_labels
        assert "f:team" in owned_labels
        # (taints are one atomic list, owned by whoever wrote it last, e.g. the node
        # lifecycle controller: what the kubelet registered with is in its user data, above)
        # ...except the label NodeRestriction keeps a kubelet from setting, which the
        # operator adds after registration
        assert "f:node-role.kubernetes.io/worker" not in owned_labels

    async def worker_label() -> bool:
        nodes = [await env.client.get(NODES, r["nodeName"]) for r in records]
        return all("node-role.kubernetes.io/worker" in n["metadata"]["labels"] for n in nodes)

    await env.eventually(worker_label, "the operator to add the kubelet-forbidden label")

    # scaling down removes one instance and its Node, whose name is not the instance's
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

    async def one_left() -> bool:
        states = sorted(i["State"]["Name"] for i in await _instances(moto.endpoint_url, name))
        nodes, _ = await env.client.list_all(NODES, label_selector=f"{POOL_LABEL}={name}")
        return states[-1] == "terminated" and states[0] == "running" and len(nodes) == 1

    await env.eventually(one_left, "one instance and one Node to be left", timeout=90)
    with contextlib.suppress(Exception):
        await env.client.delete(AWSNODECLASSES, name)


def _condition(obj: Object, type_: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


async def test_a_create_refused_for_its_node_class_holds_until_the_class_is_fixed(
    aws_env: OperatorEnv, moto: MotoServer
) -> None:
    """The node class names an AMI parameter that does not exist: the pool is Degraded with
    reason InvalidAMI (not InvalidInstanceType) and no VM is made; fixing the class alone,
    the pool untouched, gives it a fresh try and it converges."""
    env = aws_env
    name = f"held-{env.run_id}"
    seeded = await seed_launch_environment(moto.endpoint_url, name=name)
    spec = {**seeded.node_class_spec(), "amiSsmParameter": f"/{name}/no-such-ami"}
    await env.create(
        AWSNODECLASSES,
        {
            "apiVersion": AWSNODECLASSES.api_version,
            "kind": AWSNODECLASSES.kind,
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    await env.create(
        NODEPOOLS,
        {
            "apiVersion": NODEPOOLS.api_version,
            "kind": NODEPOOLS.kind,
            "metadata": {"name": name},
            "spec": {
                "instanceType": "m5.large",
                "targetNodes": 1,
                "maxNodes": 2,
                "nodeClassRef": {"name": name},
            },
        },
    )
    await env.start(controllers=("nodepool",))

    async def refused() -> dict[str, Any] | None:
        cond = _condition(await env.client.get(NODEPOOLS, name), "Degraded")
        return cond if cond is not None and cond.get("reason") == "InvalidAMI" else None

    cond = await env.eventually(refused, "Degraded=InvalidAMI", timeout=90)
    assert cond is not None
    assert "ParameterNotFound" in cond["message"]
    assert await _instances(moto.endpoint_url, name) == []
    generation = (await env.client.get(NODEPOOLS, name))["metadata"]["generation"]

    await env.client.patch(
        AWSNODECLASSES, name, {"spec": {"amiSsmParameter": seeded.ami_parameter}}
    )

    async def launched() -> bool:
        pool = await env.client.get(NODEPOOLS, name)
        degraded = _condition(pool, "Degraded") or {}
        states = [i["State"]["Name"] for i in await _instances(moto.endpoint_url, name)]
        return states == ["running"] and degraded.get("status") == "False"

    await env.eventually(launched, "one VM launched with the fixed class", timeout=90)
    # nothing but the class changed: the pool's spec is as it was
    assert (await env.client.get(NODEPOOLS, name))["metadata"]["generation"] == generation
    with contextlib.suppress(Exception):
        await env.client.delete(AWSNODECLASSES, name)
