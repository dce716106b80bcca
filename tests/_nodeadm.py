"""nodeadm's own verdict on a user data: the tests run it on every AL2023 user data they make.

nodeadm (tools/nodeadm/build.sh, cached under ~/.cache/kubeloop) is the program an EKS AL2023
AMI runs at boot. The version the Go module proxy serves offers ``nodeadm config check``,
which reads the configuration source and decodes it exactly as ``nodeadm init`` would. Its
``file://`` source takes one NodeConfig document only; the MIME multi-part reading and the
merging of several NodeConfigs happen in its ``imds://user-data`` source. So the user data
is handed to it as IMDS would: a loopback HTTP server answers the instance metadata
service's two requests (an IMDSv2 token, then ``/latest/user-data``), and nodeadm is pointed
at it with the AWS SDK's ``AWS_EC2_METADATA_SERVICE_ENDPOINT``. Nothing here reads the user
data: nodeadm does, and its exit status and log are the verdict.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from aiobotocore.session import AioSession

from nodepool_operator.testbed import MotoServer

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def nodeadm() -> Path:
    """The nodeadm binary (built once by tools/nodeadm/build.sh, then cached)."""
    out = subprocess.run(
        ["bash", str(ROOT / "tools" / "nodeadm" / "build.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return Path(out.stdout.strip().splitlines()[-1]) / "bin" / "nodeadm"


class NodeadmRefused(AssertionError):
    """nodeadm would not take this user data."""


def nodeadm_check(user_data: str | bytes) -> str:
    """Run ``nodeadm config check`` on ``user_data`` as the instance's user data; returns its
    log. Raises :class:`NodeadmRefused` with that log when nodeadm exits non-zero."""
    body = user_data.encode() if isinstance(user_data, str) else user_data
    with _metadata_service(body) as endpoint:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": endpoint,
        }
        done = subprocess.run(
            [str(nodeadm()), "config", "check", "--config-source", "imds://user-data"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise NodeadmRefused(f"nodeadm config check exited {done.returncode}:\n{log}")
    if "Configuration is valid" not in log:
        raise NodeadmRefused(f"nodeadm config check did not say the configuration is valid:\n{log}")
    return log


#: What marks an AL2023 user data: the NodeConfig the operator always writes into it.
NODECONFIG = "node.eks.aws/"


def check_every_nodeconfig(moto: MotoServer) -> int:
    """:func:`nodeadm_check` on the user data of every instance ``moto``'s EC2 holds
    (terminated ones too) that carries a NodeConfig; the number checked. Bottlerocket's TOML
    and a Custom class's script are not nodeadm's to judge.

    Run by the ``moto`` fixture after each test, so every AL2023 user data a test makes EC2
    launch with is judged by nodeadm, whichever test made it. The server's own region and
    credentials: a test may have emptied the environment's (the credential chain tests)."""
    env = moto.env()

    async def user_data() -> list[str]:
        texts: list[str] = []
        async with AioSession().create_client(
            "ec2",
            endpoint_url=moto.endpoint_url,
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        ) as ec2:
            async for page in ec2.get_paginator("describe_instances").paginate():
                for raw in (i for r in page["Reservations"] for i in r["Instances"]):
                    answer = await ec2.describe_instance_attribute(
                        InstanceId=raw["InstanceId"], Attribute="userData"
                    )
                    value = answer.get("UserData", {}).get("Value")
                    if value:
                        texts.append(base64.b64decode(value).decode())
        return texts

    # a loop of its own, in a thread: a fixture's teardown may run beside the test's loop
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        texts = pool.submit(asyncio.run, user_data()).result()
    judged = [text for text in texts if NODECONFIG in text]
    for text in judged:
        nodeadm_check(text)
    return len(judged)


@contextlib.contextmanager
def _metadata_service(user_data: bytes) -> Iterator[str]:
    """The two answers of the instance metadata service nodeadm's SDK asks for."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # IMDSv2: a session token first
            if self.path != "/latest/api/token":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
            self.end_headers()
            self.wfile.write(b"token")

        def do_GET(self) -> None:
            if self.path != "/latest/user-data":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(user_data)))
            self.end_headers()
            self.wfile.write(user_data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
