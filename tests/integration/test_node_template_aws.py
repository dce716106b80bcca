"""The template is the node: for every instance type the cloud offers in the test bed, the
Autoscaler's node template has the allocatable and labels of the Node that type's kubelet
registers.

Each VM is launched in moto's EC2 as the NodePool controller launches it (the pool's AL2023
user data and create request, the node class's root volume as a block device mapping); the
moto kubelets register its Node on a real kube-apiserver from what a kubelet reads: the
NodeConfig in the user data, the instance's type (DescribeInstanceTypes) and its volume
(DescribeVolumes), never the operator's template. The template is
:func:`~nodepool_operator.controllers.pool_template` over the same cloud's catalogue.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiobotocore.session import AioSession

from kubeloop import NODES, Client
from nodepool_operator.api import parse_nodeclass, parse_nodepool
from nodepool_operator.cloud import AwsCloud
from nodepool_operator.controllers import pool_template
from nodepool_operator.controllers.nodepool._intent import create_request
from nodepool_operator.controllers.nodepool._userdata import pool_user_data
from nodepool_operator.scheduling import Resources
from nodepool_operator.testbed import MotoKubelets, MotoServer, seed_launch_environment
from tests import factories
from tests._nodeadm import nodeadm_check

pytestmark = pytest.mark.integration

#: What the test bed's cloud offers: small and large, Intel, AMD and Graviton (arm64),
#: burstable, compute, memory (moto knows 1,373 types; launching all is minutes, not seconds).
OFFERED = (
    "c5.large",
    "c5.12xlarge",  # the demo's (nodepool-operator demo --cloud aws)
    "c6g.xlarge",
    "g5.xlarge",  # one NVIDIA A10G: nvidia.com/gpu in the template and on the Node
    "m5.large",
    "m5.4xlarge",
    "m5.24xlarge",
    "m6g.large",
    "m7i.2xlarge",
    "r5.2xlarge",
    "t3.micro",
    "t4g.medium",
)
#: Types launched by a class with VPC CNI prefix delegation: capped at 110 (up to 30 vCPUs)
#: and 250, and under the cap (t3.micro: 2 ENIs x 1 prefix x 16 + 2 = 34).
PREFIX_DELEGATED = frozenset({"c6g.xlarge", "m5.24xlarge", "r5.2xlarge", "t3.micro"})
#: Labels the kubelet and cloud controller manager put per node: no template can know them
#: (zone and region belong to issue 21's item 4).
PER_NODE = (
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)


async def test_every_offered_types_template_is_its_registered_node(
    moto: MotoServer, kube_client: Client
) -> None:
    env = await seed_launch_environment(moto.endpoint_url, name="shop")
    classes = [
        parse_nodeclass(
            factories.nodeclass(
                "general",
                **env.node_class_spec(),
                kubelet={"systemReserved": {"cpu": "100m", "memory": "200Mi"}, **kubelet},
                rootVolume={"sizeGib": 37},
            )
        ).spec
        for kubelet in ({}, {"prefixDelegation": True})
    ]
    templates: dict[str, Any] = {}
    async with AwsCloud(endpoint_url=moto.endpoint_url, instance_types=OFFERED) as aws:
        catalogue = await aws.instance_types()
        assert sorted(t.name for t in catalogue) == sorted(OFFERED)
        for index, instance_type in enumerate(catalogue):
            node_class = classes[instance_type.name in PREFIX_DELEGATED]
            pool = parse_nodepool(
                factories.nodepool(
                    f"p{index}",
                    instance_type=instance_type.name,
                    node_class="general",
                    labels={"team": "a"},
                    taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                )
            )
            name = f"p{index}-00000"
            user_data = await pool_user_data(aws, pool, name, instance_type, node_class)
            nodeadm_check(user_data)
            vm = await aws.create(
                create_request(
                    pool_name=f"p{index}",
                    pool_uid=f"uid-{index}",
                    instance_type=instance_type.name,
                    name=name,
                    user_data=user_data,
                    node_class=node_class,
                )
            )
            templates[vm.id] = pool_template(pool, catalogue, node_class=node_class)

    async with AioSession().create_client("ec2", endpoint_url=moto.endpoint_url) as ec2:
        volumes = (await ec2.describe_volumes())["Volumes"]
    assert len(volumes) == len(OFFERED), "one volume per VM: the class's root volume"
    assert {(v["Size"], v["VolumeType"], v["Encrypted"]) for v in volumes} == {(37, "gp3", True)}
    assert {v["Attachments"][0]["Device"] for v in volumes} == {"/dev/xvda"}

    async with MotoKubelets(moto.endpoint_url, kube_client) as kubelets:
        await kubelets.sync()
    nodes = (await kube_client.list(NODES))["items"]
    assert len(nodes) == len(OFFERED)
    arches, pods, gpus = set(), set(), 0
    for node in nodes:
        instance_id = node["spec"]["providerID"].rsplit("/", 1)[1]
        template = templates[instance_id]
        kind = template.name
        allocatable = Resources.from_resource_list(node["status"]["allocatable"])
        assert allocatable == template.allocatable, kind
        labels = {k: v for k, v in node["metadata"]["labels"].items() if k not in PER_NODE}
        assert labels == dict(template.labels), kind
        taints = [(t["key"], t.get("value", ""), t["effect"]) for t in node["spec"]["taints"]]
        assert taints == [(t.key, t.value, t.effect) for t in template.taints], kind
        arches.add(labels["kubernetes.io/arch"])
        pods.add(int(node["status"]["allocatable"]["pods"]))
        gpus += int(node["status"]["allocatable"].get("nvidia.com/gpu", 0))
    assert arches == {"amd64", "arm64"}, "Graviton types register as arm64, and say so"
    assert {34, 110, 250} <= pods, "prefix delegation's caps and count were exercised"
    assert {29, 234} <= pods, "and the ENI limit of the others"
    assert gpus == 1, "the GPU type's template and Node both offer its one GPU"
