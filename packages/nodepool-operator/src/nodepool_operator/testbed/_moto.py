"""A local EC2 API server: moto's, in a child process on a free loopback port.

For tests and ``nodepool-operator demo --cloud aws``; never for a real cluster. moto comes
with the ``aws-demo`` extra (and the dev group). The server is a separate process so that
its settings (environment variables read when moto is imported) are its own, and so that
the operator under test can be SIGKILLed and restarted while the "cloud" lives on, as a
real one would.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

#: moto's server accepts any keys; botocore's chain still needs some to sign with.
TEST_CREDENTIALS: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
DEFAULT_REGION: Final = "us-east-1"
#: Make moto refuse unknown instance types, as EC2 does (it accepts any name otherwise).
_SERVER_ENV: Final = {"MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true"}
_START_TIMEOUT_S = 60.0


class MotoUnavailable(RuntimeError):
    """moto[server] is not installed, or its server did not start."""


class MotoServer:
    """``with MotoServer() as moto:`` an EC2 (and SSM) API at ``moto.endpoint_url``.

    Args:
        log: where the server's output goes; None: discarded.
    """

    def __init__(self, *, log: Path | None = None) -> None:
        self._log = log
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, region: str = DEFAULT_REGION) -> dict[str, str]:
        """Environment for a process that should talk to this server through the chain."""
        return {**TEST_CREDENTIALS, "AWS_REGION": region, "AWS_DEFAULT_REGION": region}

    def start(self) -> None:
        try:
            import moto.server  # noqa: F401  (only to fail early and clearly)
        except ImportError as err:
            raise MotoUnavailable(
                "moto's server is not installed; install the aws-demo extra "
                "(pip install 'nodepool-operator[aws-demo]') or `uv sync --group dev`"
            ) from err
        self.port = _free_port()
        out = self._log.open("ab") if self._log is not None else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **_SERVER_ENV},
            )
        finally:
            if not isinstance(out, int):
                out.close()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise MotoUnavailable(f"moto's server exited with {self._proc.returncode}")
            if self._ready():
                return
            time.sleep(0.1)
        self.stop()
        raise MotoUnavailable(f"moto's server did not answer within {_START_TIMEOUT_S:.0f} s")

    def reset(self) -> None:
        """Forget every instance, parameter and so on: a fresh account."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30):
            pass

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class LaunchEnvironment:
    """What a node class needs in a fresh moto account, made by :func:`seed_launch_environment`."""

    ami_id: str
    ami_parameter: str
    """An SSM parameter holding ``ami_id``, as EKS publishes its node AMIs."""
    subnet_ids: tuple[str, ...]
    security_group_id: str
    instance_profile: str
    cluster_name: str
    """An EKS cluster (moto's: an endpoint and a CA that are no real ones) the nodes join."""

    def node_class_spec(self) -> dict[str, Any]:
        """An AwsNodeClass ``spec`` that launches into this environment: AL2023 (the
        operator writes the nodeadm NodeConfig the moto kubelets register their Nodes from)
        in the seeded EKS cluster, whose coordinates the operator reads with DescribeCluster."""
        return {
            "amiFamily": "AL2023",
            "cluster": {"name": self.cluster_name},
            "amiSsmParameter": self.ami_parameter,
            "subnetIds": list(self.subnet_ids),
            "securityGroupIds": [self.security_group_id],
            "instanceProfile": self.instance_profile,
        }


async def seed_launch_environment(
    endpoint_url: str, *, name: str = "kubeloop-nodes"
) -> LaunchEnvironment:
    """Make the AMI parameter, security group, instance profile and EKS cluster (all called
    ``name``) a node class names, in moto's default VPC (as an account's administrator would
    before installing the operator).

    Uses the standard chain for credentials (see :meth:`MotoServer.env`).
    """
    from aiobotocore.session import AioSession

    session = AioSession()
    async with (
        session.create_client("ec2", endpoint_url=endpoint_url) as ec2,
        session.create_client("ssm", endpoint_url=endpoint_url) as ssm,
        session.create_client("iam", endpoint_url=endpoint_url) as iam,
        session.create_client("eks", endpoint_url=endpoint_url) as eks,
    ):
        images = (await ec2.describe_images(Owners=["amazon"]))["Images"]
        ami = sorted(i["ImageId"] for i in images)[0]
        parameter = f"/{name}/node-ami"
        await ssm.put_parameter(Name=parameter, Value=ami, Type="String", Overwrite=True)
        vpc = next(v["VpcId"] for v in (await ec2.describe_vpcs())["Vpcs"] if v.get("IsDefault"))
        subnets = (await ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}]))[
            "Subnets"
        ]
        group = await ec2.create_security_group(
            GroupName=name, Description="kubeloop nodes", VpcId=vpc
        )
        role = await iam.create_role(RoleName=name, AssumeRolePolicyDocument=_EC2_TRUST)
        await iam.create_instance_profile(InstanceProfileName=name)
        await iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
        await eks.create_cluster(
            name=name,
            roleArn=role["Role"]["Arn"],
            resourcesVpcConfig={"subnetIds": [s["SubnetId"] for s in subnets][:3]},
        )
        return LaunchEnvironment(
            ami_id=ami,
            ami_parameter=parameter,
            subnet_ids=tuple(sorted(s["SubnetId"] for s in subnets)[:3]),
            security_group_id=group["GroupId"],
            instance_profile=name,
            cluster_name=name,
        )


_EC2_TRUST: Final = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
    '"Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
)
