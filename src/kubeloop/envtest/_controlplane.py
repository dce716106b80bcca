"""etcd + kube-apiserver (+ kube-scheduler, kube-controller-manager, kwok) on loopback.

The lean control plane (etcd, apiserver, scheduler) is envtest's: Nodes are API objects
that nobody heartbeats, which is all most integration tests need. With
``controller_manager=True`` and ``kwok=True`` it is a small cluster instead: garbage
collection, namespace deletion, PodDisruptionBudget status, Deployments and the node
lifecycle controller run, and kwok plays the kubelet of every Node that opts in with the
annotation ``kwok.x-k8s.io/node: fake`` (:data:`KWOK_NODE_ANNOTATIONS`): it marks the Node
Ready, renews its Lease, and runs the pods bound to it (Running, with a pod IP; deleted pods
are finished off). A Node that never opts in, or that :meth:`ControlPlane.silence_node`
silenced, is not heartbeated, so the node lifecycle controller marks it ``Unknown`` after
``node_monitor_grace_seconds`` and taints it, as on a real cluster whose kubelet died.
(Removing the annotation later is not enough: kwok v0.8.0 keeps renewing the Lease of a
Node it once managed until the Node is deleted.)
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeloop import _pki
from kubeloop.envtest import _process
from kubeloop.envtest._assets import Assets, find_assets
from kubeloop.envtest._errors import EnvtestError, StartError
from kubeloop.envtest._nodes import (
    KWOK_NODE_ANNOTATIONS,
    NODE_LEASE_NAMESPACE,
    node_manifest,
    silenced_lease_patch,
)
from kubeloop.envtest._rest import RestClient, RestError

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: kube-scheduler's NodeResourcesFit scoring strategies ``ControlPlaneOptions`` accepts.
SCHEDULER_SCORINGS = ("LeastAllocated", "MostAllocated")
_LEAN_DISABLED = "ServiceAccount,TaintNodesByCondition"
_GATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")

#: kube-controller-manager's controllers in the full test bed, and why each is there.
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    # ownerReferences cascade (foreground/background deletion, orphans)
    "garbage-collector-controller",
    # a deleted namespace finishes deleting (its content is removed first)
    "namespace-controller",
    # Ready=Unknown and the not-ready/unreachable taints for Nodes nobody heartbeats;
    # removes the not-ready taint TaintNodesByCondition puts on new Nodes once they are Ready
    "node-lifecycle-controller",
    # evicts pods from NoExecute-tainted (e.g. unreachable) Nodes after their toleration
    "taint-eviction-controller",
    # PodDisruptionBudget status: the Eviction API refuses (429) until it is computed
    "disruption-controller",
    # Deployments and ReplicaSets create their pods, and replace evicted ones
    "deployment-controller",
    "replicaset-controller",
    # a StatefulSet makes its pods and, from its volumeClaimTemplates, their claims
    "statefulset-controller",
    # deletes pods bound to Nodes that no longer exist, and terminated pods over a threshold
    "pod-garbage-collector-controller",
    # binds claims to volumes (a StatefulSet's claim to a volume pinned to a zone)
    "persistentvolume-binder-controller",
)
#: Pod IPs kwok hands out (distinct from the Service range 10.0.0.0/24).
POD_CIDR = "10.244.0.0/16"


@dataclass
class ControlPlaneOptions:
    """How to start a control plane. Every field has a usable default."""

    #: Run kube-scheduler too (needed for anything that waits for pods to bind).
    scheduler: bool = True
    #: kube-scheduler's ``NodeResourcesFit`` scoring: ``"LeastAllocated"`` (its default,
    #: which spreads pods over nodes) or ``"MostAllocated"`` (fills the fullest node first:
    #: the bin-packing profile cluster-autoscaler documents, so the scheduler places pods
    #: the way an autoscaler's plan packed them).
    scheduler_scoring: str = "LeastAllocated"
    #: Data dir (certs, etcd data, logs, kubeconfig). None: a temp dir removed on stop.
    dir: Path | None = None
    #: Seconds each component gets to become healthy (2-core CI machines are slow).
    start_timeout: float = 90.0
    #: Extra kube-apiserver flags, appended after the defaults (later flags win).
    apiserver_args: list[str] = field(default_factory=list)
    #: Kubernetes feature gates, name -> on/off, given as ``--feature-gates`` to every
    #: Kubernetes component this control plane runs (kube-apiserver, kube-scheduler,
    #: kube-controller-manager), as a cluster sets them: a gate such as
    #: ``ClearingNominatedNodeNameAfterBinding`` acts in the apiserver while its sibling
    #: ``NominatedNodeNameForExpectation`` acts in the scheduler. Empty: each binary's defaults.
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    #: Binaries to use; None looks them up (and builds them if needed).
    assets: Assets | None = None
    #: Run kube-controller-manager with :attr:`controllers`. It also turns the apiserver's
    #: TaintNodesByCondition admission back on: new Nodes start tainted not-ready until the
    #: node lifecycle controller sees them Ready (so they need kwok, or another heartbeat).
    controller_manager: bool = False
    #: kube-controller-manager's ``--controllers`` (see :data:`DEFAULT_CONTROLLERS`).
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS
    #: Run kwok for the Nodes annotated ``kwok.x-k8s.io/node: fake`` (and their pods).
    kwok: bool = False
    #: Seconds without a Lease renewal (or status update) before the node lifecycle
    #: controller marks a Node ``Unknown``: kube-controller-manager's
    #: ``--node-monitor-grace-period`` (50 s upstream; shorter so tests wait less).
    node_monitor_grace_seconds: int = 30
    #: How often the node lifecycle controller checks each Node's health:
    #: kube-controller-manager's ``--node-monitor-period`` (5 s upstream; shorter so tests
    #: see a silent Node go ``Unknown`` sooner). New Nodes' not-ready taint is lifted on the
    #: Node's own update, not on this period.
    node_monitor_period_seconds: int = 2
    #: kwok's ``--node-lease-duration-seconds``; it renews each Lease every quarter of it.
    node_lease_seconds: int = 20


class ControlPlane:
    """A real etcd, kube-apiserver and (optionally) kube-scheduler on free loopback ports.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. The admin
    identity is a client certificate in ``system:masters``; :attr:`kubeconfig`
    points at a kubeconfig for it.
    """

    def __init__(self, options: ControlPlaneOptions | None = None) -> None:
        self.options = options or ControlPlaneOptions()
        self._owns_dir = self.options.dir is None
        self.dir = self.options.dir or Path(tempfile.mkdtemp(prefix="kubeloop-envtest-"))
        self._procs: list[_process.Process] = []
        self._pidfile: Path | None = None
        self._ca: _pki.CertificateAuthority | None = None
        #: Each component's health probe, kept from start-up for restarts.
        self._probes: dict[str, Callable[[], bool]] = {}
        self._paused: set[str] = set()
        #: The binaries this control plane runs (set by :meth:`start`).
        self.assets: Assets | None = self.options.assets
        self.etcd_url = ""
        self.server = ""

    # -- paths -------------------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def cluster(self) -> bool:
        """Whether kube-controller-manager or kwok run (a cluster, not a bare control plane)."""
        return self.options.controller_manager or self.options.kwok

    def start(self) -> None:
        opts = self.options
        gates = feature_gates_flag(opts.feature_gates)  # refuse a bad gate before any start
        _process.reap_leftovers()
        assets = self.assets = opts.assets or find_assets(cluster=self.cluster)
        if opts.scheduler and assets.kube_scheduler is None:
            raise EnvtestError("kube-scheduler binary not found; run `make setup` to build it")
        if opts.controller_manager and assets.kube_controller_manager is None:
            raise EnvtestError("kube-controller-manager not found; run `make setup` to build it")
        if opts.kwok and (assets.kwok is None or assets.kwok_stages is None):
            raise EnvtestError("kwok or its stages not found; run `make setup` to build them")
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        try:
            self._write_pki()
            self._start_etcd(assets)
            self._start_apiserver(assets, gates)
            self._write_kubeconfig(self.kubeconfig, "admin", ("system:masters",))
            if opts.scheduler:
                assert assets.kube_scheduler is not None
                self._start_scheduler(assets.kube_scheduler, gates)
            if opts.controller_manager:
                assert assets.kube_controller_manager is not None
                self._start_controller_manager(assets.kube_controller_manager, gates)
            if opts.kwok:
                assert assets.kwok is not None
                assert assets.kwok_stages is not None
                self._start_kwok(assets.kwok, assets.kwok_stages)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()
        if self._pidfile is not None:
            self._pidfile.unlink(missing_ok=True)
            self._pidfile = None
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    # -- components ----------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> _process.Process:
        proc = _process.Process(name, argv, self.dir / "logs" / f"{name}.log")
        proc.start()
        self._procs.append(proc)
        self._pidfile = _process.record(os.getpid(), self._procs, self.dir, owns_dir=self._owns_dir)
        return proc

    def _wait(self, proc: _process.Process, probe: Any) -> None:
        self._probes[proc.name] = probe
        deadline = time.monotonic() + self.options.start_timeout
        last = ""
        while time.monotonic() < deadline:
            code = proc.exited()
            if code is not None:
                raise StartError(
                    f"{proc.name} exited with code {code} during start-up; "
                    f"last lines of {proc.log_path}:\n{proc.log_tail()}"
                )
            try:
                if probe():
                    return
            except (OSError, urllib.error.URLError, ssl.SSLError) as err:
                last = str(err)
            time.sleep(0.1)
        raise StartError(
            f"{proc.name} not healthy after {self.options.start_timeout:.0f}s ({last}); "
            f"last lines of {proc.log_path}:\n{proc.log_tail()}"
        )

    def _write_pki(self) -> None:
        self.pki.mkdir(parents=True, exist_ok=True)
        self._ca = _pki.CertificateAuthority()
        _pki.write(self.ca_file, self._ca.cert_pem)
        serving = self._ca.serving()
        _pki.write(self.pki / "apiserver.crt", serving.cert_pem)
        _pki.write(self.pki / "apiserver.key", serving.key_pem, private=True)
        admin = self._ca.client("admin", ("system:masters",))
        _pki.write(self.pki / "admin.crt", admin.cert_pem)
        _pki.write(self.pki / "admin.key", admin.key_pem, private=True)
        sa_key, sa_pub = _pki.signing_key_pair()
        _pki.write(self.pki / "sa.key", sa_key, private=True)
        _pki.write(self.pki / "sa.pub", sa_pub)

    def _start_etcd(self, assets: Assets) -> None:
        client, peer = _process.free_port(), _process.free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        proc = self._spawn(
            "etcd",
            [
                str(assets.etcd),
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",  # test data: durability is not worth the fsync latency
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        self._wait(proc, healthy)

    def _start_apiserver(self, assets: Assets, gates: list[str]) -> None:
        port = _process.free_port()
        self.server = f"https://127.0.0.1:{port}"
        proc = self._spawn(
            "kube-apiserver",
            [
                str(assets.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                # no default route is needed to start, and nothing here needs
                # endpoints for the default/kubernetes Service
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={self.pki / 'apiserver.crt'}",
                f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_file}",
                f"--service-account-issuer={self.server}/",
                f"--service-account-key-file={self.pki / 'sa.pub'}",
                f"--service-account-signing-key-file={self.pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                # ServiceAccount: no controller creates default SAs here.
                # TaintNodesByCondition: it taints every new Node not-ready, and only
                # the node lifecycle controller removes that taint again.
                "--disable-admission-plugins="
                + ("ServiceAccount" if self.options.controller_manager else _LEAN_DISABLED),
                "--profiling=false",
                "--v=1",
                *gates,
                *self.options.apiserver_args,
            ],
        )
        ctx = ssl.create_default_context(cafile=str(self.ca_file))

        def ready() -> bool:
            req = urllib.request.Request(f"{self.server}/readyz")
            try:
                with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                    return bool(resp.status == 200)
            except urllib.error.HTTPError:
                return False

        self._wait(proc, ready)

    def _scheduler_config(self) -> dict[str, object]:
        scoring = self.options.scheduler_scoring
        if scoring not in SCHEDULER_SCORINGS:
            raise EnvtestError(
                f"ControlPlaneOptions.scheduler_scoring: {scoring!r} is not one of "
                f"{', '.join(SCHEDULER_SCORINGS)}"
            )
        config: dict[str, object] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "leaderElection": {"leaderElect": False},
        }
        if scoring != "LeastAllocated":
            strategy = {
                "type": scoring,
                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
            }
            config["profiles"] = [
                {
                    "schedulerName": "default-scheduler",
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}
                    ],
                }
            ]
        return config

    def _start_scheduler(self, binary: Path, gates: list[str]) -> None:
        port = _process.free_port()
        config = self.dir / "scheduler.yaml"
        config.write_text(yaml.safe_dump(self._scheduler_config()))
        proc = self._spawn(
            "kube-scheduler",
            [
                str(binary),
                f"--config={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / 'scheduler-certs'}",
                "--v=1",
                *gates,
            ],
        )
        self._wait(proc, _https_healthz(port))

    def _start_controller_manager(self, binary: Path, gates: list[str]) -> None:
        port = _process.free_port()
        # its own user (in system:masters: with the default
        # --use-service-account-credentials=false every controller uses this identity)
        kubeconfig = self.kubeconfig_for("system:kube-controller-manager", ("system:masters",))
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / 'controller-manager-certs'}",
                f"--controllers={','.join(self.options.controllers)}",
                f"--node-monitor-grace-period={self.options.node_monitor_grace_seconds}s",
                f"--node-monitor-period={self.options.node_monitor_period_seconds}s",
                "--v=1",
                *gates,
            ],
        )
        self._wait(proc, _https_healthz(port))

    def _start_kwok(self, binary: Path, stages: Path) -> None:
        port = _process.free_port()
        kubeconfig = self.kubeconfig_for("kwok", ("system:masters",))
        selector = ",".join(f"{k}={v}" for k, v in KWOK_NODE_ANNOTATIONS.items())
        proc = self._spawn(
            "kwok",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={selector}",
                "--node-ip=127.0.0.1",
                # bound to loopback explicitly: with only --node-port kwok listens on 0.0.0.0
                f"--server-address=127.0.0.1:{port}",
                f"--node-port={port}",
                f"--cidr={POD_CIDR}",
                f"--node-lease-duration-seconds={self.options.node_lease_seconds}",
            ],
        )

        def healthy() -> bool:  # kwok serves only after its controllers have started
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return bool(r.status == 200)
            except urllib.error.HTTPError:
                return False

        self._wait(proc, healthy)

    # -- identities ----------------------------------------------------------------
    def _write_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...]) -> Path:
        if self._ca is None:
            raise EnvtestError("control plane not started")
        pair = self._ca.client(user, groups)

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self._ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(pair.cert_pem),
                        "client-key-data": b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
            "current-context": "envtest",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for another identity (no RBAC rights unless you grant them)."""
        return self._write_kubeconfig(self.dir / f"kubeconfig-{user}", user, tuple(groups))

    # -- API helpers (synchronous; for fixtures and tools) ---------------------------
    def rest(self) -> RestClient:
        """A small synchronous admin client."""
        return RestClient(self.server, self.ca_file, self.pki / "admin.crt", self.pki / "admin.key")

    def install_crds(
        self, crds: Iterable[Path | Mapping[str, Any]], *, timeout: float = 30.0
    ) -> list[str]:
        """Create (or replace) CRDs from YAML files or objects; wait until they are served."""
        objs: list[dict[str, Any]] = []
        for item in crds:
            if isinstance(item, Path):
                objs.extend(d for d in yaml.safe_load_all(item.read_text()) if d)
            else:
                objs.append(dict(item))
        rest = self.rest()
        names = []
        for crd in objs:
            if crd.get("kind") != "CustomResourceDefinition" or "metadata" not in crd:
                raise EnvtestError(
                    f"install_crds: not a CustomResourceDefinition: kind {crd.get('kind')!r}"
                )
            name = crd["metadata"]["name"]
            try:
                rest.post(CRD_PATH, crd)
            except RestError as err:
                if err.status != 409:
                    raise
                current = rest.get(f"{CRD_PATH}/{name}")
                crd = {
                    **crd,
                    "metadata": {
                        **crd["metadata"],
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    },
                }
                rest.request("PUT", f"{CRD_PATH}/{name}", crd)
            names.append(name)
        for crd in objs:
            self._wait_crd(rest, crd, timeout)
        return names

    def _wait_crd(self, rest: RestClient, crd: Mapping[str, Any], timeout: float) -> None:
        name = crd["metadata"]["name"]
        spec = crd["spec"]
        plural = spec["names"]["plural"]
        versions = [v["name"] for v in spec["versions"] if v.get("served", True)]
        deadline = time.monotonic() + timeout
        while True:
            obj = rest.get(f"{CRD_PATH}/{name}")
            conds = {
                c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []
            }
            if conds.get("Established") == "True":
                try:
                    served = all(
                        any(
                            r["name"] == plural
                            for r in rest.get(f"/apis/{spec['group']}/{v}")["resources"]
                        )
                        for v in versions
                    )
                except RestError:
                    served = False
                if served:
                    return
            if time.monotonic() > deadline:
                raise EnvtestError(f"CRD {name} not established after {timeout}s: {conds}")
            time.sleep(0.05)

    def create_namespace(self, prefix: str = "test") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.rest().post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        return name

    def create_node(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """Create a kubelet-less Node; keyword arguments go to :func:`node_manifest`
        (``kwok=True`` on a test bed with kwok: a Node kwok heartbeats and runs pods on)."""
        result: dict[str, Any] = self.rest().post("/api/v1/nodes", node_manifest(name, **kwargs))
        return result

    def silence_node(self, name: str) -> None:
        """Stop kwok's heartbeats for one Node, as if its kubelet died (see
        :func:`~kubeloop.envtest.silenced_lease_patch`); :meth:`revive_node` undoes it."""
        self.rest().request(
            "PATCH",
            f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{name}",
            silenced_lease_patch(),
            content_type="application/merge-patch+json",
        )

    def revive_node(self, name: str) -> None:
        """Let kwok heartbeat a silenced Node again (it re-creates the Lease)."""
        with contextlib.suppress(RestError):
            self.rest().delete(
                f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{name}"
            )

    def etcd_revision(self) -> int:
        """The current etcd revision (through etcd's JSON gateway)."""
        body = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode(), "limit": 1})
        return int(body["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd up to ``revision`` (default: now); older revisions become 410 Gone."""
        rev = revision if revision is not None else self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def _etcd(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    # -- control-plane faults (for kubeloop.testing.faults) ----------------------------
    #: Component names: "etcd", "kube-apiserver", "kube-scheduler" (if started), and any
    #: other component this control plane runs.

    def component(self, name: str) -> _process.Process:
        """The running component called ``name``."""
        for proc in self._procs:
            if proc.name == name:
                return proc
        known = ", ".join(p.name for p in self._procs) or "none"
        raise EnvtestError(f"no component {name!r} (running: {known})")

    def restart(self, name: str, *, kill: bool = False) -> None:
        """Stop ``name`` (SIGTERM, or SIGKILL with ``kill=True``: a crash) and start it
        again with the same arguments (same ports, same data dir); return once it is
        healthy again."""
        proc = self.component(name)
        self._paused.discard(name)
        if kill:
            proc.kill()
        else:
            proc.stop()
        proc.start()
        self._pidfile = _process.record(os.getpid(), self._procs, self.dir, owns_dir=self._owns_dir)
        probe = self._probes.get(name)
        if probe is not None:
            self._wait(proc, probe)

    def restart_apiserver(self, *, kill: bool = False) -> None:
        """Restart kube-apiserver on the same port; clients see their connections drop
        and then reconnect to the same address. Returns once it is ready."""
        self.restart("kube-apiserver", kill=kill)

    def restart_etcd(self, *, kill: bool = False) -> None:
        """Restart etcd with the same data dir and ports; returns once etcd is healthy
        and kube-apiserver is ready again (it reconnects by itself)."""
        self.restart("etcd", kill=kill)
        probe = self._probes.get("kube-apiserver")
        if probe is not None and any(p.name == "kube-apiserver" for p in self._procs):
            self._wait(self.component("kube-apiserver"), probe)

    def pause(self, name: str) -> None:
        """Freeze ``name`` with SIGSTOP: its sockets stay open but nothing answers, as a
        process stuck in a long GC pause or on a dead disk looks to its peers."""
        self.component(name).signal(signal.SIGSTOP)
        self._paused.add(name)

    def resume(self, name: str) -> None:
        """SIGCONT a component frozen by :meth:`pause`."""
        self.component(name).signal(signal.SIGCONT)
        self._paused.discard(name)

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """:meth:`pause` ``name`` for the body of a ``with`` block."""
        self.pause(name)
        try:
            yield
        finally:
            self.resume(name)

    @property
    def paused_components(self) -> frozenset[str]:
        return frozenset(self._paused)


def feature_gates_flag(gates: Mapping[str, bool]) -> list[str]:
    """``ControlPlaneOptions.feature_gates`` as component flags: ``[]`` when empty, else one
    ``--feature-gates=A=true,B=false`` (sorted, so a restart passes the same flag).

    A name that is not a gate's shape or a value that is not a bool is refused here, naming
    the field, rather than as a component that exits during start-up; an unknown but
    well-formed name is left to the components, which refuse it with their own message."""
    bad = [
        f"{name!r}: {value!r}"
        for name, value in gates.items()
        if not (isinstance(name, str) and _GATE_NAME.fullmatch(name) and isinstance(value, bool))
    ]
    if bad:
        raise EnvtestError(
            "ControlPlaneOptions.feature_gates: each entry must be a gate name (letters and "
            f"digits) mapped to True or False, got {', '.join(bad)}"
        )
    if not gates:
        return []
    return [
        "--feature-gates=" + ",".join(f"{n}={str(v).lower()}" for n, v in sorted(gates.items()))
    ]


def _https_healthz(port: int) -> Any:
    """A probe of a component's /healthz on its self-signed loopback port."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its serving cert is self-signed in memory

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz", timeout=2, context=ctx
            ) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError:
            return False

    return healthy
