"""Exec credential plugins: the ``users[].user.exec`` stanza of a kubeconfig.

EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``), AKS (``kubelogin``) and
OIDC logins all hand out short-lived bearer tokens through a program that prints a
``client.authentication.k8s.io`` ``ExecCredential`` on stdout. The plugin is run lazily,
in a subprocess (never blocking the event loop), its token is cached until its
``expirationTimestamp`` and dropped on a 401, so the next request runs it again:
client-go's exec authenticator behaves the same way.

Plugins that return client certificates instead of a token are refused with a clear
error: rotating a certificate means rebuilding the TLS context of live connections,
which the transport does not do.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeloop._errors import ConfigError

#: The ExecCredential versions kubeloop speaks (v1beta1 is what older plugins print).
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: A plugin that hangs (waiting for a browser login, say) must not hang every request.
EXEC_TIMEOUT_SECONDS = 60.0
#: Refresh this long before the expiry the plugin gave, so no request goes out with a
#: token that expires in flight.
EXPIRY_MARGIN_SECONDS = 10.0


@dataclass(frozen=True)
class ExecConfig:
    """One ``exec`` stanza, decoded once at load time."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = API_VERSIONS[0]
    install_hint: str | None = None
    provide_cluster_info: bool = False
    interactive_mode: str = "IfAvailable"
    #: Cluster info passed to the plugin when ``provide_cluster_info`` is set.
    cluster: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_kubeconfig(
        cls, stanza: Mapping[str, Any], *, cluster: Mapping[str, Any], where: str
    ) -> ExecConfig:
        command = stanza.get("command")
        if not command or not isinstance(command, str):
            raise ConfigError(f"{where}: exec.command is required")
        api_version = str(stanza.get("apiVersion") or "")
        if api_version not in API_VERSIONS:
            raise ConfigError(
                f"{where}: exec.apiVersion {api_version!r} is not supported "
                f"(supported: {', '.join(API_VERSIONS)})"
            )
        args = stanza.get("args") or []
        if not isinstance(args, Sequence) or isinstance(args, str):
            raise ConfigError(f"{where}: exec.args must be a list")
        env_items: list[tuple[str, str]] = []
        for item in stanza.get("env") or []:
            if not isinstance(item, Mapping) or "name" not in item:
                raise ConfigError(f"{where}: exec.env entries need name and value")
            env_items.append((str(item["name"]), str(item.get("value", ""))))
        mode = str(stanza.get("interactiveMode") or "IfAvailable")
        if mode not in ("Never", "IfAvailable", "Always"):
            raise ConfigError(
                f"{where}: exec.interactiveMode {mode!r} must be Never, IfAvailable or Always"
            )
        if mode == "Always":
            # an operator has no terminal: a plugin that insists on one can never work
            raise ConfigError(f"{where}: exec.interactiveMode Always needs a terminal")
        return cls(
            command=command,
            args=tuple(str(a) for a in args),
            env=tuple(env_items),
            api_version=api_version,
            install_hint=str(stanza["installHint"]) if stanza.get("installHint") else None,
            provide_cluster_info=bool(stanza.get("provideClusterInfo", False)),
            interactive_mode=mode,
            cluster=dict(cluster),
        )


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin printed: a token and when it stops being valid (None: never)."""

    token: str
    expires_at: float | None  # time.time() seconds

    def fresh(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at - EXPIRY_MARGIN_SECONDS


def parse_exec_output(raw: bytes, *, api_version: str, command: str) -> ExecCredential:
    """Decode a plugin's stdout, naming what is wrong with it."""
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"exec plugin {command!r} printed no JSON: {err}") from err
    if not isinstance(doc, Mapping) or doc.get("kind") != "ExecCredential":
        raise ConfigError(f"exec plugin {command!r} did not print an ExecCredential")
    if doc.get("apiVersion") != api_version:
        raise ConfigError(
            f"exec plugin {command!r} answered apiVersion {doc.get('apiVersion')!r}, "
            f"asked for {api_version!r}"
        )
    status = doc.get("status")
    if not isinstance(status, Mapping):
        raise ConfigError(f"exec plugin {command!r} printed no status")
    if status.get("clientCertificateData") or status.get("clientKeyData"):
        raise ConfigError(
            f"exec plugin {command!r} returned a client certificate; "
            "only token credentials are supported"
        )
    token = status.get("token")
    if not token or not isinstance(token, str):
        raise ConfigError(f"exec plugin {command!r} returned no token")
    expires_at: float | None = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            when = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError as err:
            raise ConfigError(
                f"exec plugin {command!r}: bad expirationTimestamp {stamp!r}: {err}"
            ) from err
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        expires_at = when.timestamp()
    return ExecCredential(token=token, expires_at=expires_at)


class ExecTokenSource:
    """Runs the plugin when there is no fresh token; concurrent callers share one run."""

    def __init__(self, config: ExecConfig) -> None:
        self._config = config
        self._cred: ExecCredential | None = None
        self._lock = asyncio.Lock()
        self.runs = 0  # how many times the plugin ran (for logs and tests)

    def expire(self) -> None:
        self._cred = None

    async def get(self) -> str:
        cred = self._cred
        if cred is not None and cred.fresh(time.time()):
            return cred.token
        async with self._lock:
            cred = self._cred
            if cred is None or not cred.fresh(time.time()):
                cred = await self._run()
                self._cred = cred
            return cred.token

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self._config.provide_cluster_info:
            spec["cluster"] = dict(self._config.cluster)
        return json.dumps(
            {"apiVersion": self._config.api_version, "kind": "ExecCredential", "spec": spec}
        )

    async def _run(self) -> ExecCredential:
        cfg = self._config
        env = dict(os.environ)
        env.update(cfg.env)
        env["KUBERNETES_EXEC_INFO"] = self._exec_info()
        self.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                cfg.command,
                *cfg.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as err:
            hint = f" ({cfg.install_hint.strip()})" if cfg.install_hint else ""
            raise ConfigError(f"cannot run exec plugin {cfg.command!r}: {err}{hint}") from err
        try:
            out, err_out = await asyncio.wait_for(proc.communicate(), EXEC_TIMEOUT_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ConfigError(
                f"exec plugin {cfg.command!r} did not finish in {EXEC_TIMEOUT_SECONDS:.0f} s"
            ) from None
        if proc.returncode != 0:
            tail = err_out.decode(errors="replace").strip()[-500:]
            raise ConfigError(f"exec plugin {cfg.command!r} exited {proc.returncode}: {tail}")
        return parse_exec_output(out, api_version=cfg.api_version, command=cfg.command)
