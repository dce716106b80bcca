"""Runs the demo: a control plane, the operator in this event loop, the burst, and the watch.

Everything blocking (starting etcd and the apiserver, SQLite reads of the simulated cloud,
writing the report) runs in worker threads, so the operator's reconciles, the demo's watches
and the live view share one event loop without stalling each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from kubeloop import (
    NAMESPACES,
    PODS,
    AlreadyExists,
    Client,
    Manager,
    NotFound,
    Registry,
    Resource,
    configure_logging,
    load_kubeconfig,
)
from kubeloop.envtest import ControlPlane, ControlPlaneOptions, find_assets
from nodepool_operator.api import AUTOSCALERS, AWSNODECLASSES, NODEPOOLS
from nodepool_operator.demo import _scaledown
from nodepool_operator.demo._apiactivity import ApiActivity, api_activity
from nodepool_operator.demo._clouds import DemoCloud, SimulatedDemoCloud, moto_cloud
from nodepool_operator.demo._clusterview import ClusterView
from nodepool_operator.demo._figures import compute_figures
from nodepool_operator.demo._liveview import LiveView, status_line
from nodepool_operator.demo._options import DemoError, DemoInterrupted, DemoOptions
from nodepool_operator.demo._report import terminal_summary, write_report
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._sample import Sample, take_sample
from nodepool_operator.demo._workload import POOL_NAME, Role, Workload
from nodepool_operator.operator import operator
from nodepool_operator.settings import OperatorSettings
from nodepool_operator.testbed import MotoUnavailable

#: Seconds between two samples (and redraws of the live view).
TICK = 0.25
#: Seconds between two progress lines when there is no live view.
PROGRESS_EVERY = 2.0
#: After the last fitting pod is bound, how long to wait at most for the pool to come to rest
#: (no VM in flight, every node ready) and the Autoscaler's Events to arrive.
SETTLE_SECONDS = 15.0
#: ... and at least this long, so the chart shows the end state and a late wrong scale-up
#: (say, for a pod that was bound into spare room) would still be seen; the second act, too,
#: watches its shrunk pool this long before it ends.
TAIL_SECONDS = 2.0
#: How long the operator and the demo's watches get to list everything at start-up.
SYNC_SECONDS = 60.0
#: On a cluster given with --kubeconfig, how long deleting the pool (and its VMs) may take.
CLEANUP_SECONDS = 60.0
#: The demo writes as itself, so managedFields tell its objects from the operator's writes.
FIELD_MANAGER = "nodepool-demo"
#: How long the second act (scale-down) may take at most.
SCALE_DOWN_SECONDS = 120.0
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)

log = logging.getLogger("nodepool_operator.demo")


async def run_demo(
    options: DemoOptions, *, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr
) -> DemoResult:
    """Run the demo end to end and return what happened; prints as ``options`` say.

    Raises:
        DemoError: the cluster or the operator could not be set up.
        DemoInterrupted: on Ctrl-C or SIGTERM (everything started is stopped first).
    """
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        async with contextlib.AsyncExitStack() as stack:
            return await _Run(options, stop, stack, stdout, stderr).run()


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class _Run:
    """One run's state; :meth:`run` is the script, the other methods its steps."""

    def __init__(
        self,
        options: DemoOptions,
        stop: asyncio.Event,
        stack: contextlib.AsyncExitStack,
        stdout: TextIO,
        stderr: TextIO,
    ) -> None:
        self.options = options
        self.stop = stop
        self.stack = stack
        self.stdout = stdout
        self.stderr = stderr
        if options.kubeconfig is not None and options.scheduler_scoring != "LeastAllocated":
            raise DemoError(
                "--scheduler-scoring sets the scheduler of the demo's own control plane; "
                "with --kubeconfig the cluster's scheduler scores as it is configured"
            )
        try:
            self.workload = Workload.sized(options.pods, ec2=options.cloud == "aws")
        except ValueError as err:
            raise DemoError(str(err)) from None
        self.registry = Registry()
        self.baseline = ApiActivity()
        self.samples: list[Sample] = []
        self.live = (
            None if options.headless or not stdout.isatty() else LiveView(stdout, self.workload)
        )
        # The second act's figures (see _scale_down_act).
        self.pods_running = 0
        self.nodes_drained = 0
        self.pdb_blocked_s = 0.0
        self.act2_at: float | None = None
        #: The Autoscaler's unremovable nodes, as last seen non-empty in the second act.
        self.blockers: list[str] = []

    def say(self, message: str) -> None:
        print(message, file=self.stderr, flush=True)

    async def run(self) -> DemoResult:
        workdir = self._workdir()
        kubeconfig = self.options.kubeconfig or await self._start_control_plane()
        cloud = await self._cloud(workdir)
        self.say(f"starting the operator (in this process) with the {cloud.name} cloud")
        settings = OperatorSettings(
            **cloud.settings,
            boot_seconds=self.options.boot_seconds,
            install_crds=True,
            # The demo says it runs the simulated cloud, also on a --kubeconfig cluster.
            allow_simulated_cloud=True,
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=False,
        )
        mgr = await self.stack.enter_async_context(
            operator(str(kubeconfig), settings, registry=self.registry)
        )
        running = asyncio.create_task(mgr.run(), name="nodepool-operator")
        self.stack.push_async_callback(_stop_operator, mgr, running)
        # The VMs' side: each booted VM's kubelet registers its Node (kwok then runs it).
        await self.stack.enter_async_context(cloud.vm_side(load_kubeconfig(str(kubeconfig))))
        client = Client.from_kubeconfig(kubeconfig, field_manager=FIELD_MANAGER)
        self.stack.push_async_callback(client.close)
        await self._until(lambda: _synced(mgr), running, "the operator's caches to sync")

        await self._apply(client, cloud)
        if self.options.kubeconfig is not None and not self.options.keep:
            # Another's cluster: leave it as found. Runs before the operator stops (LIFO),
            # since the pool's finalizer needs the operator to delete its VMs.
            self.stack.push_async_callback(self._clean_up, client)
        view = ClusterView(client)
        self.stack.push_async_callback(view.stop)
        await view.start(SYNC_SECONDS)
        self.say(f"creating {len(self.workload.pods())} pods at once")
        # Count the operator's writes from here: installing CRDs is start-up, not the scenario.
        self.baseline = api_activity(self.registry)
        started = asyncio.get_running_loop().time()
        await self._create_pods(client)

        converged_at = await self._watch(view, cloud, running, started)
        self.pods_running = _scaledown.running(view.pods())
        # The figures of the scale-up are those at its end; the second act adds its own.
        result = await self._result(view, cloud, converged_at)
        if converged_at is not None:
            await self._scale_down_act(client, view, cloud, running, started)
            result = self._with_second_act(result, view)
        # The cloud's own record at the very end, after the second act's terminations: the
        # summary's cloud calls and cloud.json both come from this one snapshot.
        snapshot = await cloud.snapshot()
        result = dataclasses.replace(
            result, cloud_record={"cloud": cloud.name, **snapshot.to_json()}
        )
        if self.options.report is not None:
            summary, chart = await asyncio.to_thread(write_report, result, self.options.report)
            self.say(f"report: {summary} and {chart}")
        if self.options.json:
            print(json.dumps(result.figures.to_json()), file=self.stdout, flush=True)
        else:
            self.stdout.write(terminal_summary(result))
            self.stdout.flush()
        if self.options.keep:
            await self._keep(kubeconfig, workdir)
        return result

    # -- set-up ---------------------------------------------------------------------------

    def _workdir(self) -> Path:
        """Where the cloud file and the operator log go: the report dir, or a temp dir."""
        if self.options.report is not None:
            workdir = self.options.report
            workdir.mkdir(parents=True, exist_ok=True)
            # A fresh cloud each run: VMs of an earlier run would count as leaked.
            for name in ("cloud.sqlite", "cloud.sqlite-wal", "cloud.sqlite-shm"):
                (workdir / name).unlink(missing_ok=True)
        else:
            workdir = Path(tempfile.mkdtemp(prefix="nodepool-demo-"))
            self.stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        self._log_to(workdir / "operator.log")
        return workdir

    def _log_to(self, path: Path) -> None:
        """The operator logs to a file: on the terminal its lines would tear the live view."""
        configure_logging(logging.INFO)
        handler = logging.getLogger().handlers[0]
        stream = path.open("w", encoding="utf-8")
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)
        self.stack.callback(stream.close)
        self.stack.callback(logging.getLogger().removeHandler, handler)

    async def _cloud(self, workdir: Path) -> DemoCloud:
        if self.options.cloud == "simulated":
            return SimulatedDemoCloud(workdir / "cloud.sqlite")
        self.say("starting moto's EC2 API server on loopback (AwsCloud talks to it)")
        try:
            return await self.stack.enter_async_context(moto_cloud(workdir))
        except MotoUnavailable as err:
            raise DemoError(str(err)) from err

    async def _start_control_plane(self) -> Path:
        scoring = self.options.scheduler_scoring
        self.say(
            f"starting a local cluster (etcd, kube-apiserver, kube-scheduler scoring {scoring}, "
            "kube-controller-manager, kwok)"
        )
        plane = ControlPlane(
            ControlPlaneOptions(
                scheduler=True, scheduler_scoring=scoring, controller_manager=True, kwok=True
            )
        )
        try:
            await asyncio.to_thread(plane.start)
        except Exception as err:
            raise DemoError(f"the control plane did not start: {err}") from err
        self.stack.push_async_callback(asyncio.to_thread, plane.stop)
        if self.stop.is_set():
            raise DemoInterrupted
        self.say(f"control plane up at {plane.server}")
        return plane.kubeconfig

    async def _apply(self, client: Client, cloud: DemoCloud) -> None:
        for namespace in self.workload.namespaces():
            with contextlib.suppress(AlreadyExists):
                await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        node_class = cloud.node_class(POOL_NAME)
        if node_class is not None:
            spec = node_class["spec"]
            self.say(
                f"applying AwsNodeClass {POOL_NAME} (AMI from SSM parameter "
                f"{spec['amiSsmParameter']}, {len(spec['subnetIds'])} subnets)"
            )
            with contextlib.suppress(AlreadyExists):
                await client.create(AWSNODECLASSES, node_class)
        self.say(
            f"applying NodePool {POOL_NAME} ({self.workload.shape.instance_type}, "
            f"{self.workload.shape.memory}) and its Autoscaler "
            f"(frequency {self.workload.frequency})"
        )
        try:
            await client.create(NODEPOOLS, self.workload.nodepool())
            await client.create(AUTOSCALERS, self.workload.autoscaler())
        except AlreadyExists as err:
            raise DemoError(
                f"{err.message}: a demo already ran on this cluster; delete its NodePool and "
                "Autoscaler, or run without --kubeconfig for a fresh cluster"
            ) from None

    async def _create_pods(self, client: Client) -> None:
        pods = self.workload.pods()
        results = await asyncio.gather(
            *(client.create(PODS, pod, pod["metadata"]["namespace"]) for pod in pods),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, AlreadyExists):
                raise DemoError(f"{result.message}: delete the demo's pods first")
            if isinstance(result, BaseException):
                raise result

    # -- the run --------------------------------------------------------------------------

    async def _watch(
        self, view: ClusterView, cloud: DemoCloud, running: asyncio.Task[None], start: float
    ) -> float | None:
        """Sample until every fitting pod is bound and the pool is at rest, or the timeout.

        Returns when the last fitting pod was seen bound (seconds after ``start``), or None.
        """
        loop = asyncio.get_running_loop()
        converged_at: float | None = None
        progress_at = -PROGRESS_EVERY
        try:
            while True:
                _raise_if_stopped(running)
                sample = await self._sample(view, cloud, loop.time() - start)
                self.samples.append(sample)
                if self.live is not None:
                    self.live.draw(sample, self.samples)
                elif sample.t - progress_at >= PROGRESS_EVERY:
                    progress_at = sample.t
                    self.say(status_line(sample))
                if converged_at is None and sample.converged:
                    converged_at = sample.t
                if converged_at is not None:
                    settled = self._at_rest(sample) and sample.t - converged_at >= TAIL_SECONDS
                    if settled or sample.t - converged_at > SETTLE_SECONDS:
                        return converged_at
                if converged_at is None and sample.t > self.options.timeout:
                    return None
                if await _stopped_within(self.stop, TICK):
                    raise DemoInterrupted
        finally:
            if self.live is not None:
                self.live.close()

    async def _scale_down_act(
        self,
        client: Client,
        view: ClusterView,
        cloud: DemoCloud,
        running: asyncio.Task[None],
        start: float,
    ) -> None:
        """The second act (see :mod:`._scaledown`): make room, run a Deployment under a budget
        on the emptiest node, turn scale-down on, and watch the pool drain and shrink."""
        loop = asyncio.get_running_loop()
        victim = _scaledown.victim_node(view.nodes(), view.pods())
        if victim is None:
            return
        before_nodes = {n["metadata"]["name"] for n in view.nodes()}
        target_before = self.samples[-1].target_nodes
        self.act2_at = loop.time() - start
        doomed = _scaledown.making_room(victim, view.pods())
        self.say(
            f"act 2: deleting {len(doomed)} bare pod(s) (those on node {victim}, the ones that "
            f"must not trigger, one per other node), a Deployment of {_scaledown.REPLICAS} on "
            f"{victim} under a PodDisruptionBudget (minAvailable "
            f"{_scaledown.PDB_MIN_AVAILABLE}), then scale-down on"
        )
        for namespace, name in doomed:
            with contextlib.suppress(NotFound):
                await client.delete(PODS, name, namespace)
        with contextlib.suppress(AlreadyExists):
            await client.create(PDBS, _scaledown.budget(), _scaledown.PDB_NAMESPACE)
        with contextlib.suppress(AlreadyExists):
            await client.create(
                DEPLOYMENTS, _scaledown.deployment(victim), _scaledown.PDB_NAMESPACE
            )
        await self._until(
            lambda: _scaledown.replicas_on(victim, view.pods()) >= _scaledown.REPLICAS,
            running,
            f"the Deployment's {_scaledown.REPLICAS} pods to run on {victim}",
        )
        await client.patch(AUTOSCALERS, POOL_NAME, _scaledown.scale_down_patch())
        deadline = loop.time() + SCALE_DOWN_SECONDS
        progress_at = -PROGRESS_EVERY
        rested_at: float | None = None
        held_at: float | None = None  # when the budget was first seen holding the drain
        surged = False
        while loop.time() < deadline:
            _raise_if_stopped(running)
            sample = await self._sample(view, cloud, loop.time() - start)
            self.samples.append(sample)
            pdb = await _get_or_none(client, PDBS, _scaledown.PDB_NAME, _scaledown.PDB_NAMESPACE)
            if _scaledown.pdb_blocked(view.nodes(), view.pods(), pdb):
                self.pdb_blocked_s += TICK
                held_at = sample.t if held_at is None else held_at
            refused = _scaledown.refused_evictions(view.events())
            waited = held_at is not None and sample.t - held_at >= _scaledown.REFUSAL_WAIT
            if not surged and held_at is not None and (refused or waited):
                # The budget held the drain: the application's owner adds a spare replica.
                self.say(
                    f"act 2: the budget refused {refused} eviction(s); scaling Deployment "
                    f"{_scaledown.DEPLOYMENT_NAME} to {_scaledown.REPLICAS + 1}"
                )
                await client.patch(
                    DEPLOYMENTS,
                    _scaledown.DEPLOYMENT_NAME,
                    _scaledown.surge_patch(),
                    _scaledown.PDB_NAMESPACE,
                )
                surged = True
            self.blockers = _scaledown.blockers(view.autoscaler()) or self.blockers
            if sample.t - progress_at >= PROGRESS_EVERY:
                progress_at = sample.t
                self.say(status_line(sample))
            gone = before_nodes - {n["metadata"]["name"] for n in view.nodes()}
            self.nodes_drained = len(gone)
            shrunk = sample.target_nodes < target_before and gone
            at_rest = (
                shrunk
                and sample.scale_operation == "inactive"
                and sample.ready_nodes == sample.nodes == sample.target_nodes == sample.vms
            )
            if not at_rest:
                rested_at = None
            elif rested_at is None:
                rested_at = sample.t
            # Watch the shrunk pool a little longer, as after the scale-up: the chart then
            # shows its end state, not the drop as the last sample at its edge.
            if rested_at is not None and sample.t - rested_at >= TAIL_SECONDS:
                return
            if await _stopped_within(self.stop, TICK):
                raise DemoInterrupted
        self.say(f"act 2: the pool did not shrink within {SCALE_DOWN_SECONDS:.0f} s")

    def _at_rest(self, sample: Sample) -> bool:
        """No VM in flight, every node ready, and the Autoscaler has had its say on the pods
        that must not trigger it (its Events are written in the background)."""
        expected = sum(1 for r in self.workload.roles().values() if r is not Role.FITS)
        return (
            sample.scale_operation == "inactive"
            and sample.ready_nodes == sample.nodes == sample.target_nodes == sample.vms
            and len(sample.not_triggering) >= expected
        )

    async def _sample(self, view: ClusterView, cloud: DemoCloud, t: float) -> Sample:
        snapshot = await cloud.snapshot()
        return take_sample(
            t,
            pods=view.pods(),
            nodes=view.nodes(),
            pool=view.pool(),
            autoscaler=view.autoscaler(),
            vms=snapshot.live,
            api=api_activity(self.registry).since(self.baseline),
            events=view.events(),
        )

    async def _result(
        self, view: ClusterView, cloud: DemoCloud, converged_at: float | None
    ) -> DemoResult:
        snapshot = await cloud.snapshot()
        final = self.samples[-1]
        figures = compute_figures(
            self.workload,
            final,
            vms=snapshot.live,
            nodes=view.nodes(),
            pool=view.pool(),
            duplicates=snapshot.duplicates,
            seconds=final.t if converged_at is None else converged_at,
            pods_running=self.pods_running,
        )
        pod_nodes = {
            (p["metadata"]["namespace"], p["metadata"]["name"]): p["spec"].get("nodeName", "")
            for p in view.pods()
        }
        return DemoResult(
            workload=self.workload,
            figures=figures,
            samples=tuple(self.samples),
            pod_nodes=pod_nodes,
            boot_seconds=self.options.boot_seconds,
            scheduler_scoring=None if self.options.kubeconfig else self.options.scheduler_scoring,
            converged=converged_at is not None,
            timeout=self.options.timeout,
            scale_down_at=self.act2_at,
        )

    def _with_second_act(self, result: DemoResult, view: ClusterView) -> DemoResult:
        final = self.samples[-1]
        figures = dataclasses.replace(
            result.figures,
            api_writes=final.api.writes,
            conflicts=final.api.conflicts,
            nodes_drained=self.nodes_drained,
            evictions=len(view.evicted),
            pdb_blocked_s=round(self.pdb_blocked_s, 1),
            evictions_refused=_scaledown.refused_evictions(view.events()),
        )
        return dataclasses.replace(
            result,
            figures=figures,
            samples=tuple(self.samples),
            scale_down_at=self.act2_at,
            unremovable=tuple(self.blockers),
            disruption=_scaledown.disruption_settings(view.pool()),
            disruption_status=dict(
                ((view.pool() or {}).get("status") or {}).get("disruption") or {}
            ),
        )

    async def _until(
        self,
        done: Callable[[], bool],
        running: asyncio.Task[None],
        what: str,
        timeout: float = SYNC_SECONDS,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not done():
            _raise_if_stopped(running)
            if asyncio.get_running_loop().time() > deadline:
                raise DemoError(f"timed out after {timeout:.0f} s waiting for {what}")
            if await _stopped_within(self.stop, TICK):
                raise DemoInterrupted

    # -- the end --------------------------------------------------------------------------

    async def _keep(self, kubeconfig: Path, workdir: Path) -> None:
        assets = await asyncio.to_thread(find_assets, build=False)
        kubectl = str(assets.kubectl) if assets.kubectl is not None else "kubectl"
        # After the second act the Autoscaler's scale-down is on, and would undo a manual
        # scale-up within seconds: say so, and how to keep one.
        keep_scale = (
            (
                f"The second act left the Autoscaler's scale-down on "
                f"({_scaledown.UNNEEDED_TIME}); to keep a manual scale, turn it off first:\n"
                f"  {kubectl} patch autoscaler/{POOL_NAME} --type=merge "
                """-p '{"spec":{"scaleDownEnabled":false}}'\n"""
            )
            if self.act2_at is not None
            else ""
        )
        self.say(
            "\nThe cluster and the operator keep running; Ctrl-C stops them.\n"
            f"  export KUBECONFIG={kubeconfig}\n"
            f"  {kubectl} get nodepools,autoscalers\n"
            f"  {kubectl} get nodes -L kubeloop.dev/nodepool\n"
            f"  {kubectl} get pods -A -o wide\n"
            f"{keep_scale}"
            f"  {kubectl} scale nodepool/{POOL_NAME} --replicas=5\n"
            f"operator log: {workdir / 'operator.log'}"
        )
        await self.stop.wait()

    async def _clean_up(self, client: Client) -> None:
        """Delete what the demo created (its pods, the budget, Autoscaler, NodePool and node class),
        and wait for the pool's finalizer to remove its VMs."""
        for pod in self.workload.pods():
            with contextlib.suppress(NotFound):
                await client.delete(PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
        # The second act's Deployment (its pods go with it) and budget.
        second_act = ((DEPLOYMENTS, _scaledown.DEPLOYMENT_NAME), (PDBS, _scaledown.PDB_NAME))
        for resource, name in second_act:
            with contextlib.suppress(NotFound):
                await client.delete(resource, name, _scaledown.PDB_NAMESPACE)
        for resource in (AUTOSCALERS, NODEPOOLS, AWSNODECLASSES):
            with contextlib.suppress(NotFound):
                await client.delete(resource, POOL_NAME)
        deadline = asyncio.get_running_loop().time() + CLEANUP_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            try:
                await client.get(NODEPOOLS, POOL_NAME)
            except NotFound:
                return
            await asyncio.sleep(TICK)
        self.say(f"NodePool {POOL_NAME} still exists after {CLEANUP_SECONDS:.0f} s; left as is")


async def _get_or_none(
    client: Client, resource: Resource, name: str, namespace: str
) -> dict[str, Any] | None:
    with contextlib.suppress(NotFound):
        return dict(await client.get(resource, name, namespace))
    return None


def _synced(mgr: Manager) -> bool:
    informers = mgr.cache.informers
    return bool(informers) and all(i.has_synced for i in informers)


def _raise_if_stopped(running: asyncio.Task[None]) -> None:
    """The operator's task should run until the demo stops it; if it ended, say why."""
    if running.done():
        err = None if running.cancelled() else running.exception()
        raise DemoError(f"the operator stopped unexpectedly: {err!r}") from err


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; True (at once) if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def _stop_operator(mgr: Manager, running: asyncio.Task[None]) -> None:
    mgr.stop()
    try:
        await asyncio.wait_for(running, 30)
    except asyncio.CancelledError:
        pass
    except Exception:
        # Already reported by _raise_if_stopped, or the demo is failing for another reason
        # that must not be masked by this one.
        log.exception("the operator did not stop cleanly")
