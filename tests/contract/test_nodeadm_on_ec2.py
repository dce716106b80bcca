"""The ``moto`` fixture's closing check: nodeadm judges the user data of every instance EC2
holds that carries a NodeConfig, passes the others by, and fails on one nodeadm refuses."""

from __future__ import annotations

import pytest
from aiobotocore.session import AioSession

from nodepool_operator.cloud import al2023_user_data, kubelet_settings, node_config
from nodepool_operator.testbed import MotoServer, seed_launch_environment
from tests._nodeadm import NodeadmRefused, check_every_nodeconfig
from tests.unit._eks import CLUSTER, M5

#: A CA that is not base64: nodeadm's decoding refuses it.
BROKEN = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    certificateAuthority: '#'
"""


@pytest.mark.integration
async def test_every_nodeconfig_on_ec2_is_judged_and_a_refused_one_fails(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto_server.reset()  # not the ``moto`` fixture: its own closing check would fail here
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    seeded = await seed_launch_environment(moto_server.endpoint_url, name="nodeadm")
    ours = node_config(
        CLUSTER, kubelet_settings(M5), labels={"kubeloop.dev/nodepool": "web"}, taints=[]
    )

    async def launch(user_data: str) -> None:
        async with AioSession().create_client("ec2", endpoint_url=moto_server.endpoint_url) as ec2:
            await ec2.run_instances(
                ImageId=seeded.ami_id, MinCount=1, MaxCount=1, UserData=user_data
            )

    await launch(al2023_user_data(ours, "#!/bin/sh\necho hello\n"))
    await launch("#!/bin/sh\necho a Custom class's script\n")
    await launch('[settings.kubernetes]\ncluster-name = "c"\n')  # Bottlerocket's TOML
    assert check_every_nodeconfig(moto_server) == 1

    await launch(al2023_user_data(ours, BROKEN))
    with pytest.raises(NodeadmRefused, match="illegal base64"):
        check_every_nodeconfig(moto_server)
    moto_server.reset()
