"""The operator's settings, one documented object (every field has its default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class OperatorSettings:
    """How the operator runs; ``nodepool-operator run --help`` maps flags onto these."""

    #: SQLite file of the simulated cloud; it outlives the operator, like a real cloud.
    cloud_state: Path = Path(".nodepool-cloud.sqlite")
    #: Seconds a simulated VM takes to boot (pending -> running).
    boot_seconds: float = 5.0
    #: Parallel reconciles per controller: slow cloud work for one pool never blocks another.
    nodepool_workers: int = 4
    autoscaler_workers: int = 2
    instance_workers: int = 4
    #: A VM tagged for a pool but unknown to it is deleted after this many seconds.
    gc_grace_seconds: float = 60.0
    #: A VM whose Node has not registered this many seconds after it started running is
    #: replaced, with an Event (Karpenter's registration TTL is 15 min; VMs here boot fast).
    registration_timeout_seconds: float = 300.0
    #: A pool's Node whose Ready condition has not been True for this many seconds is
    #: replaced without a drain (its kubelet is unreachable), as Karpenter's node repair does.
    node_repair_seconds: float = 600.0
    #: With the simulated cloud, also run its VMs' kubelets in this process (they register
    #: the Nodes; see ``nodepool_operator.cloud.SimulatedKubelets``).
    simulated_kubelets: bool = True
    #: Instance drift check period (the seeds' "every few minutes"; shorter in tests).
    drift_interval_seconds: float = 120.0
    #: How long a pod must have been unschedulable before the Autoscaler acts, so a burst
    #: of pods is planned together (cluster-autoscaler's new-pod delay).
    #: 1 s, as Karpenter's batch idle duration: long enough to plan a burst once, short
    #: enough to decide within 2 s of the last pod.
    batch_window_seconds: float = 1.0
    #: Only handle NodePools, Autoscalers and Instances with these labels (e.g. ``shard=a``);
    #: None handles all. Lets several operators (or tests) share one cluster.
    label_selector: str | None = None
    #: Install or update the CRDs at start-up.
    install_crds: bool = True
    #: Leader election (off for a single local process).
    leader_election: bool = False
    #: Namespace of the leader Lease; None: the pod's own namespace in a cluster, else default.
    leader_election_namespace: str | None = None
    #: /metrics and /healthz,/readyz addresses (None disables).
    metrics_bind_address: str | None = "127.0.0.1:8080"
    health_probe_bind_address: str | None = "127.0.0.1:8081"
    #: Shut down gracefully on SIGTERM/SIGINT (off when embedded in tests or the demo).
    handle_signals: bool = True
