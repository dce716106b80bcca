"""The ``nodepool-operator`` command: ``run`` the operator, or ``demo`` it on a local cluster.

``run`` maps each flag onto one :class:`~nodepool_operator.settings.OperatorSettings` field, and
its help shows that field's default, read from the dataclass so the two cannot drift apart.

The operator wheel installs with no extras (the image does so): ``run --cloud aws`` and every
``--help`` need nothing else. What needs an extra is imported only when chosen: the demo's
runner (``demo``) and the test bed's simulated kubelets (``run --cloud simulated``); when the
extra is missing, the command says which one to install and exits with 2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubeloop import (
    CertificateError,
    ConfigError,
    KubeloopError,
    LeaderElectionLost,
    configure_logging,
    parse_label_selector,
)
from nodepool_operator import operator
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.demo import (
    DEFAULT_PODS,
    DemoError,
    DemoInterrupted,
    DemoOptions,
    DemoResult,
)
from nodepool_operator.settings import OperatorSettings

if TYPE_CHECKING:
    from nodepool_operator.operator import VmSide

log = logging.getLogger("nodepool_operator")

_DEFAULTS = OperatorSettings()
_DEMO = DemoOptions()
_LOG_LEVELS = ("debug", "info", "warning", "error")
#: controller-runtime's convention: a bind address of "0" turns the endpoint off.
_DISABLED = "0"
_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
_MISSING_EXTRA = 2
#: Top-level modules that only the extras bring (kubeloop.envtest reports its missing
#: ``cryptography`` under that name), so a missing one is a missing extra, not a bug.
_EXTRA_MODULES = frozenset({"cryptography", "pytest", "matplotlib", "moto"})


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    return _demo(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nodepool-operator",
        description="The NodePool + Autoscaler operator, on kubeloop.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run the operator against a cluster until SIGTERM/SIGINT",
        description="Run the operator against a cluster until SIGTERM or SIGINT.",
    )
    _kubeconfig_flag(
        run,
        "the cluster to run in (default: $KUBECONFIG, else the pod's service account, "
        "else ~/.kube/config)",
    )
    run.add_argument(
        "--cloud",
        choices=("simulated", "aws"),
        default=_DEFAULTS.cloud,
        help="where VMs live: simulated (a SQLite file; only for a cluster whose API server "
        "is on loopback) or aws (EC2; region and credentials from the standard AWS chain: "
        f"environment, profile, IRSA web identity, metadata) (default: {_DEFAULTS.cloud})",
    )
    run.add_argument(
        "--allow-simulated-cloud",
        action="store_true",
        default=_DEFAULTS.allow_simulated_cloud,
        help="run the simulated cloud even against a cluster that is not on loopback "
        "(its Nodes have no machines behind them) (default: refuse)",
    )
    run.add_argument(
        "--aws-region",
        default=_DEFAULTS.aws_region,
        metavar="R",
        help="with --cloud aws: the region (default: AWS_REGION, AWS_DEFAULT_REGION or the "
        "profile's)",
    )
    run.add_argument(
        "--aws-profile",
        default=_DEFAULTS.aws_profile,
        metavar="P",
        help="with --cloud aws: a shared-config profile (default: AWS_PROFILE, else default)",
    )
    run.add_argument(
        "--aws-endpoint-url",
        default=_DEFAULTS.aws_endpoint_url,
        metavar="URL",
        help="with --cloud aws: another EC2 API server, e.g. moto's (default: AWS's)",
    )
    run.add_argument(
        "--aws-instance-types",
        default=",".join(_DEFAULTS.aws_instance_types),
        metavar="T,T",
        help="with --cloud aws: offer only these instance types, comma-separated "
        "(default: every type of the region)",
    )
    run.add_argument(
        "--cloud-state",
        type=Path,
        default=_DEFAULTS.cloud_state,
        metavar="PATH",
        help="SQLite file of the simulated cloud; it outlives the operator "
        f"(default: {_DEFAULTS.cloud_state})",
    )
    _boot_seconds_flag(run, _DEFAULTS.boot_seconds)
    run.add_argument(
        "--registration-timeout",
        type=float,
        default=_DEFAULTS.registration_timeout_seconds,
        metavar="S",
        help="a VM whose Node has not registered this many seconds after it started running "
        f"is replaced (default: {_DEFAULTS.registration_timeout_seconds:g})",
    )
    run.add_argument(
        "--node-repair-seconds",
        type=float,
        default=_DEFAULTS.node_repair_seconds,
        metavar="S",
        help="a pool Node unhealthy for this long is drained and replaced, unless its pool "
        "sets spec.disruption.repair.toleration "
        f"(default: {_DEFAULTS.node_repair_seconds:g})",
    )
    run.add_argument(
        "--image-resolve-seconds",
        type=float,
        default=_DEFAULTS.image_resolve_seconds,
        metavar="S",
        help="how often a node class's AMI (its SSM parameter) is resolved anew to find "
        "drifted nodes; at once when the class changes "
        f"(default: {_DEFAULTS.image_resolve_seconds:g})",
    )
    run.add_argument(
        "--no-simulated-kubelets",
        dest="simulated_kubelets",
        action="store_false",
        default=_DEFAULTS.simulated_kubelets,
        help="do not run the simulated VMs' kubelets in this process (something else "
        "registers their Nodes)",
    )
    run.add_argument(
        "--label-selector",
        default=_DEFAULTS.label_selector,
        type=_label_selector,
        metavar="SEL",
        help="only handle NodePools, Autoscalers and Instances with these labels, e.g. "
        "shard=a (default: all)",
    )
    run.add_argument(
        "--metrics-bind-address",
        default=_DEFAULTS.metrics_bind_address or _DISABLED,
        metavar="A",
        help="host:port of /metrics; 0 turns it off "
        f"(default: {_DEFAULTS.metrics_bind_address or _DISABLED})",
    )
    run.add_argument(
        "--health-probe-bind-address",
        default=_DEFAULTS.health_probe_bind_address or _DISABLED,
        metavar="A",
        help="host:port of /healthz and /readyz; 0 turns them off "
        f"(default: {_DEFAULTS.health_probe_bind_address or _DISABLED})",
    )
    run.add_argument(
        "--webhook-port",
        type=_port,
        default=None,
        metavar="N",
        help="serve the validating admission webhook (one Autoscaler per NodePool, node "
        "classes that exist) over HTTPS on this port, every interface, on every replica "
        "(default: off; the controllers' conditions still report both cases)",
    )
    run.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=_DEFAULTS.webhook_cert_dir,
        metavar="DIR",
        help="directory of the webhook's tls.crt and tls.key (cert-manager's Secret layout), "
        f"reloaded when they change (default: {_DEFAULTS.webhook_cert_dir})",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        default=_DEFAULTS.leader_election,
        help="take a Lease before reconciling, for several replicas "
        f"(default: {'on' if _DEFAULTS.leader_election else 'off'})",
    )
    run.add_argument(
        "--leader-election-namespace",
        default=_DEFAULTS.leader_election_namespace,
        metavar="NS",
        help="namespace of the leader Lease (default: the pod's namespace in a cluster, "
        "else default)",
    )
    crds = run.add_mutually_exclusive_group()
    crds.add_argument(
        "--install-crds",
        dest="install_crds",
        action="store_true",
        default=_DEFAULTS.install_crds,
        help="install or update the CRDs at start-up (needs config/rbac/crd_installer_role.yaml; "
        "default: off, the CRDs come from `make install`)",
    )
    crds.add_argument(
        "--no-install-crds",
        dest="install_crds",
        action="store_false",
        help="do not touch the CRDs at start-up (the default)",
    )
    run.add_argument(
        "--max-node-provision-time",
        dest="max_node_provision_seconds",
        type=float,
        default=_DEFAULTS.max_node_provision_seconds,
        metavar="SECONDS",
        help="requested nodes not registered after this long stop counting as in flight: "
        "the Autoscaler lowers the target back and backs off "
        f"(default: {_DEFAULTS.max_node_provision_seconds:g})",
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines on stderr as text or one JSON object each (default: text)",
    )
    run.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        default="info",
        help="the least severe level logged (default: info)",
    )

    demo = sub.add_parser(
        "demo",
        help="the operator end to end on a local control plane, with a live view",
        description="Start a local control plane and the operator with the simulated cloud, "
        "apply a NodePool (96 GiB nodes) and an Autoscaler for namespaces prod and money-maker, "
        "create a burst of pending pods, and watch until every pod that fits is scheduled.",
    )
    _kubeconfig_flag(
        demo,
        "use this cluster instead of starting a local control plane; the demo still runs its "
        "own operator, so stop any other one first (default: a local control plane)",
    )
    demo.add_argument(
        "--cloud",
        choices=("simulated", "aws"),
        default=_DEMO.cloud,
        help="simulated, or aws: the operator's AwsCloud against a moto EC2 server started on "
        "loopback (needs the aws-demo extra); VMs are counted from moto's DescribeInstances "
        f"(default: {_DEMO.cloud})",
    )
    demo.add_argument(
        "--scheduler-scoring",
        choices=("LeastAllocated", "MostAllocated"),
        default=_DEMO.scheduler_scoring,
        help="kube-scheduler's NodeResourcesFit scoring in the demo's control plane: "
        "LeastAllocated spreads pods (its default), MostAllocated packs them onto the fullest "
        "node (the bin-packing profile cluster-autoscaler documents); not with --kubeconfig "
        f"(default: {_DEMO.scheduler_scoring})",
    )
    demo.add_argument(
        "--pods",
        type=int,
        default=_DEMO.pods,
        metavar="N",
        help="pods in the burst; 4 of them must not cause a scale-up, the rest keep the "
        f"default mix of 28Gi, 12Gi and 4Gi pods (default: {DEFAULT_PODS})",
    )
    _boot_seconds_flag(demo, _DEMO.boot_seconds)
    demo.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="write summary.md and chart.png here, with the cloud file and operator log "
        "(default: no report; a temp dir for the rest)",
    )
    demo.add_argument(
        "--keep",
        action="store_true",
        help="leave the control plane and operator running for kubectl until Ctrl-C",
    )
    demo.add_argument(
        "--headless",
        action="store_true",
        help="no live view; a progress line on stderr every few seconds",
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="end with one JSON line of figures on stdout instead of the summary",
    )
    demo.add_argument(
        "--timeout",
        type=float,
        default=_DEMO.timeout,
        metavar="T",
        help="seconds to wait for every fitting pod to be scheduled; then exit 1 "
        f"(default: {_DEMO.timeout:g})",
    )
    return parser


def _kubeconfig_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--kubeconfig", type=Path, metavar="K", help=help)


def _boot_seconds_flag(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--boot-seconds",
        type=float,
        default=default,
        metavar="S",
        help=f"seconds a simulated VM takes to boot (default: {default:g})",
    )


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is not between 1 and 65535")
    return port


def _label_selector(value: str) -> str:
    """Refused at the command line (exit 2, naming it) rather than at the first read."""
    try:
        parse_label_selector(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def _address(value: str) -> str | None:
    return None if value in (_DISABLED, "") else value


def _run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level.upper(), json_format=args.log_format == "json")
    settings = OperatorSettings(
        cloud=args.cloud,
        allow_simulated_cloud=args.allow_simulated_cloud,
        aws_region=args.aws_region,
        aws_profile=args.aws_profile,
        aws_endpoint_url=args.aws_endpoint_url,
        aws_instance_types=tuple(t for t in args.aws_instance_types.split(",") if t),
        cloud_state=args.cloud_state,
        boot_seconds=args.boot_seconds,
        label_selector=args.label_selector,
        install_crds=args.install_crds,
        leader_election=args.leader_elect,
        leader_election_namespace=args.leader_election_namespace,
        metrics_bind_address=_address(args.metrics_bind_address),
        health_probe_bind_address=_address(args.health_probe_bind_address),
        max_node_provision_seconds=args.max_node_provision_seconds,
        registration_timeout_seconds=args.registration_timeout,
        node_repair_seconds=args.node_repair_seconds,
        image_resolve_seconds=args.image_resolve_seconds,
        simulated_kubelets=args.simulated_kubelets,
        webhook_bind_address=None if args.webhook_port is None else f":{args.webhook_port}",
        webhook_cert_dir=args.webhook_cert_dir,
    )
    kubeconfig = str(args.kubeconfig) if args.kubeconfig is not None else None
    try:
        vms = _simulated_vms(settings)
    except ImportError as err:
        return _missing_extra(
            "--cloud simulated runs its VMs' kubelets from the test bed, which",
            err,
            otherwise=" (or pass --no-simulated-kubelets)",
        )
    try:
        asyncio.run(operator.run(kubeconfig, settings, vms=vms))
    except ConfigError as err:
        log.error("cannot connect: %s", err)
        return 1
    except operator.CloudChoiceError as err:
        log.error("%s", err)
        return 2
    except CertificateError as err:
        # --webhook-port with no usable certificate in --webhook-cert-dir
        log.error("webhook: %s", err)
        return 2
    except LeaderElectionLost as err:
        # Exit so the supervisor restarts us as a standby (controller-runtime does the same).
        log.error("%s", err)
        return 1
    except KeyboardInterrupt:
        return _INTERRUPTED
    return 0


def _simulated_vms(settings: OperatorSettings) -> VmSide | None:
    """The simulated VMs' kubelets, if this run has them: only now is the test bed imported."""
    if settings.cloud != "simulated" or not settings.simulated_kubelets:
        return None
    from nodepool_operator.testbed import simulated_vms

    # opened once the operator has checked that the simulated cloud may run here
    return lambda config: simulated_vms(
        config, SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
    )


def _missing_extra(what: str, err: ImportError, *, extra: str = "demo", otherwise: str = "") -> int:
    """One line naming the extra to install, for an ImportError of a module only an extra
    brings; any other ImportError is a bug and propagates."""
    if (err.name or "").partition(".")[0] not in _EXTRA_MODULES:
        raise err
    print(
        f"error: {what} needs the {extra} extra ({err.name} is not installed): "
        f'pip install "nodepool-operator[{extra}]"{otherwise}',
        file=sys.stderr,
    )
    return _MISSING_EXTRA


def _demo(args: argparse.Namespace) -> int:
    try:
        # the runner needs a local control plane (kubeloop[testing]) and matplotlib
        from nodepool_operator.demo import run_demo
    except ImportError as err:
        return _missing_extra("nodepool-operator demo", err)
    if args.cloud == "aws" and importlib.util.find_spec("moto") is None:
        # moto's server runs in a child process; say so now rather than once the cluster is up
        missing = ModuleNotFoundError(name="moto")
        return _missing_extra("nodepool-operator demo --cloud aws", missing, extra="aws-demo")
    options = DemoOptions(
        kubeconfig=args.kubeconfig,
        pods=args.pods,
        boot_seconds=args.boot_seconds,
        report=args.report,
        keep=args.keep,
        headless=args.headless,
        json=args.json,
        timeout=args.timeout,
        cloud=args.cloud,
        scheduler_scoring=args.scheduler_scoring,
    )
    try:
        result = asyncio.run(run_demo(options))
    except (DemoInterrupted, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return _INTERRUPTED
    except (DemoError, KubeloopError) as err:
        # KubeloopError: the cluster refused or failed a request while setting up.
        print(f"error: {err}", file=sys.stderr)
        return 1
    return _exit_status(result)


def _exit_status(result: DemoResult) -> int:
    f = result.figures
    if not result.converged:
        print(
            f"error: timed out after {result.timeout:g} s: {f.pods_scheduled} of "
            f"{f.pods_fitting} pods that fit were scheduled",
            file=sys.stderr,
        )
        return 1
    if not result.ok:
        print(f"error: {'; '.join(f.problems())}", file=sys.stderr)
        return 1
    if f.nodes != f.nodes_lower_bound:
        print(
            f"warning: {f.nodes} nodes where {f.nodes_lower_bound} would hold the pods",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
