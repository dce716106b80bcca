"""The operator's settings, one documented object (every field has its default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kubeloop import WebhookServerOptions

CloudName = Literal["simulated", "aws"]


@dataclass
class OperatorSettings:
    """How the operator runs; ``nodepool-operator run --help`` maps flags onto these."""

    #: Which cloud the VMs live in: ``simulated`` (a SQLite file; local test beds only) or
    #: ``aws`` (EC2, with credentials and region from the standard AWS chain).
    cloud: CloudName = "simulated"
    #: Let the simulated cloud run against a cluster whose API server is not on loopback
    #: (off: its VMs are not real, so a real cluster would get Nodes nothing runs on).
    allow_simulated_cloud: bool = False
    #: AWS region and shared-config profile; None: the standard chain's (AWS_REGION...).
    aws_region: str | None = None
    aws_profile: str | None = None
    #: Another EC2 API server (e.g. moto's on loopback); None: AWS's own endpoints.
    aws_endpoint_url: str | None = None
    #: Offer only these instance types (fewer DescribeInstanceTypes pages); empty: all.
    aws_instance_types: tuple[str, ...] = ()
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
    #: A pool's Node unhealthy (Ready not True) for this many seconds is drained and replaced
    #: (Karpenter's node repair toleration, 30 min) unless the pool's
    #: spec.disruption.repair.toleration says otherwise; never while too much of it is.
    node_repair_seconds: float = 1800.0
    #: How often a node class's image (its SSM parameter) is resolved anew for drift:
    #: Karpenter's 5 minutes; at once whenever the class changes. Shorter in tests.
    image_resolve_seconds: float = 300.0
    #: With the simulated cloud, also run its VMs' kubelets in this process (they register
    #: the Nodes; see ``nodepool_operator.testbed.SimulatedKubelets``; needs the demo extra).
    simulated_kubelets: bool = True
    #: Instance drift check period (the seeds' "every few minutes"; shorter in tests).
    drift_interval_seconds: float = 120.0
    #: How long a pod must have been unschedulable before the Autoscaler acts, so a burst
    #: of pods is planned together (cluster-autoscaler's new-pod delay).
    #: 1 s, as Karpenter's batch idle duration: long enough to plan a burst once, short
    #: enough to decide within 2 s of the last pod.
    batch_window_seconds: float = 1.0
    #: Nodes requested but not registered stop counting as in flight after this long without
    #: progress (cluster-autoscaler's ``max-node-provision-time``, 15 minutes): the
    #: Autoscaler lowers the target back to the registered nodes and backs off.
    max_node_provision_seconds: float = 900.0
    #: The first backoff after a timed-out provisioning; doubles per failure, up to 30 min.
    scale_up_backoff_seconds: float = 300.0
    #: A pod planned onto a new node that is Ready but did not take it within this long is
    #: reported as not taken and not scaled for again (no runaway growth).
    pod_landing_grace_seconds: float = 30.0
    #: Scale-down: a non-empty node is unneeded below this utilisation (the larger of its
    #: cpu and memory requests over allocatable) if its pods fit on the other nodes
    #: (cluster-autoscaler's ``scale-down-utilization-threshold``).
    scale_down_utilization_threshold: float = 0.5
    #: Only handle NodePools, Autoscalers and Instances with these labels (e.g. ``shard=a``);
    #: None handles all. Lets several operators (or tests) share one cluster.
    label_selector: str | None = None
    #: Install or update the CRDs at start-up. Off by default: CRDs are cluster-wide schema
    #: (``make install`` applies them once, as a cluster admin); an operator that rewrites
    #: them on every start needs cluster-wide rights and may roll a schema back.
    install_crds: bool = False
    #: Leader election (off for a single local process).
    leader_election: bool = False
    #: Namespace of the leader Lease; None: the pod's own namespace in a cluster, else default.
    leader_election_namespace: str | None = None
    #: /metrics and /healthz,/readyz addresses (None disables).
    metrics_bind_address: str | None = "127.0.0.1:8080"
    health_probe_bind_address: str | None = "127.0.0.1:8081"
    #: The validating admission webhook (``nodepool_operator.admission``): ``host:port`` to
    #: serve it on, every replica (an empty host binds every interface); None (the default)
    #: serves nothing, and the controllers' conditions report what the webhook would refuse.
    webhook_bind_address: str | None = None
    #: Where the webhook's ``tls.crt`` and ``tls.key`` are (a mounted cert-manager Secret);
    #: re-read when they change. Default: controller-runtime's, where config/webhook mounts it.
    webhook_cert_dir: Path = Path(WebhookServerOptions.cert_dir)
    #: Shut down gracefully on SIGTERM/SIGINT (off when embedded in tests or the demo).
    handle_signals: bool = True
