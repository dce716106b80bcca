"""The composition root: the one place that wires client, cloud, manager and controllers."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from urllib.parse import urlsplit

from kubeloop import (
    Client,
    ClusterConfig,
    Manager,
    ManagerOptions,
    Registry,
    WebhookServerOptions,
    load_config,
    load_kubeconfig,
)
from nodepool_operator.admission import PoolAdmission
from nodepool_operator.api import (
    AUTOSCALER_CONVERSION_PATH,
    INSTANCE_CONVERSION_PATH,
    NODEPOOL_CONVERSION_PATH,
    autoscaler_converter,
    crds,
    instance_converter,
    nodepool_converter,
)
from nodepool_operator.cloud import (
    AwsCloud,
    CloudProvider,
    MeteredCloud,
    SimulatedCloud,
    SqsQueue,
    aws_environment_problems,
)
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.instance import InstanceController
from nodepool_operator.controllers.interruption import InterruptionSource
from nodepool_operator.controllers.nodepool import NodePoolController
from nodepool_operator.crdinstall import install_crds
from nodepool_operator.settings import OperatorSettings

#: Writes are attributed to ``kubeloop-<controller>`` in managedFields (see docs/ownership.md).
FIELD_MANAGER = "kubeloop"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: Every controller the operator has.
CONTROLLERS = ("nodepool", "autoscaler", "instance")
#: Opens the VMs' side for a cluster: a context that runs the VMs' kubelets while open.
VmSide = Callable[[ClusterConfig], contextlib.AbstractAsyncContextManager[object]]


class CloudChoiceError(Exception):
    """The chosen cloud cannot be used here; the message says what is missing or wrong."""


def is_local_test_bed(server: str) -> bool:
    """Whether the API server is on this machine's loopback (envtest, kind, a local demo):
    the only clusters where VMs of the simulated cloud are harmless."""
    host = urlsplit(server).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.asynccontextmanager
async def open_cloud(
    settings: OperatorSettings, config: ClusterConfig
) -> AsyncIterator[CloudProvider]:
    """The cloud ``settings.cloud`` names, checked before anything reconciles.

    Raises:
        CloudChoiceError: ``aws`` without a region or credentials (naming which), or
            ``simulated`` against a cluster that is not a local test bed, unless
            ``settings.allow_simulated_cloud``, or with an interruption queue (EC2's).
    """
    if settings.cloud == "aws":
        problems = await aws_environment_problems(settings.aws_region, settings.aws_profile)
        if problems:
            raise CloudChoiceError("--cloud aws cannot start: " + "; ".join(problems))
        async with AwsCloud(
            region=settings.aws_region,
            profile=settings.aws_profile,
            endpoint_url=settings.aws_endpoint_url,
            instance_types=settings.aws_instance_types or None,
        ) as aws:
            yield aws
        return
    if settings.interruption_queue:
        raise CloudChoiceError(
            "--interruption-queue needs --cloud aws: the queue carries EC2's notices, and the "
            "simulated cloud's VMs are not EC2's"
        )
    if not settings.allow_simulated_cloud and not is_local_test_bed(config.server):
        raise CloudChoiceError(
            f"the simulated cloud's VMs are not real, and {config.server} is not a local "
            "test bed (its API server is not on loopback): use --cloud aws, or "
            "--allow-simulated-cloud if this cluster is a test bed"
        )
    yield SimulatedCloud(settings.cloud_state, boot_seconds=settings.boot_seconds)


def _own_namespace() -> str:
    """The pod's namespace when running in a cluster, else ``default``."""
    try:
        return (SERVICE_ACCOUNT_NAMESPACE.read_text().strip()) or "default"
    except OSError:
        return "default"


def build_manager(
    client: Client,
    cloud: CloudProvider,
    settings: OperatorSettings,
    *,
    registry: Registry | None = None,
    controllers: Collection[str] = CONTROLLERS,
) -> Manager:
    """One manager with the NodePool, Autoscaler and Instance controllers (or a subset),
    and the validating webhook if ``settings.webhook_bind_address`` is set."""
    options = ManagerOptions(
        name="nodepool-operator",
        leader_election=settings.leader_election,
        leader_election_id="nodepool-operator-leader",
        leader_election_namespace=settings.leader_election_namespace or _own_namespace(),
        metrics_bind_address=settings.metrics_bind_address,
        health_probe_bind_address=settings.health_probe_bind_address,
        handle_signals=settings.handle_signals,
    )
    if registry is not None:
        options.registry = registry
    mgr = Manager(client, options)
    # every cloud call counted by operation and outcome, whichever cloud this is
    cloud = MeteredCloud(cloud, options.registry)
    if "nodepool" in controllers:
        NodePoolController(
            mgr,
            cloud,
            settings,
            interruptions=_interruption_source(client, settings, options.registry),
        ).register()
    if "autoscaler" in controllers:
        AutoscalerController(mgr, settings, cloud=cloud).register()
    if "instance" in controllers:
        InstanceController(mgr, cloud, settings).register()
    if settings.webhook_bind_address is not None:
        # on every replica (the manager does not wait for leading to serve webhooks)
        server = mgr.webhook_server(
            WebhookServerOptions(
                bind_address=settings.webhook_bind_address, cert_dir=settings.webhook_cert_dir
            )
        )
        PoolAdmission(client).register(server)
        # v1beta1 <-> v1alpha1, for CRDs serving both (config/conversion, docs/versions.md)
        server.add_conversion(NODEPOOL_CONVERSION_PATH, nodepool_converter())
        server.add_conversion(AUTOSCALER_CONVERSION_PATH, autoscaler_converter())
        server.add_conversion(INSTANCE_CONVERSION_PATH, instance_converter())
    return mgr


def _interruption_source(
    client: Client, settings: OperatorSettings, registry: Registry
) -> InterruptionSource | None:
    """The interruption queue's reader, when ``settings.interruption_queue`` names one."""
    name = settings.interruption_queue
    if not name:
        return None

    def open_queue() -> SqsQueue:
        return SqsQueue(
            name,
            region=settings.aws_region,
            profile=settings.aws_profile,
            endpoint_url=settings.aws_endpoint_url,
        )

    return InterruptionSource(client, open_queue, registry, label_selector=settings.label_selector)


@contextlib.asynccontextmanager
async def operator(
    kubeconfig: str | None,
    settings: OperatorSettings,
    *,
    registry: Registry | None = None,
) -> AsyncIterator[Manager]:
    """A ready-to-run manager (CRDs installed if asked); the client closes on exit."""
    # no kubeconfig: $KUBECONFIG, then the pod's service account, then ~/.kube/config
    config = load_kubeconfig(kubeconfig) if kubeconfig else load_config()
    client = Client(config, field_manager=FIELD_MANAGER)
    try:
        async with open_cloud(settings, config) as cloud:
            if settings.install_crds:
                await install_crds(client, crds())
            yield build_manager(client, cloud, settings, registry=registry)
    finally:
        await client.close()


async def run(
    kubeconfig: str | None, settings: OperatorSettings, *, vms: VmSide | None = None
) -> None:
    """Run until SIGTERM/SIGINT.

    Args:
        vms: the VMs' side, run beside the operator while it runs: with the simulated cloud,
            something must play its VMs' kubelets (``nodepool_operator.testbed``, which
            the caller brings so that this module never imports the test bed); on EC2 the
            VMs' own kubelets register their Nodes and this is None.
    """
    async with contextlib.AsyncExitStack() as stack:
        mgr = await stack.enter_async_context(operator(kubeconfig, settings))
        if vms is not None:
            config = load_kubeconfig(kubeconfig) if kubeconfig else load_config()
            await stack.enter_async_context(vms(config))
        await mgr.run()
