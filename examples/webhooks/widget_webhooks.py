"""The webhooks example: a validating, a mutating and a conversion webhook for Widgets.

    python examples/webhooks/widget_webhooks.py --kubeconfig K --namespace NS --port 9443

It runs in development mode: it generates its own CA and serving certificate, points the
webhook configurations and the CRD's conversion stanza at https://127.0.0.1:<port>, and
injects the CA into them. In a cluster, cert-manager issues the certificate and injects
the CA instead (see docs/webhooks.md); the handlers do not change.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile

from kubeloop import (
    CRDS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Admission,
    AdmissionRequest,
    Cause,
    Client,
    Converter,
    Manager,
    ManagerOptions,
    Object,
    Resource,
    WebhookServerOptions,
    configure_logging,
    generate_serving_certificates,
    inject_ca_bundle,
)

GROUP = "examples.kubeloop.dev"
WIDGETS = Resource(GROUP, "v1beta1", "widgets", "Widget")
MAX_REPLICAS = 10


# --8<-- [start:validate]
async def validate_widget(req: AdmissionRequest) -> Admission | None:
    """Refuse more than MAX_REPLICAS, naming the field; warn about a tier change."""
    assert req.object is not None  # CREATE and UPDATE only (see the configuration)
    spec = req.object.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if replicas > MAX_REPLICAS:
        return Admission.deny(
            f"spec.replicas: {replicas} is more than {MAX_REPLICAS}",
            Cause("FieldValueInvalid", f"must be at most {MAX_REPLICAS}", "spec.replicas"),
        )
    if req.operation == "UPDATE" and req.old_object is not None:
        old_tier = (req.old_object.get("spec") or {}).get("tier")
        if old_tier != spec.get("tier"):
            return Admission.allow(f"tier changed from {old_tier} by {req.user.username}")
    return None


# --8<-- [end:validate]


# --8<-- [start:mutate]
def default_widget(req: AdmissionRequest, widget: Object) -> None:
    """Default the tier and label the widget with it: change the copy, kubeloop
    sends the JSON patch."""
    spec = widget.setdefault("spec", {})
    spec.setdefault("tier", "standard")
    widget["metadata"].setdefault("labels", {})[f"{GROUP}/tier"] = spec["tier"]


# --8<-- [end:mutate]


# --8<-- [start:convert]
TIER = f"{GROUP}/v1beta1-tier"  # v1alpha1 has no tier: it travels in an annotation
widgets = Converter(hub="v1beta1")


@widgets.to_hub("v1alpha1")
def alpha_to_beta(widget: Object) -> None:
    spec = widget.setdefault("spec", {})
    if "size" in spec:
        spec["replicas"] = spec.pop("size")
    annotations = widget["metadata"].get("annotations") or {}
    if TIER in annotations:
        spec["tier"] = annotations.pop(TIER)


@widgets.from_hub("v1alpha1")
def beta_to_alpha(widget: Object) -> None:
    spec = widget.setdefault("spec", {})
    if "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    if "tier" in spec:
        widget["metadata"].setdefault("annotations", {})[TIER] = spec.pop("tier")


# --8<-- [end:convert]


def configuration(kind: Resource, path: str, url: str, namespace: str) -> Object:
    """A webhook configuration for Widgets in ``namespace``, called at ``url + path``."""
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": f"widgets-{path.strip('/')}"},
        "webhooks": [
            {
                "name": f"{path.strip('/')}.{GROUP}",
                "clientConfig": {"url": url + path},
                "rules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["v1beta1"],  # other versions are converted first
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["widgets"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


# --8<-- [start:main]
async def main(kubeconfig: str | None, namespace: str, port: int, cert_dir: str) -> None:
    # development certificates: a CA and a serving certificate for 127.0.0.1
    ca, _ = generate_serving_certificates(cert_dir, ["127.0.0.1"])
    async with Client.from_kubeconfig(kubeconfig) as client:
        mgr = Manager(
            client,
            ManagerOptions(name="widgets", metrics_bind_address="0", health_probe_bind_address="0"),
        )
        server = mgr.webhook_server(
            WebhookServerOptions(bind_address=f"127.0.0.1:{port}", cert_dir=cert_dir)
        )
        server.add_validating("/validate", validate_widget)
        server.add_mutating("/mutate", default_widget)
        server.add_conversion("/convert", widgets)

        # point the apiserver at this process (in a cluster: the Service, in config/)
        url = f"https://127.0.0.1:{port}"
        for kind, path in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, "/validate"),
            (MUTATING_WEBHOOK_CONFIGURATIONS, "/mutate"),
        ):
            await client.apply(kind, configuration(kind, path, url, namespace), force=True)
        webhook = {"clientConfig": {"url": url + "/convert"}, "conversionReviewVersions": ["v1"]}
        conversion = {"strategy": "Webhook", "webhook": webhook}
        await client.patch(CRDS, f"widgets.{GROUP}", {"spec": {"conversion": conversion}})
        # and make it trust our CA (in a cluster: cert-manager's CA injector)
        await inject_ca_bundle(
            client,
            ca.cert_pem,
            validating=["widgets-validate"],
            mutating=["widgets-mutate"],
            crds=[f"widgets.{GROUP}"],
        )
        await mgr.run()


# --8<-- [end:main]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--port", type=int, default=9443)
    parser.add_argument("--cert-dir", default=None)
    args = parser.parse_args()
    configure_logging(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="widget-webhooks-") as tmp:
        asyncio.run(main(args.kubeconfig, args.namespace, args.port, args.cert_dir or tmp))
