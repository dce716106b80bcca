"""Each wheel alone, for real: the operator installed from the built wheels into a fresh venv,
run from there as a user (or the image's entrypoint) runs it.

Two venvs, built once for this module from the session's wheels (``uv build --all-packages``):

* bare: ``kubeloop`` and ``nodepool-operator`` with no extras, as the Dockerfile installs them.
  ``nodepool-operator run --cloud aws --leader-elect`` runs from it against the session's full
  test bed (real apiserver, scheduler, kube-controller-manager, kwok) and moto's EC2 server
  (started from the dev venv, as EC2 would be elsewhere); the moto instances' kubelets are the
  test bed's stand-in (``MotoKubelets``, in this process). It must take the Lease, scale a
  pool for a pending pod through its Autoscaler, and the scheduler must bind the pod to the
  new Node. Its help works, and ``demo`` says which extra it needs.
* demo: ``nodepool-operator[demo]`` (its ``kubeloop[testing]`` from the kubeloop wheel):
  ``nodepool-operator demo --headless --json`` schedules every pod that fits.

Nothing here imports the product into the venvs' processes from the source tree: they run the
venvs' console scripts, from a directory outside the repository, without PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import kubeloop
from kubeloop import LEASES, NODES, PODS, NotFound, load_kubeconfig
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.testbed import MotoServer, moto_vms
from tests._dist import LEAKY, fresh_venv, requirement
from tests._nodeadm import nodeadm_check
from tests.e2e.conftest import LABEL, OperatorEnv
from tests.e2e.moto_pool import INSTANCE_TYPE, create_moto_pool, ec2_boots, ec2_states
from tests.e2e.test_autoscaler import autoscaler_manifest, pod_manifest

pytestmark = pytest.mark.integration

LEASE = "nodepool-operator-leader"
#: What only the extras bring: none of it may be in the bare venv.
EXTRAS_ONLY = ("cryptography", "pytest", "matplotlib", "moto")
DEMO_TIMEOUT = 180


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without the dev venv's traces, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in LEAKY}, **extra}


@pytest.fixture(scope="module")
def bare(wheels: Mapping[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a venv with both wheels and no extras."""
    return fresh_venv(
        tmp_path_factory.mktemp("bare") / "venv",
        requirement("kubeloop", wheels["kubeloop"]),
        requirement("nodepool-operator", wheels["nodepool_operator"]),
    )


@pytest.fixture(scope="module")
def with_demo(wheels: Mapping[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a venv with ``nodepool-operator[demo]`` from the wheels."""
    return fresh_venv(
        tmp_path_factory.mktemp("demo") / "venv",
        requirement("kubeloop", wheels["kubeloop"]),
        requirement("nodepool-operator", wheels["nodepool_operator"], "demo"),
    )


def _command(
    bin_dir: Path, *argv: str, cwd: Path, program: str = "nodepool-operator"
) -> subprocess.CompletedProcess[str]:
    """``program`` of the venv whose bin directory is ``bin_dir``, run from ``cwd``."""
    return subprocess.run(
        [str(bin_dir / program), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=_clean_env(),
    )


def test_the_bare_venv_has_no_extra_and_the_product_from_its_wheel(
    bare: Path, tmp_path: Path
) -> None:
    probe = (
        "import importlib.util, json, sys, nodepool_operator, kubeloop;"
        "print(json.dumps({'missing': [m for m in sys.argv[1:] if importlib.util.find_spec(m) "
        "is None], 'files': [nodepool_operator.__file__, kubeloop.__file__]}))"
    )
    result = _command(bare, "-c", probe, *EXTRAS_ONLY, cwd=tmp_path, program="python")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["missing"] == list(EXTRAS_ONLY)
    assert all(f.startswith(str(bare.parent)) for f in found["files"]), found["files"]


def test_help_works_and_demo_names_its_extra_in_the_bare_venv(bare: Path, tmp_path: Path) -> None:
    top = _command(bare, "--help", cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    assert "run" in top.stdout
    assert "demo" in top.stdout
    run = _command(bare, "run", "--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "--cloud {simulated,aws}" in run.stdout
    assert "--leader-elect" in run.stdout

    demo = _command(bare, "demo", "--headless", "--json", cwd=tmp_path)
    assert (demo.returncode, demo.stdout) == (2, "")
    [line] = demo.stderr.strip().splitlines()
    assert line.startswith("error: nodepool-operator demo needs the demo extra")
    assert line.endswith('pip install "nodepool-operator[demo]"')

    simulated = _command(bare, "run", "--cloud", "simulated", cwd=tmp_path)
    assert (simulated.returncode, simulated.stdout) == (2, "")
    [line] = simulated.stderr.strip().splitlines()
    assert 'pip install "nodepool-operator[demo]"' in line
    assert "--no-simulated-kubelets" in line


# -- run --cloud aws from the bare venv ------------------------------------------------------


@pytest.fixture
async def operator_process(
    bare: Path,
    operator_env: OperatorEnv,
    moto: MotoServer,
    kube_control_plane: ControlPlane,
    kube_namespace: str,
    tmp_path: Path,
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Path]]:
    """``nodepool-operator run --cloud aws --leader-elect`` from the bare venv, handling only
    this test's objects; the moto instances' kubelets run beside it. SIGTERMed at the end
    (after the test deleted its pool, so the finalizer could terminate the instances)."""
    log = tmp_path / "operator.log"
    argv = [
        str(bare / "nodepool-operator"),
        "run",
        "--cloud",
        "aws",
        "--kubeconfig",
        str(kube_control_plane.kubeconfig),
        "--aws-endpoint-url",
        moto.endpoint_url,
        "--aws-instance-types",
        INSTANCE_TYPE,
        "--leader-elect",
        "--leader-election-namespace",
        kube_namespace,
        "--label-selector",
        f"{LABEL}={operator_env.run_id}",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    ]
    config = load_kubeconfig(kube_control_plane.kubeconfig)
    async with moto_vms(config, moto.endpoint_url):
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=tmp_path, env=_clean_env(**moto.env()), stderr=out
            )
        try:
            yield proc, log
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), 60)


async def test_run_cloud_aws_from_the_bare_venv_leads_and_gets_a_pending_pod_its_node(
    operator_env: OperatorEnv,
    operator_process: tuple[asyncio.subprocess.Process, Path],
    moto: MotoServer,
    kube_namespace: str,
) -> None:
    env, ns = operator_env, kube_namespace
    proc, log = operator_process
    name = f"wheel-{env.run_id}"
    await create_moto_pool(env, moto.endpoint_url, name, maxNodes=2)
    await env.create(AUTOSCALERS, autoscaler_manifest(name, name, ns))

    async def leader() -> str:
        try:
            lease = await env.client.get(LEASES, LEASE, ns)
        except NotFound:  # not taken yet (the operator may still be starting)
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    holder = await env.eventually(leader, "the operator to take the Lease", timeout=90)
    assert holder.endswith(f"_{proc.pid}"), holder  # this very process (hostname_pid)

    await env.create(PODS, pod_manifest(name, name, memory="2Gi"), ns)

    async def bound() -> str:
        pod = await env.client.get(PODS, name, ns)
        return str(pod["spec"].get("nodeName") or "")

    node_name = await env.eventually(bound, "the pending pod to be bound", timeout=180)
    node = await env.client.get(NODES, node_name)
    assert node["metadata"]["labels"][POOL_LABEL] == name
    assert node["spec"]["providerID"].startswith("aws:///")
    assert await ec2_states(moto.endpoint_url, name) == ["running"]
    boots = await ec2_boots(moto.endpoint_url, name)
    assert list(boots) == [node_name], "the Node is named after the instance's private DNS name"
    nodeadm_check(boots[node_name])  # the AL2023 user data the real nodeadm takes

    async def pool_ready() -> dict[str, Any]:
        pool = await env.client.get(NODEPOOLS, name)
        status = pool.get("status") or {}
        ready = pool["spec"]["targetNodes"] == 1 and status.get("readyNodes") == 1
        return status if ready else {}

    status = await env.eventually(pool_ready, "the pool to report its one ready node")
    assert [i.get("instanceId") for i in status["instances"]] == [
        node["spec"]["providerID"].rsplit("/", 1)[1]
    ]

    async def scaler_reconciled() -> dict[str, Any]:
        status = (await env.client.get(AUTOSCALERS, name)).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        return status if status.get("lastScaleTime") and conditions.get("Ready") == "True" else {}

    await env.eventually(scaler_reconciled, "the Autoscaler's status to show its scale-up")

    # the pool's finalizer, run by the wheel's operator, terminates its instance on EC2
    await env.client.delete(PODS, name, ns)
    await env.client.delete(AUTOSCALERS, name)
    await env.client.delete(NODEPOOLS, name)

    async def terminated() -> bool:
        return await ec2_states(moto.endpoint_url, name) == ["terminated"]

    await env.eventually(terminated, "the pool's instance to be terminated", timeout=90)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]


# -- the demo from a venv with the demo extra ------------------------------------------------


def test_the_demo_runs_from_a_venv_with_the_demo_extra(with_demo: Path, tmp_path: Path) -> None:
    # kubeloop[testing], which the demo extra asks for, is the kubeloop wheel's
    probe = "import kubeloop, kubeloop.envtest; print(kubeloop.__version__, kubeloop.__file__)"
    where = _command(with_demo, "-c", probe, cwd=tmp_path, program="python")
    assert where.returncode == 0, where.stderr
    version, path = where.stdout.split()
    assert version == kubeloop.__version__
    assert path.startswith(str(with_demo.parent))

    argv = [str(with_demo / "nodepool-operator"), "demo", "--headless", "--json"]
    argv += ["--timeout", str(DEMO_TIMEOUT)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT + 240,
        check=False,
        cwd=tmp_path,
        env=_clean_env(),
    )
    context = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, context
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, context
    figures = json.loads(lines[0])
    assert figures["pods_scheduled"] == figures["pods_fitting"] > 0, figures
