"""Karpenter as a live peer: the same scenarios, once with Karpenter and once with our operator.

The test bed is a small cluster started here (``ControlPlane`` with kube-scheduler and
kube-controller-manager) plus kwok as every Node's kubelet, started per side, set as a real
cluster is (:mod:`bench._real_cluster`): the node lifecycle timing at the upstream defaults
(node monitor period 5 s, grace 50 s, Node Leases of 40 s) and a system node tainted
``CriticalAddonsOnly`` that no scenario's pod lands on (with no Node at all, kube-scheduler's
rejection names no plugin, so every cluster event retries a pending pod and grows its
back-off, which a Node registering late then waits out). Karpenter v1.15.0's
kwok cloud provider (built by ``tools/karpenter/build.sh``, run out of cluster) creates its Nodes
at once and kwok turns them Ready within a second (a delayed ``node-initialize`` stage did not
hold them back). So Karpenter's NodePool gives its Nodes a start-up taint that the bench lifts
the scenario's boot delay after each Node appears, as a node agent does once it is up: no pod
lands on a Karpenter Node before it would have booted, and Karpenter counts the Node as
initializing until then (its simulation ignores start-up taints). Our simulated VMs boot for the
same time before their Nodes register; both sides run every scenario with its boot delay.
Karpenter gets one instance type equal to our pool's node (its instance-types file) and a
NodePool whose limits are the pool's ``maxNodes`` (``limits.nodes``, and that many instances'
CPU); it runs with consolidation as it
defaults (``WhenEmptyOrUnderutilized`` after 0 s) and separately with consolidation off
(``consolidateAfter: Never``). A fair variant (``karpenter-nodes-after-boot``, consolidation
as it defaults) runs beside them: its KWOKNodeClass sets the provider's own
``nodeRegistrationDelay`` to the boot delay, so each Node appears only when the boot is done, as a
kubelet registers it on a real cloud, and needs no start-up taint. Ours is the operator as users run
it, ``nodepool-operator run`` with the simulated cloud in a process of its own, as Karpenter runs
in its own (NodePool + Autoscaler controllers and the simulated VMs' kubelets; scale-down enabled
for the scale-down scenario).

The scenarios where the sides end within about a second of each other (all but S2) run each side
three times in the full set, interleaved (each run in another order of the sides); a row is
then the run with the median time to the last pod running, the range of the runs beside it.
Per scenario and side: nodes created; seconds from the first pod's creation until every
fitting pod is scheduled and until every one runs, from the first time the bench's watch of the
pods showed each bound and Running (a poll of the pods every 0.25 s ends the run, and its
coarser times are kept beside them as ``*_polled_s``); for the
scale-down scenario (its pods owned by a ReplicaSet, which then scales to a third), nodes left
and pods running after the wait; API writes counted by the apiserver (``apiserver_request_total``
from its ``/metrics``, write verbs, minus the bench's own pod creates and the ReplicaSet's
adoption, scale-down and status writes; kube-scheduler's bindings and kwok's status writes
for the same pods are in both sides' counts); and cloud calls (Karpenter:
``karpenter_cloudprovider_duration_seconds_count`` from its metrics; ours: the simulated cloud's
call log). And where the time goes
(:mod:`bench.phases`): the median of each phase of a pod's wait, from pod created to Running,
from what the bench's own watches saw and the cloud's records; and the phases of the last
pod to run alone, the critical path behind the time to all running.

By hand::

    python -m bench.karpenter [--quick] [--scenarios S1,SD]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import yaml

from bench import ROOT, Benchmark, BenchResult, Context, rounded
from bench import autoscaler_scenarios as sc_mod
from bench._phase_watch import PhaseWatch
from bench._raw import Api, connect
from bench._real_cluster import (
    NODE_LEASE_S,
    NODE_MONITOR_GRACE_S,
    NODE_MONITOR_PERIOD_S,
    SYSTEM_NODE,
    SYSTEM_TAINT,
    add_system_node,
    real_cluster_timing,
)
from bench.autoscaler_scenarios import (
    Names,
    PodGroup,
    Scenario,
    all_pods,
    autoscaler_manifest,
    expected,
)
from bench.kopf_compare import scrape
from bench.phases import (
    karpenter_launches,
    last_to_run,
    nth_after,
    our_launches,
    phase_medians,
    pod_timelines,
    table,
)
from kubeloop import (
    NAMESPACES,
    NODES,
    PODS,
    AlreadyExists,
    Client,
    NotFound,
    Resource,
    retry_on_conflict,
)
from kubeloop.envtest import (
    KWOK_NODE_ANNOTATIONS,
    ControlPlane,
    ControlPlaneOptions,
    find_assets,
    free_port,
)
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS, crds, parse_nodepool
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers import POOL_LABEL, pool_template
from nodepool_operator.crdinstall import install_crds

K_NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False)
K_NODECLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False)
KWOK_NODECLASSES = Resource(
    "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", "KWOKNodeClass", namespaced=False
)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
    namespaced=False,
)  # fmt: skip
#: ``karpenter-nodes-after-boot``: the fair variant, whose Nodes appear when the boot is done.
NODES_AFTER_BOOT: Final = "karpenter-nodes-after-boot"
SIDES: Final = ("karpenter", NODES_AFTER_BOOT, "karpenter-noconsolidation", "ours")
FULL_SET: Final = ("S1", "S2", "S3", "S6", "S14", "S15", "SD")
QUICK_SET: Final = ("S15", "SD")
#: The scenarios whose sides end within about a second of each other, where one run's spread
#: (S1's ours: 27.2-28.5 s on one commit) decides the order: the full set runs each side of
#: these :data:`REPEATS` times, interleaved, and reports the median run. Every one but S2
#: (whose sides end some 18 s apart); S3 and S6 ran once until the block at ``4ef79f5``,
#: where S6's sides ended 0.1 s apart.
REPEATED: Final = ("S1", "S3", "S6", "S14", "S15", "SD")
REPEATS: Final = 3
TIMEOUT_S: Final = 300.0
POLL_S: Final = 0.25
#: How long the scale-down scenario waits for nodes to go after deleting pods.
SCALE_DOWN_WAIT_S: Final = 60.0
#: Our Autoscaler's unneeded time in the scale-down scenario (Karpenter's default is 0 s).
OURS_UNNEEDED: Final = "10s"
WRITE_VERBS: Final = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
#: The annotation a ReplicaSet ranks its pods by when it scales down (lowest cost goes first).
DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"


def scale_down_scenario(quick: bool) -> Scenario:
    count = 12 if quick else 24
    return Scenario(
        "SD",
        f"scale-down: {count} pods of 28Gi on 96Gi nodes, then their ReplicaSet scaled to a third",
        (PodGroup("sd", count, "1", "28Gi"),),
        cpu="12",
        memory="96Gi",
        max_nodes=20,
        boot_seconds=10.0,
    )


def scenarios(quick: bool) -> dict[str, Scenario]:
    table = dict(sc_mod.scenarios(quick))
    table["SD"] = scale_down_scenario(quick)
    return {k: replace(v, tail_s=0.0) for k, v in table.items() if k in FULL_SET}


# -- Karpenter ------------------------------------------------------------------------------


def karpenter_dir() -> Path:
    """The built provider and CRDs (builds them on first use, ~4 min on 2 cores)."""
    script = ROOT / "tools" / "karpenter" / "build.sh"
    out = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


#: What Karpenter's kwok provider holds back on every instance type (hard-coded kube-reserved).
KWOK_OVERHEAD_MILLICPU: Final = 100
KWOK_OVERHEAD_MEMORY: Final = 10 * 1024**2


def instance_types(sc: Scenario) -> list[dict[str, Any]]:
    """One type whose allocatable (capacity minus the provider's fixed overhead) is exactly
    what a node of our pool offers its pods."""
    names = Names(sc.id, "x", "x")
    allocatable = pool_template(parse_nodepool(sc_mod.pool_manifest(sc, names))).allocatable
    cpu = f"{allocatable.cpu + KWOK_OVERHEAD_MILLICPU}m"
    memory = str(allocatable.memory + KWOK_OVERHEAD_MEMORY)
    return [
        {
            "name": sc.instance_type,
            "offerings": [{"capacityType": "on-demand", "zone": "test-zone-a", "price": 1.0}],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {
                "cpu": cpu,
                "memory": memory,
                "pods": str(allocatable.pods or 110),
                "ephemeral-storage": "100Gi",
            },
        }
    ]


#: The start-up taint that stands in for a booting VM on Karpenter's Nodes (see the module doc).
BOOT_TAINT: Final = {"key": "bench.kubeloop.dev/booting", "effect": "NoSchedule"}


async def lift_boot_taints(
    admin: Client, selector: str, boot_seconds: float, lifted: dict[str, float]
) -> None:
    """Lift :data:`BOOT_TAINT` from each Node of ``selector`` ``boot_seconds`` after this
    poll first saw the Node (until cancelled); ``lifted`` gets each Node lifted and when (the
    wall clock), for the write count and as its boot-done time in the phase table."""
    first_seen: dict[str, float] = {}
    while True:
        now = time.monotonic()
        for node in await _nodes(admin, selector):
            name = node["metadata"]["name"]
            # The boot counts from the Node's appearance (the launch), not from when
            # Karpenter's registration puts the taint on, a second or so later.
            booted = now - first_seen.setdefault(name, now) >= boot_seconds
            taints = node["spec"].get("taints", [])
            if not booted or not any(t.get("key") == BOOT_TAINT["key"] for t in taints):
                continue

            async def lift(name: str = name) -> None:
                fresh = await admin.get(NODES, name)
                taints = fresh["spec"].get("taints", [])
                fresh["spec"]["taints"] = [t for t in taints if t.get("key") != BOOT_TAINT["key"]]
                await admin.update(NODES, fresh)

            with contextlib.suppress(NotFound):
                await retry_on_conflict(lift)
                lifted.setdefault(name, time.time())
        await asyncio.sleep(POLL_S)


def boot_nodeclass(sc: Scenario) -> dict[str, Any]:
    """A KWOKNodeClass whose provider creates each Node the scenario's boot delay after the
    launch (``nodeRegistrationDelay``, which the provider documents as modelling instance
    start-up), as a kubelet registers it on a real cloud once the VM has booted."""
    if sc.boot_seconds != int(sc.boot_seconds):
        raise ValueError(
            f"{sc.id}: boot_seconds {sc.boot_seconds} is not whole seconds, which "
            "nodeRegistrationDelay cannot say"
        )
    seconds = int(sc.boot_seconds)
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": f"boot-{seconds}s"},
        "spec": {"nodeRegistrationDelay": f"{seconds}s"},
    }


def karpenter_nodepool(
    sc: Scenario, names: Names, consolidation: bool, *, nodes_after_boot: bool = False
) -> dict[str, Any]:
    """Karpenter's NodePool for ``sc``: with the bench's boot taint, or (``nodes_after_boot``)
    on :func:`boot_nodeclass`, whose Nodes need no stand-in for the boot."""
    # maxNodes is a count of nodes, which Karpenter's `limits.nodes` says as it is (it takes
    # one node per NodeClaim off what is left before it picks an instance type); the CPU of
    # maxNodes instances of the one type stays beside it, as NodePools are usually limited
    cpu_limit = instance_types(sc)[0]["resources"]["cpu"].removesuffix("m")
    cpu_limit = f"{int(cpu_limit) * sc.max_nodes}m"
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": names.pool},
        "spec": {
            "template": {
                "metadata": {"labels": {POOL_LABEL: names.pool, **names.labels}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": boot_nodeclass(sc)["metadata"]["name"]
                        if nodes_after_boot
                        else "default",
                    },
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": [sc.instance_type],
                        }
                    ],
                    "expireAfter": "Never",
                    **({} if nodes_after_boot else {"startupTaints": [dict(BOOT_TAINT)]}),
                },
            },
            "limits": {"cpu": cpu_limit, "nodes": str(sc.max_nodes)},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "0s" if consolidation else "Never",
            },
        },
    }


@dataclass
class _Process:
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int | None = None

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.proc.args!r} exited with {self.proc.returncode}:\n{tail}")


@contextlib.contextmanager
def _spawn(args: Sequence[str], env: dict[str, str], log: Path) -> Any:
    with log.open("wb") as out:
        proc = subprocess.Popen(list(args), env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield _Process(proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def kwok(cp: ControlPlane, stages: Path, workdir: Path) -> Any:
    assets = find_assets(cluster=True)
    if assets.kwok is None:
        raise RuntimeError("kwok not built: run tools/controlplane/build-cluster.sh")
    port = free_port()
    selector = ",".join(f"{k}={v}" for k, v in KWOK_NODE_ANNOTATIONS.items())
    args = [
        str(assets.kwok),
        f"--kubeconfig={cp.kubeconfig}",
        f"--config={stages}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={selector}",
        "--node-ip=127.0.0.1",
        f"--server-address=127.0.0.1:{port}",
        f"--node-port={port}",
        "--cidr=10.244.0.0/16",
        f"--node-lease-duration-seconds={cp.options.node_lease_seconds}",
    ]
    with _spawn(args, dict(os.environ), workdir / f"kwok-{port}.log") as proc:
        yield proc


@dataclass
class _Ours:
    """Our operator as users run it: ``nodepool-operator run`` in a process of its own (as
    Karpenter runs in its own), and the bench's view of its simulated cloud (the SQLite file
    both open: the cloud's records and call log)."""

    process: _Process
    cloud: SimulatedCloud

    def check(self) -> None:
        self.process.check()


@contextlib.asynccontextmanager
async def ours(cp: ControlPlane, sc: Scenario, names: Names, workdir: Path) -> AsyncIterator[_Ours]:
    """``nodepool-operator run`` with the simulated cloud (its VMs' kubelets in its
    process), scoped to this run's objects by label, once it reports ready."""
    cloud_file = workdir / f"{names.base}.sqlite"
    cloud = await asyncio.to_thread(SimulatedCloud, cloud_file, boot_seconds=sc.boot_seconds)
    health = free_port()
    args = [
        sys.executable,
        "-m",
        "nodepool_operator",
        "run",
        f"--kubeconfig={cp.kubeconfig}",
        "--cloud=simulated",
        f"--cloud-state={cloud_file}",
        f"--boot-seconds={sc.boot_seconds:g}",
        f"--label-selector={names.selector}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{health}",
    ]
    with _spawn(args, dict(os.environ), workdir / f"ours-{names.base}.log") as proc:
        ready = f"http://127.0.0.1:{health}/readyz"
        await _until_ok(lambda: _http_text(ready), "the operator's readiness", 60, [proc.check])
        yield _Ours(proc, cloud)


@contextlib.contextmanager
def karpenter(cp: ControlPlane, built: Path, sc: Scenario, workdir: Path) -> Any:
    types = workdir / f"instance-types-{sc.id}.json"
    types.write_text(json.dumps(instance_types(sc)))
    metrics, health = free_port(), free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(cp.kubeconfig),
        "SYSTEM_NAMESPACE": "kube-system",
        "INSTANCE_TYPES_FILE_PATH": str(types),
        "LOG_LEVEL": "info",
    }
    args = [
        str(built / "karpenter-kwok"),
        "--disable-leader-election",
        f"--metrics-port={metrics}",
        f"--health-probe-port={health}",
    ]
    with _spawn(args, env, workdir / f"karpenter-{sc.id}-{metrics}.log") as proc:
        proc.metrics_port = metrics
        yield proc


async def _http_text(url: str) -> str:
    def get() -> str:
        import urllib.request

        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    return await asyncio.to_thread(get)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} ([0-9.eE+-]+)$")


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.append((labels, float(m.group(3))))
    return out


async def cloud_calls_karpenter(proc: _Process) -> Counter[str]:
    text = await _http_text(f"http://127.0.0.1:{proc.metrics_port}/metrics")
    calls: Counter[str] = Counter()
    for labels, value in _samples(text, "karpenter_cloudprovider_duration_seconds_count"):
        calls[labels.get("method", "?")] += int(value)
    return calls


async def apiserver_writes(api: Api) -> Counter[str]:
    """Successful writes the apiserver has served, by ``VERB resource[/subresource]``."""
    writes: Counter[str] = Counter()
    for (verb, _, resource, sub, code), value in (await scrape(api)).items():
        if verb in WRITE_VERBS and code.startswith("2"):
            writes[f"{verb} {resource}" + (f"/{sub}" if sub else "")] += int(value)
    return writes


# -- observing ------------------------------------------------------------------------------


@dataclass
class PodTimes:
    created: float
    scheduled: dict[str, float]
    running: dict[str, float]


async def _poll_pods(
    admin: Client, namespace: str, fitting: int, t0: float, proc_checks: Sequence[Any]
) -> PodTimes:
    scheduled: dict[str, float] = {}
    running: dict[str, float] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for check in proc_checks:
            check()
        now = time.monotonic()
        for pod in (await admin.list(PODS, namespace))["items"]:
            name = pod["metadata"]["name"]
            if pod["spec"].get("nodeName"):
                scheduled.setdefault(name, now)
            if (pod.get("status") or {}).get("phase") == "Running":
                running.setdefault(name, now)
        if len(scheduled) >= fitting and len(running) >= fitting:
            return PodTimes(t0, scheduled, running)
        await asyncio.sleep(POLL_S)
    raise TimeoutError(
        f"{namespace}: {len(scheduled)} scheduled, {len(running)} running of {fitting} fitting "
        f"pods after {TIMEOUT_S:.0f} s"
    )


async def _create(admin: Client, pods: Sequence[dict[str, Any]], namespace: str) -> None:
    gate = asyncio.Semaphore(16)

    async def one(pod: dict[str, Any]) -> None:
        async with gate:
            await admin.create(PODS, pod, namespace)

    await asyncio.gather(*(one(p) for p in pods))


async def _delete_pods(admin: Client, names: Sequence[str], namespace: str) -> None:
    gate = asyncio.Semaphore(16)

    async def one(name: str) -> None:
        async with gate:
            with contextlib.suppress(NotFound):
                await admin.delete(PODS, name, namespace, grace_period_seconds=0)

    await asyncio.gather(*(one(n) for n in names))


async def _nodes(admin: Client, selector: str) -> list[dict[str, Any]]:
    return list((await admin.list(NODES, label_selector=selector))["items"])


# -- one side of one scenario ---------------------------------------------------------------


async def run_side(
    cp: ControlPlane,
    admin: Client,
    api: Api,
    built: Path,
    sc: Scenario,
    side: str,
    workdir: Path,
    base_stages: Path,
) -> dict[str, Any]:
    names = Names(sc.id, side.split("-")[0], uuid.uuid4().hex[:8])
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.namespace}}
    await admin.create(NAMESPACES, ns)
    pods = [p for g, p in all_pods(sc, names) if g.drives]
    if sc.id == "SD":
        _mark_kept(pods)
    exp = expected(sc)
    node_selector = f"{POOL_LABEL}={names.pool}"
    lifted: dict[str, float] = {}  # the bench's own boot-taint lifts (Karpenter's side)
    fig: dict[str, Any]
    watch = PhaseWatch()
    async with contextlib.AsyncExitStack() as stack:
        checks: list[Any] = []
        stack.push_async_callback(watch.stop)
        if side.startswith("karpenter"):
            checks.append(stack.enter_context(kwok(cp, base_stages, workdir)).check)
            after_boot = side == NODES_AFTER_BOOT
            if after_boot:
                with contextlib.suppress(AlreadyExists):  # one per boot delay, kept between runs
                    await admin.create(KWOK_NODECLASSES, boot_nodeclass(sc))
            await admin.create(
                K_NODEPOOLS,
                karpenter_nodepool(
                    sc,
                    names,
                    side != "karpenter-noconsolidation",
                    nodes_after_boot=after_boot,
                ),
            )
            await watch.start(
                admin,
                names.namespace,
                node_selector,
                (K_NODECLAIMS, "", f"karpenter.sh/nodepool={names.pool}"),
            )
            kp = stack.enter_context(karpenter(cp, built, sc, workdir))
            # cleaned up while Karpenter still runs (it releases its NodeClaims), and after
            # a failure too: a failed run's NodePool and Nodes otherwise outlive it, hold
            # every later run's clean-up for its full wait, and take later runs' pods
            stack.push_async_callback(_clean, admin, names, side)
            checks.append(kp.check)
            await _until_ok(lambda: cloud_calls_karpenter(kp), "Karpenter's metrics", 60, checks)
            calls_before = await cloud_calls_karpenter(kp)
            claims_seen: set[str] = set()
            claims_now: set[str] = set()

            async def watch_claims() -> None:
                while True:
                    items = (await admin.list(K_NODECLAIMS))["items"]
                    claims_now.clear()
                    claims_now.update(c["metadata"]["name"] for c in items)
                    claims_seen.update(claims_now)
                    await asyncio.sleep(POLL_S)

            claim_task = asyncio.create_task(watch_claims())
            stack.callback(claim_task.cancel)
            if not after_boot:
                boot_task = asyncio.create_task(
                    lift_boot_taints(admin, node_selector, sc.boot_seconds, lifted)
                )
                stack.callback(boot_task.cancel)
            op = None
        else:
            checks.append(stack.enter_context(kwok(cp, base_stages, workdir)).check)
            op = await stack.enter_async_context(ours(cp, sc, names, workdir))
            stack.push_async_callback(_clean, admin, names, side)  # as above, while it runs
            checks.append(op.check)
            await admin.create(NODEPOOLS, sc_mod.pool_manifest(sc, names))
            scaler = autoscaler_manifest(names)
            if sc.id == "SD":
                scaler["spec"]["scaleDownEnabled"] = True
                scaler["spec"]["scaleDownUnneededTime"] = OURS_UNNEEDED
            await admin.create(AUTOSCALERS, scaler)
            pool_field = f"metadata.name={names.pool}"
            await watch.start(admin, names.namespace, node_selector, (NODEPOOLS, pool_field, ""))
            calls_before = Counter(await asyncio.to_thread(op.cloud.calls))
            await asyncio.sleep(1.0)  # the controllers' caches sync
        writes_before = await apiserver_writes(api)
        t0, t0_wall = time.monotonic(), time.time()
        wave1 = [p for p in pods if _wave(sc, p) == 1]
        await _create(admin, wave1, names.namespace)
        if sc.wave2_after_s is not None:
            await asyncio.sleep(max(0.0, t0 + sc.wave2_after_s - time.monotonic()))
            await _create(admin, [p for p in pods if _wave(sc, p) == 2], names.namespace)
        times = await _poll_pods(admin, names.namespace, exp.fitting, t0, checks)
        nodes_up = await _nodes(admin, node_selector)
        timelines = await _timelines(watch, exp.fitting, side, lifted, op)
        fig = {
            **_all_fitting(watch, times, exp.fitting, t0, t0_wall),
            "nodes_after_scale_up": len(nodes_up),
            "phases": phase_medians(timelines.values()),
            "last_pod_phases": last_to_run(timelines),
        }
        if sc.id == "SD":
            keep = sum(1 for p in pods if DELETION_COST in p["metadata"].get("annotations", {}))
            doomed = len(pods) - keep
            await _adopt(admin, names, pods, checks)
            await admin.patch_scale(
                REPLICASETS, names.base, {"spec": {"replicas": keep}}, names.namespace
            )
            t_sd = time.monotonic()
            while time.monotonic() - t_sd < SCALE_DOWN_WAIT_S:
                for check in checks:
                    check()
                await asyncio.sleep(1.0)
            left = await _nodes(admin, node_selector)
            running = [
                p
                for p in (await admin.list(PODS, names.namespace))["items"]
                if (p.get("status") or {}).get("phase") == "Running"
            ]
            fig["nodes_after_scale_down"] = len(left)
            fig["pods_running_after_scale_down"] = len(running)
            fig["pods_kept"] = keep
        writes_after = await apiserver_writes(api)
        writes = Counter({k: v - writes_before.get(k, 0) for k, v in writes_after.items()})
        writes = +writes
        if side.startswith("karpenter"):
            calls = await cloud_calls_karpenter(kp)
            calls = Counter({k: v - calls_before.get(k, 0) for k, v in calls.items()})
            if not calls:
                # Its kwok provider is not wrapped in Karpenter's metrics decorator, so it
                # exports no per-call counts: count the launches and deletions its NodeClaims
                # show (Get/List calls are then not counted).
                await asyncio.sleep(2 * POLL_S)
                calls = Counter(
                    {"Create": len(claims_seen), "Delete": len(claims_seen - claims_now)}
                )
                fig["cloud_calls_counted_from"] = "NodeClaims created and deleted"
            fig["nodes_created"] = int(calls.get("Create", 0))
        else:
            assert op is not None
            now_calls = Counter(await asyncio.to_thread(op.cloud.calls))
            calls = Counter({k: v - calls_before.get(k, 0) for k, v in now_calls.items()})
            fig["nodes_created"] = int(calls.get("create", 0))
        fig["cloud_calls"] = sum((+calls).values())
        fig["cloud_calls_by_method"] = dict(+calls)
        # The bench's own pod creates (and deletes) and boot-taint lifts are not the
        # autoscaler's.
        writes["POST pods"] -= len(pods)
        writes["PUT nodes"] -= len(lifted)
        if sc.id == "SD":
            # The ReplicaSet's adoption of the bench's pods, its scale-down to the kept
            # third and its own writes are the scenario's, not the autoscaler's; the pods
            # it recreates after an eviction stay counted.
            writes["PATCH pods"] -= len(pods)
            writes["DELETE pods"] -= doomed
            for key in [k for k in writes if k.split(" ")[1].startswith("replicasets")]:
                del writes[key]
        fig["api_writes"] = sum(v for v in writes.values() if v > 0)
        fig["api_writes_by_resource"] = dict(sorted((k, v) for k, v in writes.items() if v > 0))
    return fig


def _all_fitting(
    watch: PhaseWatch, polled: PodTimes, fitting: int, t0: float, t0_wall: float
) -> dict[str, Any]:
    """When every fitting pod was scheduled and running: from the watch's first times (to the
    millisecond), else, if the watch never saw them all, from the poll (to its 0.25 s). The
    poll's times stay beside them, so the two can be compared."""
    out: dict[str, Any] = {"timed_by": "watch"}
    for key, watched, seen in (
        ("scheduled", (p.bound for p in watch.pods.values()), polled.scheduled),
        ("running", (p.running for p in watch.pods.values()), polled.running),
    ):
        by_poll = sorted(seen.values())[fitting - 1] - t0
        by_watch = nth_after(watched, fitting, t0_wall)
        if by_watch is None:
            out["timed_by"] = "poll"
        out[f"all_fitting_{key}_s"] = rounded(by_poll if by_watch is None else by_watch, 4)
        out[f"all_fitting_{key}_polled_s"] = rounded(by_poll, 4)
    return out


async def _timelines(
    watch: PhaseWatch,
    fitting: int,
    side: str,
    lifted: dict[str, float],
    op: _Ours | None,
) -> dict[str, dict[str, float]]:
    """Each pod's milestones for the phase tables (:mod:`bench.phases`), once the watch has
    seen what the poll saw (every fitting pod Running)."""
    for _ in range(int(10.0 / POLL_S)):  # the watch is seldom behind the poll for long
        if watch.running() >= fitting:
            break
        await asyncio.sleep(POLL_S)
    if op is not None:
        snapshot = await asyncio.to_thread(op.cloud.snapshot)
        launches = our_launches(snapshot.instances, watch.targets)
    else:
        # Karpenter's boot ends when the bench lifts its taint, or, where the provider
        # registers Nodes only after the boot, when the Node appears.
        boot_done = (
            {n: s.registered for n, s in watch.nodes.items() if s.registered is not None}
            if side == NODES_AFTER_BOOT
            else lifted
        )
        launches = karpenter_launches(watch.claims, watch.nodes, boot_done)
    return pod_timelines(watch.pods, watch.nodes, launches)


def _wave(sc: Scenario, pod: dict[str, Any]) -> int:
    prefix = pod["metadata"]["labels"][sc_mod.GROUP_LABEL]
    return next(g.wave for g in sc.groups if g.prefix == prefix)


async def _until_ok(probe: Any, what: str, timeout: float, checks: Sequence[Any]) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for check in checks:
            check()
        try:
            await probe()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}") from None
            await asyncio.sleep(0.5)


def _mark_kept(pods: Sequence[dict[str, Any]]) -> None:
    """SD: one pod in three gets a deletion cost, so the ReplicaSet's scale-down removes
    the other two thirds (as the bench deleted them before it owned them by a ReplicaSet)."""
    for i, pod in enumerate(pods):
        if i % 3 == 0:
            pod["metadata"].setdefault("annotations", {})[DELETION_COST] = "100"


async def _adopt(
    admin: Client, names: Names, pods: Sequence[dict[str, Any]], checks: Sequence[Any]
) -> None:
    """SD: a ReplicaSet over the running pods (kube-controller-manager's controller adopts
    them, as it would its own replicas), so a pod a drain evicts is recreated, as a real
    workload's is. Created only once every pod runs: before that, it would make replicas
    of its own."""
    template = {"metadata": {"labels": pods[0]["metadata"]["labels"]}, "spec": pods[0]["spec"]}
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": names.base},
        "spec": {
            "replicas": len(pods),
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }
    await admin.create(REPLICASETS, rs, names.namespace)

    deadline = time.monotonic() + 60
    while True:
        for check in checks:
            check()
        items = (await admin.list(PODS, names.namespace))["items"]
        owned = [
            p
            for p in items
            if any(o.get("controller") for o in p["metadata"].get("ownerReferences") or ())
        ]
        if len(items) == len(owned) == len(pods):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{names.namespace}: the ReplicaSet owns {len(owned)} of {len(items)} pods "
                f"({len(pods)} expected) after 60 s"
            )
        await asyncio.sleep(POLL_S)


async def _clean(admin: Client, names: Names, side: str) -> None:
    with contextlib.suppress(NotFound):  # first, or it recreates the pods deleted below
        await admin.delete(REPLICASETS, names.base, names.namespace)
    pods = [p["metadata"]["name"] for p in (await admin.list(PODS, names.namespace))["items"]]
    await _delete_pods(admin, pods, names.namespace)
    if side.startswith("karpenter"):
        with contextlib.suppress(NotFound):
            await admin.delete(K_NODEPOOLS, names.pool)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not (await admin.list(K_NODECLAIMS))["items"]:
                break
            await asyncio.sleep(1.0)
    else:
        with contextlib.suppress(NotFound):
            await admin.delete(AUTOSCALERS, names.base)
        with contextlib.suppress(NotFound):
            await admin.delete(NODEPOOLS, names.pool)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                await admin.get(NODEPOOLS, names.pool)
            except NotFound:
                break
            await asyncio.sleep(1.0)
    for node in await _nodes(admin, f"{POOL_LABEL}={names.pool}"):
        with contextlib.suppress(NotFound):
            await admin.delete(NODES, node["metadata"]["name"])


# -- the benchmark ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def test_bed(scoring: str) -> AsyncIterator[tuple[ControlPlane, Client, Path]]:
    options = ControlPlaneOptions(scheduler=True, controller_manager=True, kwok=False)
    options.scheduler_scoring = scoring
    cp = await asyncio.to_thread(ControlPlane, real_cluster_timing(options))
    await asyncio.to_thread(cp.start)
    try:
        async with Client.from_kubeconfig(cp.kubeconfig, field_manager="bench") as admin:
            await add_system_node(admin)
            yield cp, admin, cp.dir
    finally:
        await asyncio.to_thread(cp.stop)


async def _install_karpenter_crds(admin: Client, built: Path) -> None:
    for path in sorted((built / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                with contextlib.suppress(Exception):
                    await admin.create(CRDS, doc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            await admin.list(K_NODEPOOLS)
            await admin.list(KWOK_NODECLASSES)
            break
        except Exception:
            await asyncio.sleep(0.5)
    nodeclass = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }
    with contextlib.suppress(Exception):
        await admin.create(KWOK_NODECLASSES, nodeclass)


@contextlib.contextmanager
def _workdir(keep: str | None) -> Iterator[Path]:
    """Where each run's logs (ours, Karpenter's, kwok's) and our simulated cloud's records
    go: ``keep`` when given, left there to read after the bench (a run's story is in the
    operator's log, not in its figures), else a temporary directory."""
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="bench-karpenter-") as tmp:
            yield Path(tmp)


async def run(ctx: Context) -> BenchResult:
    chosen = ctx.param("scenarios", FULL_SET, QUICK_SET)
    if isinstance(chosen, str):
        chosen = [s.strip().upper() for s in chosen.split(",") if s.strip()]
    chosen = [s for s in FULL_SET if s in chosen]
    sides_param = ctx.param("sides", SIDES, SIDES)
    sides = sides_param.split(",") if isinstance(sides_param, str) else list(sides_param)
    scoring = str(ctx.param("scheduler_scoring", "LeastAllocated", "LeastAllocated"))
    built = await asyncio.to_thread(karpenter_dir)
    table = scenarios(ctx.quick)
    figures: dict[str, Any] = {}
    keep = ctx.param("keep_logs", None, None)
    with _workdir(None if keep is None else str(keep)) as workdir:
        async with test_bed(scoring) as (cp, admin, _), connect(str(cp.kubeconfig), 2) as api:
            await install_crds(admin, crds())
            await _install_karpenter_crds(admin, built)
            assets = find_assets(cluster=True)
            if assets.kwok_stages is None:
                raise RuntimeError("kwok's stage file is not built")
            for sid in chosen:
                sc = table[sid]
                exp = expected(sc)
                entry: dict[str, Any] = {
                    "title": sc.title,
                    "boot_seconds": sc.boot_seconds,
                    "max_nodes": sc.max_nodes,
                    "fitting_pods": exp.fitting,
                    "optimum": exp.optimum,
                }
                runs = repeats(ctx, sid)
                figs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
                for r in range(runs):
                    # each run in another order, so no side is always first after a rest
                    for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                        run_no = f" (run {r + 1} of {runs})" if runs > 1 else ""
                        ctx.log(f"karpenter {sid} {side}{run_no}: {sc.title}")
                        try:
                            fig = await run_side(
                                cp, admin, api, built, sc, side, workdir, assets.kwok_stages
                            )
                        except Exception as err:  # one failed side must not hide the others
                            ctx.log(f"karpenter {sid} {side}: FAILED: {err}")
                            fig = {"error": str(err)[:2000]}
                        ctx.log(f"karpenter {sid} {side}{run_no}: {json.dumps(fig)[:400]}")
                        figs[side].append(fig)
                for side in sides:
                    entry[side] = median_run(figs[side])
                figures[sid] = entry
    ratios: dict[str, float] = {}
    for sid, entry in figures.items():
        ours = entry.get("ours", {})
        for peer, tag in (("karpenter", "karpenter"), (NODES_AFTER_BOOT, "karpenter_after_boot")):
            kp = entry.get(peer, {})
            for key in ("nodes_created", "all_fitting_running_s", "api_writes"):
                if ours.get(key) and kp.get(key):
                    ratios[f"{sid}_ours_over_{tag}_{key}"] = rounded(ours[key] / kp[key], 3)
    ctx.log("where the time goes (median s per phase):\n" + phase_table(figures, chosen, sides))
    return {
        "name": "karpenter",
        "params": {
            "scenarios": chosen,
            "sides": sides,
            "karpenter": "sigs.k8s.io/karpenter v1.15.0, kwok cloud provider, out of cluster",
            "kwok": "v0.8.0, its stages as built, for both sides",
            "ours": "nodepool-operator run --cloud simulated, a process of its own",
            "boot": "ours: the simulated VM boots before its Node registers; Karpenter: a "
            "start-up taint lifted by the bench the boot delay after its Node appears; "
            f"{NODES_AFTER_BOOT}: the provider creates the Node the boot delay after the "
            "launch (KWOKNodeClass nodeRegistrationDelay), no start-up taint",
            "scheduler_scoring": scoring,
            "cluster": f"node monitor period {NODE_MONITOR_PERIOD_S} s, grace "
            f"{NODE_MONITOR_GRACE_S} s, Node Leases {NODE_LEASE_S} s (upstream defaults); "
            f"a system node ({SYSTEM_NODE}) tainted {SYSTEM_TAINT['key']}",
            "ours_scale_down_unneeded": OURS_UNNEEDED,
            "scale_down_wait_s": SCALE_DOWN_WAIT_S,
            "poll_s": POLL_S,
            "sizes": "quick" if ctx.quick else "full",
            "runs_per_side": {sid: repeats(ctx, sid) for sid in chosen},
        },
        "figures": figures,
        "ratios": ratios,
    }


def repeats(ctx: Context, sid: str) -> int:
    """How many runs each side of ``sid`` gets: the ``repeats`` parameter if given, else
    :data:`REPEATS` for the :data:`REPEATED` scenarios of the full set, else one."""
    given = ctx.param("repeats", None, None)
    if given is not None:
        return max(1, int(given))
    return REPEATS if not ctx.quick and sid in REPEATED else 1


def median_run(figs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One side's figures from several runs: the run with the median time to the last pod
    running (its nodes, phases and counts), and every run's times beside it. A failed run
    is left out of the median and counted; all failed: the first failure."""
    done = [f for f in figs if "error" not in f and f.get("all_fitting_running_s") is not None]
    if not done:
        return dict(figs[0]) if figs else {"error": "no run"}
    if len(figs) == 1:
        return dict(figs[0])
    ordered = sorted(done, key=lambda f: float(f["all_fitting_running_s"]))
    out = dict(ordered[(len(ordered) - 1) // 2])
    out["runs"] = len(figs)
    out["runs_failed"] = len(figs) - len(done)
    for key in ("all_fitting_scheduled_s", "all_fitting_running_s"):
        out[key.removesuffix("_s") + "_each_s"] = [f.get(key) for f in done]
    return out


def _each(fig: dict[str, Any], key: str) -> str:
    """A time column: the figure, and with several runs their range."""
    value = fig.get(key)
    runs = fig.get(key.removesuffix("_s") + "_each_s")
    if not runs or len(runs) < 2:
        return str(value)
    return f"{value} ({min(runs)}–{max(runs)}, {len(runs)} runs)"


def phase_table(
    figures: dict[str, Any],
    scenarios: Sequence[str],
    sides: Sequence[str],
    key: str = "phases",
) -> str:
    """A phase table (:func:`bench.phases.table`) of every scenario and side that ran: the
    medians over all pods (``phases``) or the last pod's path (``last_pod_phases``)."""
    return table(
        [
            (sid, side, fig[key])
            for sid in scenarios
            for side in sides
            if key in (fig := figures.get(sid, {}).get(side, {}))
        ]
    )


#: What a result from before the ``cluster`` parameter ran on.
NO_CLUSTER_PARAM: Final = "as the control plane starts (no Node, its test timing)"


def _after_scale_down(fig: dict[str, Any]) -> str:
    if "nodes_after_scale_down" not in fig:
        return "–"
    if "pods_running_after_scale_down" not in fig:
        return str(fig["nodes_after_scale_down"])
    return (
        f"{fig['nodes_after_scale_down']} ({fig['pods_running_after_scale_down']} of "
        f"{fig['pods_kept']} pods running)"
    )


def markdown(result: BenchResult) -> str:
    p, f = result["params"], result["figures"]
    rows = [
        "| scenario | autoscaler | nodes created | all fitting scheduled s | all fitting running s "
        "| nodes after scale-down | API writes (apiserver) | cloud calls |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for sid in p["scenarios"]:
        entry = f[sid]
        for i, side in enumerate(p["sides"]):
            fig = entry.get(side, {})
            label = (
                f"{sid}: {entry['title']} (boot {entry['boot_seconds']:g} s, maxNodes "
                f"{entry['max_nodes']}, optimum {entry['optimum']})"
                if i == 0
                else ""
            )
            if "error" in fig:
                rows.append(f"| {label} | {side} | failed: {fig['error'][:120]} | | | | | |")
                continue
            rows.append(
                f"| {label} | {side} | {fig.get('nodes_created')} "
                f"| {_each(fig, 'all_fitting_scheduled_s')} "
                f"| {_each(fig, 'all_fitting_running_s')} "
                f"| {_after_scale_down(fig)} | {fig.get('api_writes')} "
                f"| {fig.get('cloud_calls')} |"
            )
    over = [
        f"{sid} ({side}: {entry[side]['nodes_created']} nodes, maxNodes {entry['max_nodes']})"
        for sid in p["scenarios"]
        if (entry := f[sid])
        for side in p["sides"]
        if side.startswith("karpenter")
        and isinstance(entry.get(side, {}).get("nodes_created"), int)
        and entry[side]["nodes_created"] > entry["max_nodes"]
    ]
    notes = (
        [
            "",
            "Over the pool's limit (the NodePool's `limits.nodes` is maxNodes, `limits.cpu` "
            "maxNodes instances' CPU): "
            + ", ".join(over)
            + ". Karpenter's documentation says its provisioning is highly parallel and its "
            "limit checks eventually consistent, so a rapid scale-out can overrun a limit.",
        ]
        if over
        else []
    )
    phases = [
        "",
        "Where the time goes: per scenario and side, the median seconds of each phase over the "
        "pods that ran (each column the wait from the previous milestone; `[k early]`: k pods "
        "reached that milestone before the previous one, counted as 0 s there; `–`: no pod "
        "had both ends). What each milestone is measured from: see the notes below.",
        "",
        phase_table(f, p["scenarios"], p["sides"]),
    ]
    shown = [(sid, side) for sid in p["scenarios"] for side in p["sides"]]
    # results from before it have no last pod's path
    if any("last_pod_phases" in f.get(sid, {}).get(side, {}) for sid, side in shown):
        phases += [
            "",
            'The last pod to run, the one that sets "all fitting running": its own phases, '
            "the critical path the medians above hide (a second wave, a node that registers "
            "late). From the run shown in the first table.",
            "",
            phase_table(f, p["scenarios"], p["sides"], "last_pod_phases"),
        ]
    return "\n".join(
        [
            f"Karpenter: {p['karpenter']}; kwok {p['kwok']}; kube-scheduler scoring "
            f"{p['scheduler_scoring']}; the cluster: {p.get('cluster', NO_CLUSTER_PARAM)}. "
            "`karpenter` = consolidation as it defaults; "
            f"`{NODES_AFTER_BOOT}` = consolidation as it defaults, its Nodes created by the "
            "provider only when the boot is done (`nodeRegistrationDelay`, no start-up taint); "
            "`karpenter-noconsolidation` = `consolidateAfter: Never`. Scale-down waits "
            f"{p['scale_down_wait_s']:g} s after the pods' ReplicaSet scales to a third "
            "(it recreates the pods a drain evicts; ours: unneeded time "
            f"{p['ours_scale_down_unneeded']}, the pool's disruption blockers as they default).",
            "",
            *rows,
            *notes,
            *phases,
        ]
    )


BENCHMARK = Benchmark(
    name="karpenter",
    title="karpenter: Karpenter live on the same scenarios",
    description=(__doc__ or "").split("\n\nBy hand")[0].replace("\n", " "),
    run=run,
    markdown=markdown,
    needs_cluster=False,
    starts_own_cluster=True,
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.karpenter")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scenarios")
    parser.add_argument("--sides")
    parser.add_argument("--keep-logs", metavar="DIR", help="keep each run's logs in DIR")
    args = parser.parse_args()
    given = (("scenarios", args.scenarios), ("sides", args.sides), ("keep_logs", args.keep_logs))
    overrides = {k: v for k, v in given if v}
    ctx = Context(kubeconfig=Path(), quick=args.quick, overrides=overrides)
    print(json.dumps(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
