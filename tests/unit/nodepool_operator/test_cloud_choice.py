"""``nodepool-operator run --cloud simulated|aws``: each refuses to start where it must not run,
naming what is missing, before any reconcile (and for the simulated cloud, before any request
to the cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodepool_operator.__main__ import main
from nodepool_operator.operator import is_local_test_bed

_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "SERVER", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(_KUBECONFIG.replace("SERVER", server))
    return path


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS settings anywhere the standard chain looks (metadata off: no network here)."""
    for key in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def run(tmp_path: Path, server: str, *flags: str) -> int:
    return main(
        [
            "run",
            "--kubeconfig",
            str(kubeconfig(tmp_path, server)),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--no-install-crds",
            "--cloud-state",
            str(tmp_path / "cloud.sqlite"),
            *flags,
        ]
    )


@pytest.mark.parametrize(
    ("server", "local"),
    [
        ("https://127.0.0.1:6443", True),
        ("https://127.5.0.1:6443", True),
        ("https://[::1]:6443", True),
        ("https://localhost:6443", True),
        ("https://10.0.0.1:6443", False),
        ("https://api.prod.example.com", False),
        ("https://localhost.example.com", False),
    ],
)
def test_local_test_bed_means_a_loopback_api_server(server: str, local: bool) -> None:
    assert is_local_test_bed(server) is local


def test_the_simulated_cloud_refuses_a_cluster_that_is_not_local(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # 192.0.2.0/24 is TEST-NET-1: nothing answers, so getting past the check would hang
    # or fail differently.
    assert run(tmp_path, "https://192.0.2.10:6443") == 2
    logged = capfd.readouterr().err
    assert "not a local test bed" in logged
    assert "--allow-simulated-cloud" in logged
    assert not (tmp_path / "cloud.sqlite").exists(), "no simulated cloud was opened"


def test_aws_without_region_or_credentials_names_both(
    tmp_path: Path, no_aws: None, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "https://127.0.0.1:1", "--cloud", "aws") == 2
    logged = capfd.readouterr().err
    assert "no AWS region" in logged
    assert "AWS_REGION" in logged
    assert "no AWS credentials" in logged
    assert "AWS_WEB_IDENTITY_TOKEN_FILE" in logged


def test_aws_with_a_region_but_no_credentials_names_only_credentials(
    tmp_path: Path, no_aws: None, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "https://127.0.0.1:1", "--cloud", "aws", "--aws-region", "eu-west-1") == 2
    logged = capfd.readouterr().err
    assert "no AWS region" not in logged
    assert "no AWS credentials" in logged


def test_aws_with_an_unknown_profile_names_it(
    tmp_path: Path, no_aws: None, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "https://127.0.0.1:1", "--cloud", "aws", "--aws-profile", "nope") == 2
    logged = capfd.readouterr().err
    assert "'nope' not found" in logged


def test_a_bad_label_selector_is_refused_at_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--label-selector", "shard in (a"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--label-selector" in err
    assert "cannot parse" in err


def test_an_interruption_queue_needs_the_aws_cloud(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "https://127.0.0.1:1", "--interruption-queue", "q") == 2
    logged = capfd.readouterr().err
    assert "--interruption-queue needs --cloud aws" in logged
    assert not (tmp_path / "cloud.sqlite").exists(), "no simulated cloud was opened"
