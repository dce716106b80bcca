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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeloop._errors import ConfigError
from kubeloop._exec import ExecConfig, ExecTokenSource

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
    #: An exec credential plugin that prints the token (wins over ``token``/``token_file``).
    exec: ExecConfig | None = None
    #: An http(s) proxy for every connection (kubeconfig ``proxy-url``).
    proxy_url: str | None = None
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
    """The bearer token to send: from the exec plugin (run again when its token
    expires), else re-reading ``token_file`` when it is older than ``token_refresh``;
    :meth:`expire` (on a 401) forces a new one either way."""

    def __init__(self, config: ClusterConfig) -> None:
        self._file = config.token_file
        self._refresh = config.token_refresh
        self._value = config.token
        self._read_at = -float("inf")
        self._exec = ExecTokenSource(config.exec) if config.exec is not None else None

    async def get(self) -> str | None:
        if self._exec is not None:
            return await self._exec.get()
        if self._file is not None and time.monotonic() - self._read_at >= self._refresh:
            await self._reread(self._file)
        return self._value

    def expire(self) -> None:
        self._read_at = -float("inf")
        if self._exec is not None:
            self._exec.expire()

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


def kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files kubectl would read: every entry of ``$KUBECONFIG`` (in order, without
    repeats), else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    out: list[Path] = []
    for entry in env.get("KUBECONFIG", "").split(os.pathsep):
        if entry and Path(entry).expanduser() not in out:
            out.append(Path(entry).expanduser())
    return out or [Path.home() / ".kube" / "config"]


def default_kubeconfig_path() -> Path:
    """The first file of :func:`kubeconfig_paths`."""
    return kubeconfig_paths()[0]


def load_kubeconfig(
    path: str | Path | Sequence[str | Path] | None = None, context: str | None = None
) -> ClusterConfig:
    """Read kubeconfig file(s) and resolve one context (default: ``current-context``).

    ``path`` may be one file or several; ``None`` means ``$KUBECONFIG`` (every file in
    it, merged) or ``~/.kube/config``. Files are merged as kubectl merges them: the
    first file to define a cluster, user or context by a name wins, and so does the
    first non-empty ``current-context``; files of a ``$KUBECONFIG`` list that do not
    exist are skipped. Relative paths are relative to the file that holds them.

    Supports ``certificate-authority[-data]``, ``client-certificate[-data]``,
    ``client-key[-data]``, ``token``, ``tokenFile``, ``exec`` credential plugins
    (tokens), ``proxy-url`` (http/https proxies), ``insecure-skip-tls-verify`` and
    ``tls-server-name``. ``auth-provider`` (removed from kubectl in 1.26) is refused.
    """
    if path is None:
        files, explicit = kubeconfig_paths(), False
    elif isinstance(path, str | Path):
        files, explicit = [Path(path).expanduser()], True
    else:
        files, explicit = [Path(p).expanduser() for p in path], True
    docs: list[tuple[Path, Mapping[str, Any]]] = []
    for file in files:
        if not explicit and len(files) > 1 and not file.exists():
            _log.debug("kubeconfig %s in $KUBECONFIG does not exist; skipped", file)
            continue
        docs.append((file, _read_kubeconfig(file)))
    if not docs:
        raise ConfigError(f"none of the kubeconfig files exist: {', '.join(map(str, files))}")
    return _KubeconfigReader(docs).resolve(context)


def _read_kubeconfig(file: Path) -> Mapping[str, Any]:
    try:
        doc = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"kubeconfig {file} does not exist") from None
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read kubeconfig {file}: {err}") from err
    if doc is None:
        return {}  # an empty file merges as nothing, as in kubectl
    if not isinstance(doc, Mapping):
        raise ConfigError(f"kubeconfig {file} is not a mapping")
    return doc


@dataclass(frozen=True)
class _Entry:
    """A named cluster/user/context and the file it came from (relative paths)."""

    body: Mapping[str, Any]
    file: Path


class _KubeconfigReader:
    def __init__(self, docs: Sequence[tuple[Path, Mapping[str, Any]]]) -> None:
        self.docs = docs
        self.label = ", ".join(str(f) for f, _ in docs)

    def fail(self, message: str) -> ConfigError:
        return ConfigError(f"kubeconfig {self.label}: {message}")

    def named(self, section: str, name: str) -> _Entry:
        known: list[str] = []
        for file, doc in self.docs:
            for entry in doc.get(section) or []:
                if not isinstance(entry, Mapping):
                    continue
                if entry.get("name") == name:
                    body = entry.get(section[:-1])  # clusters -> cluster, users -> user
                    return _Entry(body if isinstance(body, Mapping) else {}, file)
                known.append(str(entry.get("name")))
        raise self.fail(f"no {section[:-1]} named {name!r} (known: {', '.join(known) or 'none'})")

    def current_context(self) -> str | None:
        for _, doc in self.docs:
            if doc.get("current-context"):
                return str(doc["current-context"])
        return None

    def resolve(self, context: str | None) -> ClusterConfig:
        name = context or self.current_context()
        if not name:
            raise self.fail("no current-context set; pass a context name")
        ctx = self.named("contexts", str(name)).body
        if not ctx.get("cluster"):
            raise self.fail(f"context {name!r} names no cluster")
        cluster_entry = self.named("clusters", str(ctx["cluster"]))
        cluster = cluster_entry.body
        user_entry = self.named("users", str(ctx["user"])) if ctx.get("user") else None
        user = user_entry.body if user_entry else {}
        server = cluster.get("server")
        if not server:
            raise self.fail(f"cluster {ctx['cluster']!r} has no server")
        if user.get("auth-provider"):
            raise self.fail(
                f"user {ctx['user']!r} uses auth-provider, which kubectl removed in 1.26; "
                "use the provider's exec plugin instead"
            )
        if user.get("username") or user.get("password"):
            raise self.fail("basic auth (username/password) is not supported by Kubernetes")
        exec_cfg = None
        if user.get("exec"):
            stanza = user["exec"]
            if not isinstance(stanza, Mapping):
                raise self.fail(f"user {ctx['user']!r}: exec must be a mapping")
            exec_cfg = ExecConfig.from_kubeconfig(
                stanza,
                cluster=_cluster_info(cluster),
                where=f"kubeconfig {self.label}: user {ctx['user']!r}",
            )
        proxy_url = cluster.get("proxy-url") or None
        if proxy_url and not str(proxy_url).startswith(("http://", "https://")):
            raise self.fail(
                f"cluster {ctx['cluster']!r}: proxy-url {proxy_url!r} is not an http(s) proxy "
                "(socks5 is not supported)"
            )
        token_file = user.get("tokenFile")
        cfile = cluster_entry.file
        ufile = user_entry.file if user_entry else cfile
        return ClusterConfig(
            server=str(server),
            ca_data=self.blob(cluster, "certificate-authority", cfile),
            client_cert_data=self.blob(user, "client-certificate", ufile),
            client_key_data=self.blob(user, "client-key", ufile),
            token=str(user["token"]) if user.get("token") else None,
            token_file=_relative(str(token_file), ufile) if token_file else None,
            exec=exec_cfg,
            proxy_url=str(proxy_url) if proxy_url else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
            tls_server_name=cluster.get("tls-server-name") or None,
            namespace=str(ctx.get("namespace") or "default"),
        )

    def blob(self, section: Mapping[str, Any], key: str, origin: Path) -> bytes | None:
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
        file = _relative(str(path), origin)
        try:
            return file.read_bytes()
        except OSError as err:
            raise self.fail(f"cannot read {key} {file}: {err}") from err


def _relative(path: str, origin: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else origin.parent / p


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The ``spec.cluster`` an exec plugin gets with ``provideClusterInfo``."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for src, dst in (
        ("certificate-authority-data", "certificate-authority-data"),
        ("insecure-skip-tls-verify", "insecure-skip-tls-verify"),
        ("tls-server-name", "tls-server-name"),
        ("proxy-url", "proxy-url"),
    ):
        if cluster.get(src):
            info[dst] = cluster[src]
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


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
