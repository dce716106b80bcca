"""Finding (or building) the control-plane binaries.

Lookup order, per binary: ``$KUBELOOP_ASSETS``, ``$KUBEBUILDER_ASSETS`` (so users of
setup-envtest start instantly), the version-keyed cache, then a build from the Go
module proxy with ``tools/controlplane/build.sh``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kubeloop.envtest._errors import AssetsError

#: Binaries a control plane needs; kubectl is for humans and the demo.
REQUIRED = ("etcd", "kube-apiserver")
OPTIONAL = ("kube-scheduler", "kubectl")


@dataclass(frozen=True)
class Assets:
    """Where each control-plane binary lives."""

    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path | None
    kubectl: Path | None

    def path(self, name: str) -> Path | None:
        return {
            "etcd": self.etcd,
            "kube-apiserver": self.kube_apiserver,
            "kube-scheduler": self.kube_scheduler,
            "kubectl": self.kubectl,
        }[name]


def build_script() -> Path:
    """The build script: shipped in the wheel, or found in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (
        here / "_controlplane_src" / "build.sh",
        here.parent.parent / "tools" / "controlplane" / "build.sh",
    ):
        if candidate.is_file():
            return candidate
    raise AssetsError("cannot find tools/controlplane/build.sh to build the control plane")


def _env_dirs() -> list[Path]:
    dirs = []
    for var in ("KUBELOOP_ASSETS", "KUBEBUILDER_ASSETS"):
        value = os.environ.get(var)
        if value:
            dirs.append(Path(value))
    return dirs


def _cache_dir() -> Path | None:
    """The cache dir build.sh would use, if its build completed (no build started)."""
    script = build_script()
    versions = _versions(script.parent)
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubeloop"
    root = Path(os.environ.get("KUBELOOP_CONTROLPLANE_CACHE", base / "controlplane"))
    out = root / f"{versions[0]}-etcd{versions[1].removeprefix('v')}"
    return out if (out / ".complete").is_file() else None


def _versions(src: Path) -> tuple[str, str]:
    def find(gomod: Path, module: str) -> str:
        for line in gomod.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == module and parts[1].startswith("v"):
                return parts[1]
        raise AssetsError(f"{gomod} does not pin {module}")

    return (
        find(src / "k8s" / "go.mod", "k8s.io/kubernetes"),
        find(src / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def _pick(dirs: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for name in REQUIRED + OPTIONAL:
        for d in dirs:
            p = d / name
            if p.is_file() and os.access(p, os.X_OK):
                found[name] = p
                break
    return found


def find_assets(*, build: bool = True) -> Assets:
    """Return the binaries, building them when nothing provides the required ones.

    The build runs ``build.sh`` (progress on stderr); it takes 15-30 minutes on
    2 cores the first time, and is a no-op afterwards.
    """
    dirs = _env_dirs()
    cached = _cache_dir()
    if cached is not None:
        dirs.append(cached)
    found = _pick(dirs)
    missing = [n for n in REQUIRED + OPTIONAL if n not in found]
    if missing and build:
        dirs.append(run_build())
        found = _pick(dirs)
    absent = [n for n in REQUIRED if n not in found]
    if absent:
        raise AssetsError(
            f"control-plane binaries not found: {', '.join(absent)} "
            "(set KUBELOOP_ASSETS, or run `make setup` to build them)"
        )
    return Assets(
        etcd=found["etcd"],
        kube_apiserver=found["kube-apiserver"],
        kube_scheduler=found.get("kube-scheduler"),
        kubectl=found.get("kubectl"),
    )


def run_build() -> Path:
    """Run build.sh (a no-op when cached) and return the directory it printed."""
    script = build_script()
    proc = subprocess.run(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=sys.stderr, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssetsError(
            f"building the control plane failed: bash {script} exited {proc.returncode}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])
