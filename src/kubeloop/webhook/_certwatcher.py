"""Serve a certificate from files and follow them when they change (controller-runtime's
certwatcher).

cert-manager renews a Certificate by rewriting its Secret; the kubelet then swaps the
mounted files (an atomic symlink flip of ``..data``), which keeps a file's mtime or
inode from telling reliably that anything changed. So the watcher compares the files'
content every ``interval`` seconds. A new pair is loaded into the server's one
``SSLContext``: OpenSSL copies a context's certificate into each connection when the
connection is created, so new handshakes present the new certificate while open
connections finish with the old one, and nothing restarts. A pair that does not load
(half-written, key not matching) is skipped until the next look; the old pair stays.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import ssl
import tempfile
from pathlib import Path

from kubeloop._errors import KubeloopError

log = logging.getLogger("kubeloop.webhook")


class CertificateError(KubeloopError):
    """The serving certificate or key is missing or unusable."""


def _read(cert_file: Path, key_file: Path) -> tuple[bytes, bytes]:
    try:
        return cert_file.read_bytes(), key_file.read_bytes()
    except FileNotFoundError as err:
        raise CertificateError(
            f"no serving certificate at {err.filename}: mount the cert-manager Secret there "
            "(tls.crt, tls.key) or create development certificates with "
            "kubeloop.generate_serving_certificates(cert_dir)"
        ) from None
    except OSError as err:
        raise CertificateError(f"cannot read {err.filename}: {err.strerror}") from None


class CertWatcher:
    """Keeps ``ssl_context`` serving the pair found in ``cert_file`` / ``key_file``.

    Args:
        cert_file: PEM certificate chain (cert-manager's ``tls.crt``).
        key_file: its PEM private key (``tls.key``).
        interval: seconds between looks at the files (default 10, as controller-runtime's
            polling fallback).
    """

    def __init__(
        self,
        cert_file: str | os.PathLike[str],
        key_file: str | os.PathLike[str],
        *,
        interval: float = 10.0,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"CertWatcher: interval must be positive, got {interval}")
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._digest = b""
        #: how many times a new pair was loaded after the first (for logs and tests)
        self.reloads = 0

    def load(self) -> bool:
        """Load the files if they changed since the last load; True if they were loaded.

        Raises :class:`CertificateError` if they cannot be read or do not form a pair.
        """
        cert, key = _read(self.cert_file, self.key_file)
        return self._use(cert, key)

    def _use(self, cert: bytes, key: bytes) -> bool:
        digest = hashlib.sha256(cert + b"\0" + key).digest()
        if digest == self._digest:
            return False
        # ssl loads only from files: load a private snapshot of the bytes just hashed,
        # so a rotation landing between the read and the load cannot mix two pairs
        tmp = Path(tempfile.mkdtemp(prefix="kubeloop-cert-"))
        try:
            (tmp / "tls.crt").write_bytes(cert)
            key_path = tmp / "tls.key"
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            trial = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                trial.load_cert_chain(tmp / "tls.crt", key_path)
            except (ssl.SSLError, ValueError) as err:
                raise CertificateError(
                    f"{self.cert_file} and {self.key_file} are not a usable certificate and "
                    f"key: {err}"
                ) from None
            self.ssl_context.load_cert_chain(tmp / "tls.crt", key_path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        first = not self._digest
        self._digest = digest
        if not first:
            self.reloads += 1
            log.info(
                "serving certificate reloaded from %s",
                self.cert_file,
                extra={"cert_file": str(self.cert_file), "reloads": self.reloads},
            )
        return True

    async def run(self) -> None:
        """Look at the files every ``interval`` seconds until cancelled."""
        last_warning = ""
        while True:
            await asyncio.sleep(self.interval)
            try:
                # read in a thread (a slow volume must not stall the loop), load on the
                # loop: the context is not changed while the loop makes a connection with it
                cert, key = await asyncio.to_thread(_read, self.cert_file, self.key_file)
                self._use(cert, key)
                last_warning = ""
            except CertificateError as err:
                # mid-rotation or a broken Secret: keep serving the last good pair, and say
                # so once per problem rather than every interval
                if str(err) != last_warning:
                    log.warning("serving certificate not reloaded: %s", err)
                last_warning = str(err)
