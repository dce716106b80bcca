"""Where the API server is and how to authenticate: kubeconfig and in-cluster loading.

Loading happens once at start-up, so it reads files synchronously; only the
token refresh (:class:`BearerToken`), which runs while requests are in flight,
reads off the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeloop._errors import ConfigError

_log = logging.getLogger("kubeloop.config")

#: Where the kubelet mounts the pod's service-account token, CA and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

#: Projected service-account tokens rotate (hourly by default, valid for longer);
#: re-reading every minute, like client-go, always picks up the new one in time.
TOKEN_REFRESH_SECONDS = 60.0


@dataclass(frozen=True)
class ClusterConfig:
    """Connection settings for one API server, independent of where they came from.

    Secrets are kept in memory as bytes (``*_data``); only ``token_file`` stays a
    path because its content rotates. ``repr`` never shows secrets.
    """

    server: str
    ca_data: bytes | None = field(default=None, repr=False)
    client_cert_data: bytes | None = field(default=None, repr=False)
    client_key_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    #: Re-read every ``token_refresh`` seconds; wins over ``token`` (as in client-go).
    token_file: Path | None = None
    token_refresh: float = TOKEN_REFRESH_SECONDS
    #: Skip server certificate verification (kubeconfig ``insecure-skip-tls-verify``).
    insecure: bool = False
    #: Name to verify the server certificate against, when it differs from the URL host.
    tls_server_name: str | None = None
    #: The context's (or the pod's) namespace, for callers that want a default.
    namespace: str = "default"

    def __post_init__(self) -> None:
        if not self.server.startswith(("https://", "http://")):
            raise ConfigError(f"server {self.server!r} is not an http(s) URL")
        if (self.client_cert_data is None) != (self.client_key_data is None):
            raise ConfigError("a client certificate needs both the certificate and the key")


class BearerToken:
    """The bearer token to send, re-reading ``token_file`` when it is older than
    ``token_refresh`` (or after :meth:`expire`, e.g. on a 401)."""

    def __init__(self, config: ClusterConfig) -> None:
        self._file = config.token_file
        self._refresh = config.token_refresh
        self._value = config.token
        self._read_at = -float("inf")

    async def get(self) -> str | None:
        if self._file is not None and time.monotonic() - self._read_at >= self._refresh:
            await self._reread(self._file)
        return self._value

    def expire(self) -> None:
        self._read_at = -float("inf")

    async def _reread(self, path: Path) -> None:
        self._read_at = time.monotonic()  # first, so concurrent callers don't pile up
        try:
            value = (await asyncio.to_thread(path.read_text)).strip()
        except OSError as err:
            if self._value is None:
                raise ConfigError(f"cannot read token file {path}: {err}") from err
            # keep the last good token: a rotation in progress must not fail requests
            _log.warning("cannot re-read token file %s, keeping the previous token: %s", path, err)
            return
        if value:
            self._value = value


# -- kubeconfig ------------------------------------------------------------------------


def default_kubeconfig_path() -> Path:
    """``$KUBECONFIG``'s first entry, else ``~/.kube/config`` (lists are not merged)."""
    for entry in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry:
            return Path(entry).expanduser()
    return Path.home() / ".kube" / "config"


def load_kubeconfig(path: str | Path | None = None, context: str | None = None) -> ClusterConfig:
    """Read a kubeconfig file and resolve one context (default: ``current-context``).

    Supports ``certificate-authority[-data]``, ``client-certificate[-data]``,
    ``client-key[-data]``, ``token``, ``tokenFile``, ``insecure-skip-tls-verify`` and
    ``tls-server-name``; relative file paths are relative to the kubeconfig's
    directory. Exec and auth-provider plugins are not supported.
    """
    file = Path(path).expanduser() if path is not None else default_kubeconfig_path()
    try:
        doc = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"kubeconfig {file} does not exist") from None
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read kubeconfig {file}: {err}") from err
    if not isinstance(doc, Mapping):
        raise ConfigError(f"kubeconfig {file} is not a mapping")
    return _KubeconfigReader(file, doc).resolve(context)


class _KubeconfigReader:
    def __init__(self, file: Path, doc: Mapping[str, Any]) -> None:
        self.file = file
        self.doc = doc

    def fail(self, message: str) -> ConfigError:
        return ConfigError(f"kubeconfig {self.file}: {message}")

    def named(self, section: str, name: str) -> Mapping[str, Any]:
        entries = self.doc.get(section) or []
        for entry in entries:
            if isinstance(entry, Mapping) and entry.get("name") == name:
                body = entry.get(section[:-1])  # clusters -> cluster, users -> user
                return body if isinstance(body, Mapping) else {}
        known = ", ".join(str(e.get("name")) for e in entries if isinstance(e, Mapping))
        raise self.fail(f"no {section[:-1]} named {name!r} (known: {known or 'none'})")

    def resolve(self, context: str | None) -> ClusterConfig:
        name = context or self.doc.get("current-context")
        if not name:
            raise self.fail("no current-context set; pass a context name")
        ctx = self.named("contexts", str(name))
        if not ctx.get("cluster"):
            raise self.fail(f"context {name!r} names no cluster")
        cluster = self.named("clusters", str(ctx["cluster"]))
        user = self.named("users", str(ctx["user"])) if ctx.get("user") else {}
        server = cluster.get("server")
        if not server:
            raise self.fail(f"cluster {ctx['cluster']!r} has no server")
        for unsupported in ("exec", "auth-provider"):
            if user.get(unsupported):
                raise self.fail(f"user {ctx['user']!r} uses {unsupported}, which is not supported")
        if user.get("username") or user.get("password"):
            raise self.fail("basic auth (username/password) is not supported by Kubernetes")
        token_file = user.get("tokenFile")
        return ClusterConfig(
            server=str(server),
            ca_data=self.blob(cluster, "certificate-authority"),
            client_cert_data=self.blob(user, "client-certificate"),
            client_key_data=self.blob(user, "client-key"),
            token=str(user["token"]) if user.get("token") else None,
            token_file=self.relative(str(token_file)) if token_file else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
            tls_server_name=cluster.get("tls-server-name") or None,
            namespace=str(ctx.get("namespace") or "default"),
        )

    def relative(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.file.parent / p

    def blob(self, section: Mapping[str, Any], key: str) -> bytes | None:
        """``key-data`` (base64) if set, else the content of the file ``key``."""
        data = section.get(f"{key}-data")
        if data:
            try:
                return base64.b64decode(str(data), validate=True)
            except (binascii.Error, ValueError) as err:
                raise self.fail(f"{key}-data is not valid base64: {err}") from err
        path = section.get(key)
        if not path:
            return None
        file = self.relative(str(path))
        try:
            return file.read_bytes()
        except OSError as err:
            raise self.fail(f"cannot read {key} {file}: {err}") from err


# -- in-cluster ------------------------------------------------------------------------


def load_incluster(
    *, root: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> ClusterConfig:
    """The pod's own identity: the service-account token (re-read every minute),
    the cluster CA and ``KUBERNETES_SERVICE_HOST``/``PORT``."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset"
        )
    token_file = root / "token"
    if not token_file.is_file():
        raise ConfigError(f"in-cluster service-account token {token_file} does not exist")
    try:
        ca = (root / "ca.crt").read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read in-cluster CA {root / 'ca.crt'}: {err}") from err
    try:
        namespace = (root / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service IP
    return ClusterConfig(
        server=f"https://{host}:{port}",
        ca_data=ca,
        token_file=token_file,
        namespace=namespace,
    )


def load_config() -> ClusterConfig:
    """The configuration a process should use, in controller-runtime's order:
    ``$KUBECONFIG``, then the in-cluster service account, then ``~/.kube/config``."""
    if os.environ.get("KUBECONFIG"):
        return load_kubeconfig()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return load_incluster()
    home = Path.home() / ".kube" / "config"
    if home.is_file():
        return load_kubeconfig(home)
    raise ConfigError(
        "no Kubernetes configuration: $KUBECONFIG is unset, not running in a cluster, "
        f"and {home} does not exist"
    )
