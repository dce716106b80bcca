"""Kubeconfig merging (several files in $KUBECONFIG), proxy-url, and exec plugins run
as real subprocesses (the plugin is a small Python program written by the test)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop._config import BearerToken, kubeconfig_paths, load_config, load_kubeconfig
from kubeloop._errors import ConfigError
from kubeloop._exec import ExecTokenSource, parse_exec_output

V1 = "client.authentication.k8s.io/v1"


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def cfg(
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in (clusters or {}).items()],
        "users": [{"name": k, "user": v} for k, v in (users or {}).items()],
        "contexts": [{"name": k, "context": v} for k, v in (contexts or {}).items()],
    }
    if current:
        doc["current-context"] = current
    return doc


def test_kubeconfig_list_merges_first_definition_wins(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "ca.crt").write_bytes(b"CA-FROM-B")
    a = write(
        tmp_path / "a" / "config",
        cfg(
            clusters={"shared": {"server": "https://a.example:6443"}},
            users={"me": {"token": "token-a"}},
            contexts={"dev": {"cluster": "shared", "user": "me", "namespace": "a-ns"}},
            current="dev",
        ),
    )
    b = write(
        tmp_path / "b" / "config",
        cfg(
            clusters={
                "shared": {"server": "https://b.example:6443"},
                "only-b": {"server": "https://only-b:6443", "certificate-authority": "ca.crt"},
            },
            users={"me": {"token": "token-b"}, "bob": {"token": "token-bob"}},
            contexts={"prod": {"cluster": "only-b", "user": "bob"}},
            current="prod",
        ),
    )
    env = {"KUBECONFIG": os.pathsep.join([str(a), str(b), str(a)])}
    assert kubeconfig_paths(env) == [a, b]  # repeats dropped, order kept
    os.environ["KUBECONFIG"] = env["KUBECONFIG"]
    try:
        merged = load_kubeconfig()
        # current-context from the first file that sets one; cluster/user: first wins
        assert merged.server == "https://a.example:6443"
        assert merged.token == "token-a"
        assert merged.namespace == "a-ns"
        # a context defined only in the second file, with a CA path relative to *its* file
        prod = load_kubeconfig(context="prod")
        assert prod.server == "https://only-b:6443"
        assert prod.token == "token-bob"
        assert prod.ca_data == b"CA-FROM-B"
        assert load_config().server == "https://a.example:6443"
    finally:
        del os.environ["KUBECONFIG"]


def test_missing_files_in_the_list_are_skipped_but_not_all(tmp_path: Path) -> None:
    good = write(
        tmp_path / "good",
        cfg(
            clusters={"c": {"server": "https://c:1"}},
            users={"u": {"token": "t"}},
            contexts={"x": {"cluster": "c", "user": "u"}},
            current="x",
        ),
    )
    missing = tmp_path / "missing"
    os.environ["KUBECONFIG"] = os.pathsep.join([str(missing), str(good)])
    try:
        assert load_kubeconfig().server == "https://c:1"
        os.environ["KUBECONFIG"] = os.pathsep.join([str(missing), str(tmp_path / "also")])
        with pytest.raises(ConfigError, match="none of the kubeconfig files exist"):
            load_kubeconfig()
    finally:
        del os.environ["KUBECONFIG"]
    with pytest.raises(ConfigError, match="does not exist"):
        load_kubeconfig(missing)  # an explicit path must exist


def test_proxy_url_is_read_and_socks_refused(tmp_path: Path) -> None:
    doc = cfg(
        clusters={"c": {"server": "https://c:1", "proxy-url": "http://127.0.0.1:3128"}},
        users={"u": {"token": "t"}},
        contexts={"x": {"cluster": "c", "user": "u"}},
        current="x",
    )
    assert load_kubeconfig(write(tmp_path / "k", doc)).proxy_url == "http://127.0.0.1:3128"
    doc["clusters"][0]["cluster"]["proxy-url"] = "socks5://127.0.0.1:1080"
    with pytest.raises(ConfigError, match="socks5 is not supported"):
        load_kubeconfig(write(tmp_path / "k", doc))


def exec_user(command: str, args: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": V1,
            "command": command,
            "args": args,
            "interactiveMode": "Never",
            **extra,
        }
    }


def test_exec_stanza_errors_name_the_field(tmp_path: Path) -> None:
    base = cfg(
        clusters={"c": {"server": "https://c:1"}},
        contexts={"x": {"cluster": "c", "user": "u"}},
        current="x",
    )
    for stanza, message in (
        ({"apiVersion": V1}, "exec.command is required"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}, "apiVersion"),
        ({"apiVersion": V1, "command": "x", "interactiveMode": "Sometimes"}, "interactiveMode"),
        ({"apiVersion": V1, "command": "x", "interactiveMode": "Always"}, "terminal"),
    ):
        base["users"] = [{"name": "u", "user": {"exec": stanza}}]
        with pytest.raises(ConfigError, match=message):
            load_kubeconfig(write(tmp_path / "k", base))
    base["users"] = [{"name": "u", "user": {"auth-provider": {"name": "gcp"}}}]
    with pytest.raises(ConfigError, match="exec plugin instead"):
        load_kubeconfig(write(tmp_path / "k", base))


def test_parse_exec_output_checks_what_matters() -> None:
    def out(status: dict[str, Any], version: str = V1) -> bytes:
        doc = {"apiVersion": version, "kind": "ExecCredential", "status": status}
        return json.dumps(doc).encode()

    cred = parse_exec_output(
        out({"token": "abc", "expirationTimestamp": "2030-01-01T00:00:00Z"}),
        api_version=V1,
        command="p",
    )
    assert cred.token == "abc"
    assert cred.expires_at == 1893456000.0
    with pytest.raises(ConfigError, match="no JSON"):
        parse_exec_output(b"login at https://...", api_version=V1, command="p")
    with pytest.raises(ConfigError, match="answered apiVersion"):
        parse_exec_output(
            out({"token": "a"}, "client.authentication.k8s.io/v1beta1"), api_version=V1, command="p"
        )
    with pytest.raises(ConfigError, match="client certificate"):
        parse_exec_output(
            out({"clientCertificateData": "x", "clientKeyData": "y"}), api_version=V1, command="p"
        )
    with pytest.raises(ConfigError, match="no token"):
        parse_exec_output(out({}), api_version=V1, command="p")


PLUGIN = textwrap.dedent(
    """
    import json, os, sys, datetime
    state = sys.argv[1]
    # every run is recorded by the plugin itself: the test's oracle
    with open(state + ".runs", "a") as f:
        f.write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
    if os.path.exists(state + ".fail"):
        print("no credentials", file=sys.stderr)
        sys.exit(3)
    token = open(state).read().strip()
    ttl = float(os.environ.get("PLUGIN_TTL", "3600"))
    exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }))
    """
)


def plugin_config(
    tmp_path: Path, token: str, ttl: float = 3600, *, failing: bool = False
) -> tuple[Path, Path]:
    if failing:
        Path(str(tmp_path / "token") + ".fail").touch()
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    state = tmp_path / "token"
    state.write_text(token)
    doc = cfg(
        clusters={"c": {"server": "https://c:1", "certificate-authority-data": "Q0E="}},
        users={
            "u": exec_user(
                sys.executable,
                [str(script), str(state)],
                env=[{"name": "PLUGIN_TTL", "value": str(ttl)}],
                provideClusterInfo=True,
            )
        },
        contexts={"x": {"cluster": "c", "user": "u"}},
        current="x",
    )
    return write(tmp_path / "kubeconfig", doc), state


def runs(state: Path) -> list[dict[str, Any]]:
    path = Path(str(state) + ".runs")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_exec_plugin_runs_once_caches_and_reruns_after_expire(tmp_path: Path) -> None:
    kubeconfig, state = plugin_config(tmp_path, "first")
    token = BearerToken(load_kubeconfig(kubeconfig))
    assert runs(state) == []  # lazily: loading the kubeconfig runs nothing
    assert await token.get() == "first"
    assert await token.get() == "first"
    assert len(runs(state)) == 1  # cached until expiry
    info = runs(state)[0]
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == "https://c:1"  # provideClusterInfo
    state.write_text("second")
    token.expire()  # what the transport does on a 401
    assert await token.get() == "second"
    assert len(runs(state)) == 2


async def test_exec_plugin_token_near_expiry_is_refreshed(tmp_path: Path) -> None:
    kubeconfig, state = plugin_config(tmp_path, "short", ttl=5)  # inside the 10 s margin
    token = BearerToken(load_kubeconfig(kubeconfig))
    assert await token.get() == "short"
    assert await token.get() == "short"
    assert len(runs(state)) == 2  # never trusted past its expiry margin


async def test_a_failing_plugin_is_a_clear_error(tmp_path: Path) -> None:
    kubeconfig, _ = plugin_config(tmp_path, "x", failing=True)
    token = BearerToken(load_kubeconfig(kubeconfig))
    with pytest.raises(ConfigError, match="exited 3: no credentials"):
        await token.get()
    config = load_kubeconfig(kubeconfig)
    assert config.exec is not None
    missing = ExecTokenSource(
        type(config.exec)(command=str(tmp_path / "nope"), install_hint="install nope")
    )
    with pytest.raises(ConfigError, match="install nope"):
        await missing.get()
