"""Admission and conversion webhooks, and the certificates they are served with.

Everything public here is re-exported from :mod:`kubeloop`; see ``docs/webhooks.md``.
"""

from kubeloop._pki import CertificateAuthority, KeyPair, generate_serving_certificates
from kubeloop.webhook._admission import (
    Admission,
    AdmissionRequest,
    Mutator,
    UserInfo,
    Validator,
)
from kubeloop.webhook._cabundle import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    inject_ca_bundle,
)
from kubeloop.webhook._certwatcher import CertificateError, CertWatcher
from kubeloop.webhook._conversion import ConversionError, Converter, ConvertFunc
from kubeloop.webhook._server import WebhookServer, WebhookServerOptions

__all__ = [
    "MUTATING_WEBHOOK_CONFIGURATIONS",
    "VALIDATING_WEBHOOK_CONFIGURATIONS",
    "Admission",
    "AdmissionRequest",
    "CertWatcher",
    "CertificateAuthority",
    "CertificateError",
    "ConversionError",
    "ConvertFunc",
    "Converter",
    "KeyPair",
    "Mutator",
    "UserInfo",
    "Validator",
    "WebhookServer",
    "WebhookServerOptions",
    "generate_serving_certificates",
    "inject_ca_bundle",
]
