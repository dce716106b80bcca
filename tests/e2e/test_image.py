"""The operator's image, built from the Dockerfile and run as a container, as a cluster runs it.

``tools/image/build.sh`` (``make image``) builds the image with buildah on a Debian bookworm
python3 base (no registry is reachable here; see that script); this module calls it first, so
the image is the current source (a warm build only redoes the changed layers).

The container runs under podman with the runc runtime (not a chroot or ``unshare`` stand-in:
the entrypoint runs from the image's own file system), as config/manager's Deployment runs it:
read-only root file system (a tmpfs on /tmp only), uid/gid 65532, no capabilities, no privilege
escalation, the image's default command (``run --leader-elect --cloud=aws``) plus flags, and
only the rights of config/rbac's ServiceAccount. The test applies config/rbac to the session's full
test bed, mints that account's token with the TokenRequest API and hands the container a
kubeconfig holding it. The network is the host's: the apiserver and moto's EC2 server (started
from the dev venv, as EC2 would be elsewhere) listen on loopback, and the moto instances'
kubelets are the test bed's stand-in (``moto_vms``, in this process).

It must take the leader Lease (its holder, read from the apiserver, is the container's
hostname and pid 1), scale a NodePool up (EC2 instances running, their Nodes registered, the
status listing them) and down, let the pool's finalizer terminate the rest on delete, and exit
0 on SIGTERM without a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import LEASES, NODES, NotFound, load_kubeconfig
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.testbed import MotoServer, moto_vms
from tests._nodeadm import nodeadm_check
from tests.e2e.conftest import LABEL, OperatorEnv
from tests.e2e.moto_pool import INSTANCE_TYPE, create_moto_pool, ec2_boots, ec2_states

pytestmark = [pytest.mark.integration, pytest.mark.release]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "image" / "build.sh"
#: The uid of the Dockerfile's USER and of the Deployment's securityContext.
NONROOT = 65532
#: config/rbac's identity and the namespace its leader-election Role grants the Lease in.
ACCOUNT, NAMESPACE, LEASE = "nodepool-operator", "nodepool-system", "nodepool-operator-leader"
#: A cold build installs the tools, makes the base and fetches the dependencies.
BUILD_TIMEOUT = 1200


@dataclass(frozen=True)
class Image:
    """The built image, the podman flags that reach it (our store, our runtime) and the
    ulimits a container may have here."""

    name: str
    podman: tuple[str, ...]
    ulimits: tuple[str, ...]
    size: int


@pytest.fixture(scope="module")
def image() -> Image:
    result = subprocess.run(
        ["bash", str(BUILD), "nodepool-operator:test"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    built = {k: v for k, _, v in (line.partition("=") for line in result.stdout.splitlines())}
    store = ("--root", built["root"], "--runroot", built["runroot"], "--storage-driver", "overlay")
    podman = ("podman", *store, "--runtime", built["runtime"])
    return Image(built["image"], podman, tuple(built["ulimits"].split()), int(built["size"]))


def _service_account_kubeconfig(cp: ControlPlane, path: Path) -> Path:
    """config/rbac applied, and a kubeconfig with a fresh token of its ServiceAccount."""
    assert cp.assets is not None
    kubectl = str(cp.assets.kubectl)
    deployment = yaml.safe_load_all((ROOT / "config/manager/deployment.yaml").read_text())
    namespace = next(d for d in deployment if d and d["kind"] == "Namespace")
    rbac = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "config" / "rbac")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    apply = [kubectl, "--kubeconfig", str(cp.kubeconfig), "apply", "--server-side"]
    apply += ["--force-conflicts", "--field-manager", "image-test", "-f", "-"]
    manifests = yaml.safe_dump(namespace) + "---\n" + rbac
    subprocess.run(apply, input=manifests, capture_output=True, text=True, check=True)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    reply = cp.rest().post(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token", request
    )
    token = reply["status"]["token"]
    ca = base64.b64encode(cp.ca_file.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "envtest", "cluster": {"server": cp.server, "certificate-authority-data": ca}}
        ],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": "envtest", "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o644)  # the container's uid 65532 reads it through the bind mount
    return path


@dataclass
class Container:
    name: str
    proc: asyncio.subprocess.Process
    log: Path
    podman: tuple[str, ...]

    async def podman_out(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run,
            [*self.podman, *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
async def container(
    image: Image,
    operator_env: OperatorEnv,
    moto: MotoServer,
    kube_control_plane: ControlPlane,
    tmp_path: Path,
) -> AsyncIterator[Container]:
    """The image's entrypoint with its default command plus this test's flags, attached
    (podman's exit status is the container's); the moto instances' kubelets beside it."""
    kubeconfig = _service_account_kubeconfig(kube_control_plane, tmp_path / "kubeconfig")
    name = f"nodepool-operator-{operator_env.run_id}"
    argv = [*image.podman, "run", "--rm", "--name", name, "--hostname", name, "--network", "host"]
    # config/manager/deployment.yaml's securityContext: read-only root with an emptyDir on /tmp
    # only (podman would add tmpfs on /run and /var/tmp too), no capabilities, no escalation
    argv += ["--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp"]
    argv += ["--user", f"{NONROOT}:{NONROOT}", "--cap-drop", "ALL"]
    argv += ["--security-opt", "no-new-privileges"]
    argv += image.ulimits
    argv += ["--volume", f"{kubeconfig}:/etc/nodepool-operator/kubeconfig:ro"]
    argv += ["--env", "KUBECONFIG=/etc/nodepool-operator/kubeconfig"]
    for key, value in moto.env().items():
        argv += ["--env", f"{key}={value}"]
    # the image's own command (EC2, leader election), then this test bed's flags: a default that
    # does not start (the simulated cloud, which the image does not carry) fails here
    argv += [image.name, *_config(image)["Cmd"], "--leader-election-namespace", NAMESPACE]
    argv += ["--aws-endpoint-url", moto.endpoint_url]
    argv += ["--aws-instance-types", INSTANCE_TYPE]
    argv += ["--label-selector", f"{LABEL}={operator_env.run_id}"]
    argv += ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
    log = tmp_path / "container.log"
    config = load_kubeconfig(kube_control_plane.kubeconfig)
    async with moto_vms(config, moto.endpoint_url):
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=subprocess.STDOUT)
        running = Container(name, proc, log, image.podman)
        try:
            yield running
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 60)
            await running.podman_out("rm", "--force", "--ignore", name)


def _config(image: Image) -> dict[str, Any]:
    """The image's configuration (user, entrypoint, default command) as podman reads it."""
    inspect = subprocess.run(
        [*image.podman, "image", "inspect", "--format", "{{json .Config}}", image.name],
        capture_output=True,
        text=True,
        check=True,
    )
    config: dict[str, Any] = yaml.safe_load(inspect.stdout)
    return config


def test_the_image_is_small_and_runs_as_the_deployment_expects(image: Image) -> None:
    config = _config(image)
    assert config["User"] == f"{NONROOT}:{NONROOT}"
    assert config["Entrypoint"] == ["nodepool-operator"]
    assert config["Cmd"] == ["run", "--leader-elect", "--cloud=aws"]
    print(f"image {image.name}: {image.size / 1e6:.0f} MB")
    # the base (Debian python3) is about 105 MB and the venv about 50 MB: a compiler, the
    # uv binary or the source tree in the runtime stage would show here
    assert image.size < 250e6, image.size


async def test_the_container_leads_and_scales_a_pool_with_its_service_account(
    operator_env: OperatorEnv, container: Container, moto: MotoServer
) -> None:
    env = operator_env
    name = f"image-{env.run_id}"

    # the container itself: not root, no capabilities, nothing to write on its root file system
    probe = (
        "import os, socket; caps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]"
        "; print(os.getuid(), os.getgid(), socket.gethostname(), int(caps, 16)); "
        "open('/probe', 'w')"
    )

    async def inside() -> subprocess.CompletedProcess[str] | None:
        if container.proc.returncode is not None:
            raise AssertionError(f"the container exited:\n{container.log.read_text()[-4000:]}")
        result = await container.podman_out("exec", container.name, "python3", "-c", probe)
        return result if result.stdout else None  # None until the container runs

    exec_ = await env.eventually(inside, "the container to run")
    assert exec_ is not None
    uid, gid, hostname, caps = exec_.stdout.split()
    assert (uid, gid, hostname, caps) == (str(NONROOT), str(NONROOT), container.name, "0"), exec_
    assert "Read-only file system" in exec_.stderr, exec_.stderr

    async def leader() -> str:
        try:
            lease = await env.client.get(LEASES, LEASE, NAMESPACE)
        except NotFound:  # not created yet
            return ""
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return holder if holder == identity else ""

    # hostname_pid: the entrypoint is pid 1 of the container's own pid namespace
    identity = f"{hostname}_1"
    await env.eventually(leader, f"the container to take the Lease as {identity}", timeout=90)

    await create_moto_pool(env, moto.endpoint_url, name, maxNodes=3)

    async def status(ready: int) -> dict[str, Any]:
        current: dict[str, Any] = (await env.client.get(NODEPOOLS, name)).get("status") or {}
        return current if current.get("readyNodes") == ready else {}

    await env.eventually(lambda: status(0), "the pool's first status")
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 2}})
    scaled = await env.eventually(lambda: status(2), "the pool to report 2 ready nodes", 120)
    assert await ec2_states(moto.endpoint_url, name) == ["running", "running"]
    nodes = (await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}"))["items"]
    ids = sorted(n["spec"]["providerID"].rsplit("/", 1)[1] for n in nodes)
    assert sorted(i.get("instanceId") for i in scaled["instances"]) == ids
    assert len(ids) == 2
    boots = await ec2_boots(moto.endpoint_url, name)
    assert sorted(boots) == sorted(n["metadata"]["name"] for n in nodes), "named as on EKS"
    for user_data in boots.values():
        nodeadm_check(user_data)

    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

    async def one_left() -> bool:
        return await ec2_states(moto.endpoint_url, name) == ["running", "terminated"]

    await env.eventually(one_left, "the pool to scale down to 1 instance", timeout=120)
    await env.eventually(lambda: status(1), "the pool to report 1 ready node")

    # the finalizer, run by the container, terminates the last instance on EC2
    await env.client.delete(NODEPOOLS, name)

    async def all_terminated() -> bool:
        return await ec2_states(moto.endpoint_url, name) == ["terminated", "terminated"]

    await env.eventually(all_terminated, "the pool's instances to be terminated", timeout=90)

    container.proc.send_signal(signal.SIGTERM)  # podman run passes it on to the container
    assert await asyncio.wait_for(container.proc.wait(), 60) == 0, container.log.read_text()
    text = container.log.read_text()
    assert "Traceback" not in text, text[-4000:]
