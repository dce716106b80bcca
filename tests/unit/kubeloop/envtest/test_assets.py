"""Binary lookup order and certificate contents (no processes started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from kubeloop._pki import CertificateAuthority
from kubeloop.envtest import AssetsError, find_assets


def _fake_bins(d: Path, names: list[str]) -> Path:
    d.mkdir(parents=True)
    for n in names:
        p = d / n
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    return d


@pytest.fixture
def no_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBELOOP_CONTROLPLANE_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("KUBELOOP_ASSETS", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)


@pytest.mark.usefixtures("no_cache")
def test_kubeloop_assets_wins_over_kubebuilder_assets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ours = _fake_bins(tmp_path / "ours", ["etcd", "kube-apiserver", "kube-scheduler", "kubectl"])
    theirs = _fake_bins(
        tmp_path / "theirs", ["etcd", "kube-apiserver", "kube-scheduler", "kubectl"]
    )
    monkeypatch.setenv("KUBELOOP_ASSETS", str(ours))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(theirs))
    assets = find_assets(build=False)
    assert assets.kube_apiserver == ours / "kube-apiserver"


@pytest.mark.usefixtures("no_cache")
def test_kubebuilder_assets_alone_are_enough(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # setup-envtest ships etcd, kube-apiserver and kubectl but no scheduler
    theirs = _fake_bins(tmp_path / "theirs", ["etcd", "kube-apiserver", "kubectl"])
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(theirs))
    assets = find_assets(build=False)
    assert assets.etcd == theirs / "etcd"
    assert assets.kube_scheduler is None


@pytest.mark.usefixtures("no_cache")
def test_missing_binaries_without_build_is_a_clear_error() -> None:
    with pytest.raises(AssetsError, match="kube-apiserver"):
        find_assets(build=False)


def test_client_certificate_carries_user_and_groups() -> None:
    ca = CertificateAuthority()
    pair = ca.client("admin", ("system:masters",))
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(ca_cert)


def test_serving_certificate_covers_loopback() -> None:
    pair = CertificateAuthority().serving("127.0.0.1")
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


@pytest.mark.usefixtures("no_cache")
def test_the_cluster_parts_are_asked_for_separately(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lean = ["etcd", "kube-apiserver", "kube-scheduler", "kubectl"]
    ours = _fake_bins(tmp_path / "ours", [*lean, "kube-controller-manager", "kwok"])
    (ours / "kwok-stages.yaml").write_text("kind: Stage\n")
    monkeypatch.setenv("KUBELOOP_ASSETS", str(ours))
    assert find_assets(build=False).kwok is None, "a lean control plane does not look for kwok"
    assets = find_assets(build=False, cluster=True)
    assert assets.kube_controller_manager == ours / "kube-controller-manager"
    assert assets.kwok == ours / "kwok"
    assert assets.kwok_stages == ours / "kwok-stages.yaml"
    assert assets.path("kwok-stages.yaml") == ours / "kwok-stages.yaml"


@pytest.mark.usefixtures("no_cache")
def test_missing_cluster_parts_without_build_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lean = _fake_bins(tmp_path / "lean", ["etcd", "kube-apiserver", "kube-scheduler", "kubectl"])
    monkeypatch.setenv("KUBELOOP_ASSETS", str(lean))
    with pytest.raises(AssetsError, match=r"kube-controller-manager, kwok, kwok-stages\.yaml"):
        find_assets(build=False, cluster=True)


def test_the_cluster_cache_key_follows_the_binary_set(tmp_path: Path) -> None:
    import subprocess

    from kubeloop.envtest._assets import build_script

    script = build_script("build-cluster.sh")
    out = subprocess.run(
        ["bash", str(script), "--print-dir"],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert out.startswith(str(tmp_path / ".cache" / "kubeloop" / "controlplane" / "v1."))
    changed = tmp_path / "build-cluster.sh"
    changed.write_text(
        script.read_text().replace(
            'BINARIES="kube-controller-manager kwok"', 'BINARIES="kube-controller-manager"'
        )
    )
    (tmp_path / "k8s").symlink_to(script.parent / "k8s")
    (tmp_path / "build-lib.sh").symlink_to(script.parent / "build-lib.sh")
    other = subprocess.run(
        ["bash", str(changed), "--print-dir"],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert other != out
