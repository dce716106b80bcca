"""A LIST the apiserver refuses (404: the CRD is not installed; 403: RBAC) names the
resource and the answer, is retried with backoff, and never holds up shutdown.

The first hour of a new user: forget `kubectl apply -f crd.yaml` and the operator used to
log ``404 NotFound: 404 page not found`` with no resource named, ignore SIGTERM until the
cache-sync timeout, then die with a bare TimeoutError.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import pytest

from kubeloop import CONFIGMAPS, CacheSyncTimeout, Client, Request, Resource, Result
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager

pytestmark = pytest.mark.integration

# no CRD defines this group: the apiserver answers 404 to its LIST
MISSING = Resource("missing.kubeloop.dev", "v1", "gadgets", "Gadget")


async def reconcile(req: Request) -> Result:
    return Result()


def refusals(caplog: pytest.LogCaptureFixture, needle: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "kubeloop.reflector" and r.levelno == logging.ERROR and needle in r.message
    ]


async def test_a_missing_crd_is_named_and_the_sync_timeout_says_why(
    kube_client: Client, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubeloop")
    mgr = new_manager(kube_client, cache_sync_timeout=4.0)
    mgr.controller("gadgets").for_(MISSING, namespace=kube_namespace).complete(reconcile)
    with pytest.raises(CacheSyncTimeout) as info:
        await asyncio.wait_for(mgr.run(), 60)
    message = str(info.value)
    assert "gadgets (missing.kubeloop.dev/v1, kind Gadget)" in message
    assert "is the CRD installed? kubectl get crd gadgets.missing.kubeloop.dev" in message
    assert isinstance(info.value, TimeoutError)  # code that caught the bare one still does
    assert list(info.value.pending) == [f"gadgets.missing.kubeloop.dev/{kube_namespace}"]
    # the explanation is said once, not once per retry
    assert len(refusals(caplog, "is the CRD installed?")) == 1


async def test_stopping_during_a_sync_that_cannot_finish_returns_promptly(
    kube_client: Client, kube_namespace: str
) -> None:
    # the default timeout (120 s) is longer than this test's bound: run() returning
    # within the bound is the proof that stop() did not wait for it
    mgr = new_manager(kube_client)
    assert mgr.options.cache_sync_timeout >= 120
    mgr.controller("gadgets").for_(MISSING, namespace=kube_namespace).complete(reconcile)
    task = asyncio.create_task(mgr.run())

    def refused() -> bool:
        return any(i.reflector.last_error for i in mgr.cache.informers)

    await eventually(refused, "the LIST refused", timeout=30)
    mgr.stop()  # what SIGTERM / Ctrl-C do (handle_signals=True installs it as the handler)
    await asyncio.wait_for(task, 30)  # returns normally: a stop is not a failure
    assert task.done()
    assert not mgr.cache.informers[0].started


async def test_a_list_refused_by_rbac_names_the_verb_and_the_resource(
    kube_control_plane: ControlPlane, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubeloop")
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig_for("nobody")) as nobody:
        mgr = new_manager(nobody, cache_sync_timeout=4.0)
        mgr.controller("cms").for_(CONFIGMAPS, namespace=kube_namespace).complete(reconcile)
        with pytest.raises(CacheSyncTimeout) as info:
            await asyncio.wait_for(mgr.run(), 60)
    message = str(info.value)
    assert (
        f"RBAC refuses list on configmaps (v1, kind ConfigMap) in namespace {kube_namespace}"
        in (message)
    )
    assert f"kubectl auth can-i list configmaps -n {kube_namespace}" in message
    assert len(refusals(caplog, "RBAC refuses list")) == 1


OPERATOR = """
import asyncio, logging, sys
from kubeloop import Client, Manager, ManagerOptions, Resource, Result, configure_logging

MISSING = Resource("missing.kubeloop.dev", "v1", "gadgets", "Gadget")


async def reconcile(req):
    return Result()


async def main():
    async with Client.from_kubeconfig(sys.argv[1]) as client:
        options = ManagerOptions(metrics_bind_address=None, health_probe_bind_address=None)
        mgr = Manager(client, options)  # handles SIGTERM and SIGINT, as an operator does
        mgr.controller("gadgets").for_(MISSING, namespace="default").complete(reconcile)
        await mgr.run()


configure_logging(logging.INFO)
asyncio.run(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
async def test_an_operator_process_stops_on_a_signal_while_its_crd_is_missing(
    kube_control_plane: ControlPlane, tmp_path: Path, sig: signal.Signals
) -> None:
    script = tmp_path / "gadget_operator.py"  # not operator.py: that shadows the stdlib
    script.write_text(OPERATOR)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(kube_control_plane.kubeconfig),
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen = b""
    try:
        async with asyncio.timeout(60):
            while b"is the CRD installed?" not in seen:
                line = await proc.stderr.readline()
                assert line, seen.decode()[-2000:]
                seen += line
    finally:
        proc.send_signal(sig)
        rest = await asyncio.wait_for(proc.stderr.read(), 60)  # the bound: far below 120 s
        await asyncio.wait_for(proc.wait(), 10)
    log = (seen + rest).decode()
    assert proc.returncode == 0, log[-2000:]
    assert "kubectl get crd gadgets.missing.kubeloop.dev" in log
    assert "Traceback" not in log
