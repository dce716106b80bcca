"""Finding (or building) the control-plane binaries.

Lookup order, per binary: ``$KUBELOOP_ASSETS``, ``$KUBEBUILDER_ASSETS`` (so users of
setup-envtest start instantly), the version-keyed cache, then a build from the Go
module proxy with ``tools/controlplane/build.sh``.

The cluster parts (kube-controller-manager, kwok and kwok's stage file) are a second,
separately cached build, ``tools/controlplane/build-cluster.sh``: only a test bed that runs
them asks for them (``find_assets(cluster=True)``), and the lean control plane does not
wait for their build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kubeloop.envtest._errors import AssetsError

#: Binaries a control plane needs; kubectl is for humans and the demo.
REQUIRED = ("etcd", "kube-apiserver")
OPTIONAL = ("kube-scheduler", "kubectl")
#: What a full test bed adds: kube-controller-manager, kwok, and the Stage objects kwok runs.
KWOK_STAGES = "kwok-stages.yaml"
CLUSTER = ("kube-controller-manager", "kwok", KWOK_STAGES)


@dataclass(frozen=True)
class Assets:
    """Where each control-plane binary lives."""

    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path | None
    kubectl: Path | None
    #: The cluster parts; None unless asked for with ``find_assets(cluster=True)``.
    kube_controller_manager: Path | None = None
    kwok: Path | None = None
    #: The Stage objects kwok runs (generated at build time from the kwok module).
    kwok_stages: Path | None = None

    def path(self, name: str) -> Path | None:
        return {
            "etcd": self.etcd,
            "kube-apiserver": self.kube_apiserver,
            "kube-scheduler": self.kube_scheduler,
            "kubectl": self.kubectl,
            "kube-controller-manager": self.kube_controller_manager,
            "kwok": self.kwok,
            KWOK_STAGES: self.kwok_stages,
        }[name]


def build_script(name: str = "build.sh") -> Path:
    """A build script (``build.sh`` or ``build-cluster.sh``): shipped in the wheel, or found
    in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (
        here / "_controlplane_src" / name,
        here.parent.parent / "tools" / "controlplane" / name,
    ):
        if candidate.is_file():
            return candidate
    raise AssetsError(f"cannot find tools/controlplane/{name} to build the control plane")


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


def _cluster_cache_dir() -> Path | None:
    """The dir build-cluster.sh would use, if its build completed. The script owns the cache
    key (versions and a hash of the binary set), so ask it rather than compute it twice."""
    script = build_script("build-cluster.sh")
    proc = subprocess.run(
        ["bash", str(script), "--print-dir"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssetsError(f"bash {script} --print-dir failed: {proc.stderr.strip()}")
    out = Path(proc.stdout.strip().splitlines()[-1])
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


def _pick(dirs: list[Path], names: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for name in names:
        for d in dirs:
            p = d / name
            if p.is_file() and (name == KWOK_STAGES or os.access(p, os.X_OK)):
                found[name] = p
                break
    return found


def find_assets(*, build: bool = True, cluster: bool = False) -> Assets:
    """Return the binaries, building them when nothing provides the required ones.

    The build runs ``build.sh`` (progress on stderr); it takes 15-30 minutes on
    2 cores the first time, and is a no-op afterwards. With ``cluster=True`` the result
    also names kube-controller-manager, kwok and kwok's stage file, built by
    ``build-cluster.sh`` (about 8 more minutes the first time) if nothing provides them;
    a missing one is then an :class:`AssetsError` too.
    """
    dirs = _env_dirs()
    cached = _cache_dir()
    if cached is not None:
        dirs.append(cached)
    names: tuple[str, ...] = REQUIRED + OPTIONAL
    if cluster:
        cluster_cached = _cluster_cache_dir()
        if cluster_cached is not None:
            dirs.append(cluster_cached)
        names += CLUSTER
    found = _pick(dirs, names)
    if build and any(n not in found for n in REQUIRED + OPTIONAL):
        dirs.append(run_build())
        found = _pick(dirs, names)
    if build and cluster and any(n not in found for n in CLUSTER):
        dirs.append(run_build("build-cluster.sh"))
        found = _pick(dirs, names)
    absent = [n for n in REQUIRED + (CLUSTER if cluster else ()) if n not in found]
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
        kube_controller_manager=found.get("kube-controller-manager"),
        kwok=found.get("kwok"),
        kwok_stages=found.get(KWOK_STAGES),
    )


def required_go(src: Path) -> str:
    """The Go release the build needs: the ``go`` directive of the pinned k8s module
    (``1.26.0``). Kubernetes raises it with each minor release."""
    for line in (src / "k8s" / "go.mod").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "go":
            return parts[1]
    raise AssetsError(f"{src / 'k8s' / 'go.mod'} has no go directive")


def go_release(version: str) -> tuple[int, int, int] | None:
    """``go1.26.8`` -> (1, 26, 8); ``1.26rc1`` -> (1, 26, 0); None if not a release number
    (a ``devel`` toolchain: assumed new enough)."""
    m = re.match(r"(?:go)?(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


def check_go(required: str, go: str | None = None) -> None:
    """Raise :class:`AssetsError` unless ``go`` (default: the one on PATH) is at least
    ``required``, saying which version is needed and where to get it: distribution
    packages are often older (Debian 12 ships 1.19), and the build pins its toolchain
    (``GOTOOLCHAIN=local``), so an old one fails deep in the build otherwise."""
    where = "https://go.dev/dl/ (distribution packages are often older)"
    found = go or shutil.which("go")
    if found is None:
        raise AssetsError(
            f"building the control plane needs Go >= {required} on PATH, and there is no"
            f" `go`: install Go {required} or newer from {where}, or set KUBELOOP_ASSETS"
            " to a directory with etcd and kube-apiserver"
        )
    proc = subprocess.run(
        [found, "env", "GOVERSION"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOTOOLCHAIN": "local"},
        cwd="/",  # no go.mod around to make it switch or refuse
    )
    have = proc.stdout.strip() or "an unknown version"
    need, got = go_release(required), go_release(have)
    if proc.returncode != 0 or (need is not None and got is not None and got < need):
        raise AssetsError(
            f"building the control plane needs Go >= {required}; {found} is {have}:"
            f" install Go {required} or newer from {where} and put it first on PATH"
        )


def run_build(name: str = "build.sh") -> Path:
    """Run a build script (a no-op when cached) and return the directory it printed."""
    script = build_script(name)
    check_go(required_go(script.parent))
    proc = subprocess.run(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=sys.stderr, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssetsError(
            f"building the control plane failed: bash {script} exited {proc.returncode}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])
