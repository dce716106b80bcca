"""Put a CA bundle where the apiserver reads it before calling a webhook.

The apiserver verifies a webhook's certificate against ``clientConfig.caBundle`` of the
webhook configuration (admission) or of the CRD's ``spec.conversion.webhook`` (conversion).
In production cert-manager's CA injector fills these in (the
``cert-manager.io/inject-ca-from`` annotation); in development and tests kubeloop does,
with the CA of :func:`~kubeloop.generate_serving_certificates`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from kubeloop._client import Client
from kubeloop._errors import KubeloopError
from kubeloop._resource import CRDS, Object, Resource
from kubeloop._retry import retry_on_conflict

VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)


async def _inject(client: Client, res: Resource, name: str, bundle: str) -> None:
    async def once() -> Object | None:
        obj = await client.get(res, name)
        if res is CRDS:
            conversion = obj["spec"].get("conversion") or {}
            if conversion.get("strategy") != "Webhook":
                raise KubeloopError(
                    f"CustomResourceDefinition {name}: spec.conversion.strategy is "
                    f"{conversion.get('strategy', 'None')!r}, not 'Webhook': no caBundle to set"
                )
            configs = [conversion.setdefault("webhook", {}).setdefault("clientConfig", {})]
        else:
            configs = [w.setdefault("clientConfig", {}) for w in obj.get("webhooks") or []]
            if not configs:
                raise KubeloopError(f"{res.kind} {name} has no webhooks to set a caBundle on")
        if all(c.get("caBundle") == bundle for c in configs):
            return None  # already current: no write, no new resourceVersion
        for c in configs:
            c["caBundle"] = bundle
        return await client.update(res, obj)

    await retry_on_conflict(once)


async def inject_ca_bundle(
    client: Client,
    ca_pem: bytes,
    *,
    validating: Iterable[str] = (),
    mutating: Iterable[str] = (),
    crds: Iterable[str] = (),
) -> None:
    """Set ``caBundle`` to ``ca_pem`` in every webhook of the named
    ValidatingWebhookConfigurations and MutatingWebhookConfigurations, and in the
    conversion webhook of the named CRDs (which must use ``strategy: Webhook``).

    Writes only what differs, so calling it on every start is cheap. Call it again
    after a rotation to a new CA (keep the old CA in ``ca_pem`` too until the new
    certificate is served, so no call fails in between).
    """
    bundle = base64.b64encode(ca_pem).decode()
    for res, names in (
        (VALIDATING_WEBHOOK_CONFIGURATIONS, validating),
        (MUTATING_WEBHOOK_CONFIGURATIONS, mutating),
        (CRDS, crds),
    ):
        for name in names:
            await _inject(client, res, name, bundle)
