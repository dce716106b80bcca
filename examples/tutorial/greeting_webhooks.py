"""The tutorial's webhooks: the apiserver asks this process about every Greeting it is given.

    python greeting_webhooks.py --namespace default   # $KUBECONFIG, or --kubeconfig K

A mutating webhook tidies the message (the apiserver stores the tidy one); a validating
webhook refuses a message another Greeting in the namespace already has, a rule about
other objects that a CRD's schema and CEL cannot state. It runs in development mode:
its own CA and serving certificate, webhook configurations that call
https://127.0.0.1:<port>. In a cluster cert-manager issues the certificate and the
configurations name a Service; the handlers do not change.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import tempfile

from kubeloop import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Admission,
    AdmissionRequest,
    Cause,
    Client,
    Manager,
    ManagerOptions,
    Object,
    Resource,
    Validator,
    WebhookServer,
    WebhookServerOptions,
    configure_logging,
    generate_serving_certificates,
)

GREETINGS = Resource("tutorial.kubeloop.dev", "v1", "greetings", "Greeting")
NAME = "greeting-webhooks"  # both configurations' name


def tidy_message(req: AdmissionRequest, greeting: Object) -> None:
    """Mutating: one space between words, none around them. Change the copy; kubeloop
    sends the apiserver the JSON patch."""
    spec = greeting.get("spec") or {}
    if isinstance(spec.get("message"), str):
        spec["message"] = " ".join(spec["message"].split())


def unique_message(client: Client) -> Validator:
    """Validating: no two Greetings in a namespace say the same thing."""

    async def validate(req: AdmissionRequest) -> Admission | None:
        assert req.object is not None  # CREATE and UPDATE only (see the configuration)
        message = req.object["spec"]["message"]
        if req.old_object is not None and req.old_object["spec"]["message"] == message:
            return None  # an update that keeps the message: nothing new to check
        # Read live, not from a cache: a Greeting created a moment ago must count.
        others = await client.list(GREETINGS, req.namespace)
        for other in others["items"]:
            if other["metadata"]["name"] != req.name and other["spec"]["message"] == message:
                taken = f"Greeting {other['metadata']['name']} already says {message!r}"
                return Admission.deny(
                    f"spec.message: {taken}",
                    Cause("FieldValueDuplicate", taken, "spec.message"),
                )
        return None

    return validate


def configuration(kind: Resource, path: str, url: str, ca: bytes, namespace: str) -> Object:
    """A webhook configuration sending the apiserver's Greeting writes in ``namespace`` to
    ``url + path``, trusting ``ca``; written whole, in one request, so the apiserver never
    calls with half of it."""
    webhook = {
        "name": f"{path.strip('/')}.tutorial.kubeloop.dev",
        "clientConfig": {"url": url + path, "caBundle": base64.b64encode(ca).decode()},
        "rules": [
            {
                "apiGroups": ["tutorial.kubeloop.dev"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["greetings"],
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    return {"metadata": {"name": NAME}, "webhooks": [webhook]}


def add_webhooks(mgr: Manager, options: WebhookServerOptions) -> WebhookServer:
    """The manager's webhook server with both handlers at their paths."""
    server = mgr.webhook_server(options)
    server.add_mutating("/mutate", tidy_message)
    server.add_validating("/validate", unique_message(mgr.client))
    return server


async def register(client: Client, server: WebhookServer, ca: bytes, namespace: str) -> None:
    """Listen first, then tell the apiserver where to call (the validating webhook last)."""
    await server.start()
    for kind, path in (
        (MUTATING_WEBHOOK_CONFIGURATIONS, "/mutate"),
        (VALIDATING_WEBHOOK_CONFIGURATIONS, "/validate"),
    ):
        await client.apply(kind, configuration(kind, path, server.url(), ca, namespace), force=True)


async def main(kubeconfig: str | None, namespace: str, port: int, cert_dir: str) -> None:
    # development certificates: a CA, and a serving certificate for 127.0.0.1 signed by it
    ca, _ = generate_serving_certificates(cert_dir, ["127.0.0.1"])
    client = Client.from_kubeconfig(kubeconfig) if kubeconfig else Client.from_env()
    async with client:
        options = ManagerOptions(
            name="greeting-webhooks", metrics_bind_address=None, health_probe_bind_address=None
        )
        mgr = Manager(client, options)
        webhooks = WebhookServerOptions(bind_address=f"127.0.0.1:{port}", cert_dir=cert_dir)
        server = add_webhooks(mgr, webhooks)
        await register(client, server, ca.cert_pem, namespace)
        await mgr.run()  # until SIGTERM / SIGINT


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The kubeloop tutorial's Greeting webhooks")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, ~/.kube/config")
    parser.add_argument("--namespace", required=True, help="the namespace whose Greetings to check")
    parser.add_argument("--port", type=int, default=9443)
    args = parser.parse_args()
    configure_logging(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="greeting-webhooks-") as certs:
        asyncio.run(main(args.kubeconfig, args.namespace, args.port, certs))
