"""The tutorial's Greeting in two versions, and the webhook that converts between them.

    python greeting_versions.py   # $KUBECONFIG, or --kubeconfig K

v1 is part 1's Greeting: still the version etcd stores and part 1's operator reads. v2 says
``suspend: true`` where v1 says ``enabled: false``. Both versions are Python types here;
kubeloop.crd makes the CRD that serves them, and this process converts between them. It
runs in development mode, as greeting_webhooks.py does: its own CA and certificate, and a
CRD whose conversion calls https://127.0.0.1:<port>.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import logging
import tempfile
from dataclasses import dataclass, field
from typing import Annotated

from kubeloop import (
    CRDS,
    Client,
    Converter,
    Manager,
    ManagerOptions,
    Object,
    WebhookServer,
    WebhookServerOptions,
    configure_logging,
    generate_serving_certificates,
)
from kubeloop.crd import (
    Condition,
    CustomResource,
    ListMapKey,
    MaxLength,
    MinLength,
    ObjectMeta,
    PrinterColumn,
    Version,
)

Message = Annotated[str, MinLength(1), MaxLength(200)]


@dataclass(frozen=True, kw_only=True)
class GreetingStatus:
    """What the operator last did; the same in both versions."""

    observed_generation: int | None = None
    """The generation the operator last acted on."""
    config_map: str | None = None
    """The ConfigMap holding the message; empty while there is none."""
    conditions: Annotated[list[Condition], ListMapKey("type")] = field(default_factory=list)
    """Ready, and why."""


@dataclass(frozen=True, kw_only=True)
class GreetingSpecV1:
    """What the Greeting asks for (v1)."""

    message: Message
    """What the ConfigMap says."""
    enabled: bool = True
    """false: no ConfigMap."""


@dataclass(frozen=True, kw_only=True)
class GreetingV1:
    """A Greeting asks for a ConfigMap holding its message."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: GreetingSpecV1
    """What the Greeting asks for."""
    status: GreetingStatus = field(default_factory=GreetingStatus)
    """What the operator last did."""


@dataclass(frozen=True, kw_only=True)
class GreetingSpecV2:
    """What the Greeting asks for (v2)."""

    message: Message
    """What the ConfigMap says."""
    suspend: bool = False
    """true: no ConfigMap, until it is false again."""


@dataclass(frozen=True, kw_only=True)
class GreetingV2:
    """A Greeting asks for a ConfigMap holding its message."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: GreetingSpecV2
    """What the Greeting asks for."""
    status: GreetingStatus = field(default_factory=GreetingStatus)
    """What the operator last did."""


COLUMNS = (
    PrinterColumn("Message", ".spec.message", "string", "What the ConfigMap says."),
    PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', "string", "Ready."),
)
GREETINGS = CustomResource(
    "tutorial.kubeloop.dev",
    "Greeting",
    "greetings",
    (Version("v1", GreetingV1, COLUMNS), Version("v2", GreetingV2, COLUMNS)),
    storage="v1",  # as before: what etcd holds does not change
)

# Hub and spoke: v1, the stored version, is the hub; v2 converts to it and from it.
greetings = Converter(hub="v1")


@greetings.to_hub("v2")
def v2_to_v1(greeting: Object) -> None:
    spec = greeting["spec"]
    spec["enabled"] = not spec.pop("suspend", False)


@greetings.from_hub("v2")
def v1_to_v2(greeting: Object) -> None:
    spec = greeting["spec"]
    spec["suspend"] = not spec.pop("enabled", True)


def add_conversion(mgr: Manager, options: WebhookServerOptions) -> WebhookServer:
    """The manager's webhook server, converting Greetings at /convert."""
    server = mgr.webhook_server(options)
    server.add_conversion("/convert", greetings)
    return server


async def install(client: Client, server: WebhookServer, ca: bytes) -> None:
    """Listen first, then install the CRD serving both versions, its conversion calling
    this server and trusting ``ca``."""
    await server.start()
    webhook = {
        "clientConfig": {"url": server.url("/convert"), "caBundle": base64.b64encode(ca).decode()},
        "conversionReviewVersions": ["v1"],
    }
    crd = dataclasses.replace(GREETINGS, conversion={"strategy": "Webhook", "webhook": webhook})
    await client.apply(CRDS, crd.definition(), force=True)


async def main(kubeconfig: str | None, port: int, cert_dir: str) -> None:
    ca, _ = generate_serving_certificates(cert_dir, ["127.0.0.1"])
    client = Client.from_kubeconfig(kubeconfig) if kubeconfig else Client.from_env()
    async with client:
        options = ManagerOptions(
            name="greeting-versions", metrics_bind_address=None, health_probe_bind_address=None
        )
        mgr = Manager(client, options)
        webhooks = WebhookServerOptions(bind_address=f"127.0.0.1:{port}", cert_dir=cert_dir)
        server = add_conversion(mgr, webhooks)
        await install(client, server, ca.cert_pem)
        await mgr.run()  # until SIGTERM / SIGINT


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The kubeloop tutorial's Greeting conversion")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, ~/.kube/config")
    parser.add_argument("--port", type=int, default=9444)
    args = parser.parse_args()
    configure_logging(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="greeting-versions-") as certs:
        asyncio.run(main(args.kubeconfig, args.port, certs))
