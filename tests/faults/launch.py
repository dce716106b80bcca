"""``nodepool-operator run`` for the fault matrix: the same composition root, test timings.

The CLI takes no flags for lease timings, drift interval, GC grace or the pod landing
grace (production has no use for 4 s leases), so the matrix starts the operator through
this module instead: it wires the manager as ``nodepool_operator.operator.build_manager``
does, with ``OperatorSettings`` and ``ManagerOptions`` a test can shorten. It is a separate OS
process like the real one, and SIGKILL, SIGTERM and leader election behave the same.

    python tests/faults/launch.py --kubeconfig K --cloud-state F --label-selector run=x \
        --controllers nodepool,autoscaler --identity op-1 --leader-elect --lease-namespace ns
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from kubeloop import Client, Manager, ManagerOptions, configure_logging, load_kubeconfig
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.instance import InstanceController
from nodepool_operator.controllers.nodepool import NodePoolController
from nodepool_operator.operator import FIELD_MANAGER
from nodepool_operator.settings import OperatorSettings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--cloud-state", required=True, type=Path)
    p.add_argument("--label-selector", required=True)
    p.add_argument("--controllers", default="nodepool,autoscaler")
    p.add_argument("--identity", required=True)
    p.add_argument("--leader-elect", action="store_true")
    p.add_argument("--lease-namespace", default="default")
    p.add_argument("--lease-duration", type=float, default=4.0)
    p.add_argument("--renew-deadline", type=float, default=3.0)
    p.add_argument("--retry-period", type=float, default=0.5)
    p.add_argument("--boot-seconds", type=float, default=0.5)
    p.add_argument("--drift-interval", type=float, default=2.0)
    p.add_argument("--gc-grace", type=float, default=5.0)
    p.add_argument("--landing-grace", type=float, default=30.0)
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    settings = OperatorSettings(
        cloud_state=args.cloud_state,
        boot_seconds=args.boot_seconds,
        gc_grace_seconds=args.gc_grace,
        drift_interval_seconds=args.drift_interval,
        pod_landing_grace_seconds=args.landing_grace,
        batch_window_seconds=0.5,
        label_selector=args.label_selector,
        install_crds=False,
        leader_election=args.leader_elect,
        leader_election_namespace=args.lease_namespace,
        metrics_bind_address=None,
        health_probe_bind_address=None,
        handle_signals=True,
    )
    client = Client(load_kubeconfig(args.kubeconfig), field_manager=FIELD_MANAGER)
    try:
        cloud = SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)
        # build_manager's options plus the test-length lease timings and the identity
        # (the proxy's client name, so a test can map the Lease holder to a process)
        options = ManagerOptions(
            name="nodepool-operator",
            leader_election=settings.leader_election,
            leader_election_id="nodepool-operator-leader",
            leader_election_namespace=args.lease_namespace,
            identity=args.identity,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=True,
        )
        mgr = Manager(client, options)
        controllers = args.controllers.split(",")
        if "nodepool" in controllers:
            NodePoolController(mgr, cloud, settings).register()
        if "autoscaler" in controllers:
            AutoscalerController(mgr, settings).register()
        if "instance" in controllers:
            InstanceController(mgr, cloud, settings).register()
        await mgr.run()
    finally:
        await client.close()


def main() -> None:
    configure_logging(os.environ.get("LOG_LEVEL", "INFO"), json_format=True)
    asyncio.run(run(parse_args()))


if __name__ == "__main__":
    main()
