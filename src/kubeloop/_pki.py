"""Certificates generated in-process: a small CA and the certificates it signs.

Used by the loopback control plane (:mod:`kubeloop.envtest`: one CA signs the
apiserver's serving certificate and the client certificates, CN the user name, O the
groups; a separate key pair signs service-account tokens) and by webhook servers in
development and tests (:func:`generate_serving_certificates` writes cert-manager's file
layout, so the production path, files mounted from a Secret, is the one exercised).
ECDSA P-256 keeps generation in the milliseconds.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# cryptography comes with the testing extra, not with kubeloop: it is imported where it is
# used, and CertificateAuthority (which every certificate starts from) names the extra when
# it is missing.
if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def serial(self) -> int:
        """The certificate's serial number (tells two certificates for one name apart)."""
        from cryptography import x509

        return x509.load_pem_x509_certificate(self.cert_pem).serial_number


def _key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _san(host: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


class CertificateAuthority:
    """A tiny self-signed CA for one control plane or one development webhook server.

    Args:
        name: the CA's common name.
        validity: how long it and the certificates it issues stay valid (default 7 days:
            long enough for any test run, short enough not to be mistaken for a real CA).
    """

    def __init__(
        self, name: str = "kubeloop-envtest", *, validity: dt.timedelta = _VALIDITY
    ) -> None:
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes
        except ImportError:
            raise ImportError(
                "kubeloop makes certificates with the cryptography package: "
                "pip install 'kubeloop[testing]' (in production, serve the certificate "
                "cert-manager mounts instead)"
            ) from None

        self._validity = validity
        self._key = _key()
        now = dt.datetime.now(dt.UTC)
        self._subject = _name(name, ("kubeloop",))
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._subject)
            .issuer_name(self._subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        key = _key()
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + self._validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, host: str = "127.0.0.1", *more_hosts: str) -> KeyPair:
        """A server certificate valid for ``localhost`` and every host given (IP
        addresses or DNS names, e.g. ``webhook.ns.svc``); the first names its CN."""
        from cryptography.x509.oid import ExtendedKeyUsageOID

        hosts = dict.fromkeys(("localhost", host, *more_hosts))  # ordered, no duplicates
        sans = [_san(h) for h in hosts]
        cn = host if not _is_ip(host) else "localhost"
        return self._issue(_name(cn), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: the apiserver reads CN as the user and O as groups."""
        from cryptography.x509.oid import ExtendedKeyUsageOID

        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def signing_key_pair() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for service-account token signing."""
    from cryptography.hazmat.primitives import serialization

    key = _key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def write(path: Path, data: bytes, *, private: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (a reader never sees half a PEM file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600 if private else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def generate_serving_certificates(
    cert_dir: str | os.PathLike[str],
    hosts: Sequence[str] = ("127.0.0.1",),
    *,
    ca: CertificateAuthority | None = None,
) -> tuple[CertificateAuthority, KeyPair]:
    """Development and test certificates in cert-manager's layout, for a webhook server.

    Writes ``tls.crt``, ``tls.key`` (a serving certificate for ``localhost`` and each of
    ``hosts``) and ``ca.crt`` into ``cert_dir`` (created if missing), the files a
    cert-manager Certificate's Secret holds, so :class:`~kubeloop.WebhookServer` reads
    them the same way in development and in production. Called again on the same
    directory it rotates them: the server's certificate watcher serves the new pair
    without a restart. Returns the CA (whose ``cert_pem`` is the ``caBundle`` to inject)
    and the serving pair. Pass ``ca`` to issue from an existing CA instead of a new one.
    Never for production: the CA's key lives only in this process.
    """
    if not hosts:
        raise ValueError("generate_serving_certificates: hosts must name at least one host")
    directory = Path(cert_dir)
    directory.mkdir(parents=True, exist_ok=True)
    ca = ca or CertificateAuthority("kubeloop-webhook-dev")
    pair = ca.serving(*hosts)
    write(directory / "ca.crt", ca.cert_pem)
    # key first: a watcher that reads between the two writes sees a mismatched pair,
    # refuses it and keeps serving the old one until its next look
    write(directory / "tls.key", pair.key_pem, private=True)
    write(directory / "tls.crt", pair.cert_pem)
    return ca, pair
