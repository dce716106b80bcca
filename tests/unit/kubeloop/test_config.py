"""Kubeconfig and in-cluster loading."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop._config import (
    BearerToken,
    ClusterConfig,
    load_config,
    load_incluster,
    load_kubeconfig,
)
from kubeloop._errors import ConfigError

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    *,
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    current: str | None = "main",
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c1", "cluster": cluster or {"server": "https://10.0.0.1:6443"}},
            {
                "name": "c2",
                "cluster": {"server": "https://other:443", "insecure-skip-tls-verify": True},
            },
        ],
        "users": [
            {"name": "u1", "user": user if user is not None else {"token": "t0k"}},
            {"name": "u2", "user": {"token": "other"}},
        ],
        "contexts": [
            {"name": "main", "context": context or {"cluster": "c1", "user": "u1"}},
            {"name": "second", "context": {"cluster": "c2", "user": "u2", "namespace": "ns2"}},
        ],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_current_context_with_inline_data(tmp_path: Path) -> None:
    doc = kubeconfig(
        cluster={
            "server": "https://10.0.0.1:6443",
            "certificate-authority-data": b64(CA),
            "tls-server-name": "kubernetes.default",
        },
        user={"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
        context={"cluster": "c1", "user": "u1", "namespace": "team-a"},
    )
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.server == "https://10.0.0.1:6443"
    assert cfg.ca_data == CA
    assert cfg.client_cert_data == CERT
    assert cfg.client_key_data == KEY
    assert cfg.token is None
    assert cfg.tls_server_name == "kubernetes.default"
    assert cfg.namespace == "team-a"
    assert not cfg.insecure


def test_file_paths_are_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(CA)
    (tmp_path / "pki" / "client.crt").write_bytes(CERT)
    (tmp_path / "abs.key").write_bytes(KEY)
    doc = kubeconfig(
        cluster={"server": "https://h:6443", "certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/client.crt", "client-key": str(tmp_path / "abs.key")},
    )
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert (cfg.ca_data, cfg.client_cert_data, cfg.client_key_data) == (CA, CERT, KEY)


def test_data_wins_over_file(tmp_path: Path) -> None:
    doc = kubeconfig(
        cluster={
            "server": "https://h",
            "certificate-authority": "missing.crt",
            "certificate-authority-data": b64(CA),
        }
    )
    assert load_kubeconfig(write(tmp_path / "config", doc)).ca_data == CA


def test_token_and_token_file(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path / "a", kubeconfig(user={"token": "abc"})))
    assert cfg.token == "abc"
    assert cfg.token_file is None
    assert "abc" not in repr(cfg)

    cfg = load_kubeconfig(write(tmp_path / "b", kubeconfig(user={"tokenFile": "tok"})))
    assert cfg.token_file == tmp_path / "tok"


def test_named_context(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path / "config", kubeconfig()), context="second")
    assert cfg.server == "https://other:443"
    assert cfg.insecure
    assert cfg.token == "other"
    assert cfg.namespace == "ns2"


def test_context_without_user_is_anonymous(tmp_path: Path) -> None:
    doc = kubeconfig(context={"cluster": "c1"})
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.token is None
    assert cfg.client_cert_data is None


def test_kubeconfig_env_first_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = write(tmp_path / "first", kubeconfig(user={"token": "first"}))
    second = write(tmp_path / "second", kubeconfig(user={"token": "second"}))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert load_kubeconfig().token == "first"


def test_default_path_is_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube" / "config", kubeconfig(user={"token": "home"}))
    assert load_kubeconfig().token == "home"


@pytest.mark.parametrize(
    ("doc", "context", "message"),
    [
        (kubeconfig(current=None), None, "no current-context"),
        (kubeconfig(), "nope", "no context named 'nope' (known: main, second)"),
        (kubeconfig(context={"cluster": "gone", "user": "u1"}), None, "no cluster named 'gone'"),
        (kubeconfig(context={"cluster": "c1", "user": "gone"}), None, "no user named 'gone'"),
        (kubeconfig(context={"user": "u1"}), None, "names no cluster"),
        (kubeconfig(cluster={"insecure-skip-tls-verify": True}), None, "has no server"),
        (kubeconfig(cluster={"server": "10.0.0.1:6443"}), None, "not an http(s) URL"),
        (kubeconfig(user={"exec": {"command": "aws"}}), None, "exec.apiVersion ''"),
        (kubeconfig(user={"auth-provider": {"name": "oidc"}}), None, "uses auth-provider"),
        (kubeconfig(user={"username": "a", "password": "b"}), None, "basic auth"),
        (
            kubeconfig(user={"client-certificate-data": b64(CERT)}),
            None,
            "needs both the certificate and the key",
        ),
        (
            kubeconfig(cluster={"server": "https://h", "certificate-authority-data": "!!"}),
            None,
            "certificate-authority-data is not valid base64",
        ),
        (
            kubeconfig(cluster={"server": "https://h", "certificate-authority": "nope.crt"}),
            None,
            "cannot read certificate-authority",
        ),
        (["not", "a", "mapping"], None, "is not a mapping"),
    ],
)
def test_errors(tmp_path: Path, doc: Any, context: str | None, message: str) -> None:
    path = write(tmp_path / "config", doc)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_kubeconfig(path, context)


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_kubeconfig(tmp_path / "absent")
    (tmp_path / "bad").write_text("clusters: [unclosed")
    with pytest.raises(ConfigError, match="cannot read kubeconfig"):
        load_kubeconfig(tmp_path / "bad")


# -- in-cluster -------------------------------------------------------------------------


@pytest.fixture
def sa_dir(tmp_path: Path) -> Path:
    root = tmp_path / "sa"
    root.mkdir()
    (root / "token").write_text("sa-token\n")
    (root / "ca.crt").write_bytes(CA)
    (root / "namespace").write_text("kube-system")
    return root


def test_incluster(sa_dir: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = load_incluster(root=sa_dir, environ=env)
    assert cfg.server == "https://10.96.0.1:443"
    assert cfg.ca_data == CA
    assert cfg.token_file == sa_dir / "token"
    assert cfg.token_refresh == 60.0
    assert cfg.namespace == "kube-system"


def test_incluster_ipv6(sa_dir: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_incluster(root=sa_dir, environ=env).server == "https://[fd00::1]:443"


def test_incluster_errors(sa_dir: Path) -> None:
    with pytest.raises(ConfigError, match="not running in a cluster"):
        load_incluster(root=sa_dir, environ={})
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    (sa_dir / "token").unlink()
    with pytest.raises(ConfigError, match=r"token .* does not exist"):
        load_incluster(root=sa_dir, environ=env)


def test_load_config_prefers_kubeconfig_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "config", kubeconfig(user={"token": "from-env"}))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert load_config().token == "from-env"


def test_load_config_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no Kubernetes configuration"):
        load_config()


def test_load_config_home_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube" / "config", kubeconfig(user={"token": "home"}))
    assert load_config().token == "home"


# -- token refresh ----------------------------------------------------------------------


async def test_token_file_is_reread(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("one\n")
    token = BearerToken(
        ClusterConfig("https://h", token="static", token_file=file, token_refresh=3600)
    )
    assert await token.get() == "one"  # the file wins over the static token
    file.write_text("two")
    assert await token.get() == "one"  # not yet due
    token.expire()
    assert await token.get() == "two"


async def test_token_file_keeps_last_good_value(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("one")
    token = BearerToken(ClusterConfig("https://h", token_file=file, token_refresh=0))
    assert await token.get() == "one"
    file.unlink()
    assert await token.get() == "one"


async def test_token_file_missing_from_the_start(tmp_path: Path) -> None:
    token = BearerToken(ClusterConfig("https://h", token_file=tmp_path / "absent"))
    with pytest.raises(ConfigError, match="cannot read token file"):
        await token.get()


async def test_static_token() -> None:
    assert await BearerToken(ClusterConfig("https://h", token="abc")).get() == "abc"
    assert await BearerToken(ClusterConfig("https://h")).get() is None
