"""Write the operator's CRDs as YAML, one file per CRD, generated from ``nodepool_operator.api``.

    python -m nodepool_operator.manifests [--check] [--out DIR ...]

The same files go to every ``--out`` directory: by default ``config/crd`` (kustomize, ``make
install``) and the Helm chart's ``charts/nodepool-operator/crds``, so the two cannot drift.
``--check`` writes nothing: it prints a unified diff and exits 1 when the files in any ``--out``
differ from what the types generate (stale, hand-edited, missing or left over).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from nodepool_operator.api import GROUP, crds

DEFAULT_OUTS = (Path("config/crd"), Path("charts/nodepool-operator/crds"))
HEADER = (
    "# Generated from the Python types in nodepool_operator/api (packages/nodepool-operator)\n"
    "# by `make manifests`.\n"
    "# Do not edit: change the types and regenerate.\n"
)
# Files we would delete as left over; anything else in the directory is not ours.
_OURS = f"{GROUP}_*.yaml"


def filename(crd: dict[str, Any]) -> str:
    """``<group>_<plural>.yaml``, controller-gen's naming."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


def render() -> dict[str, str]:
    """File name → YAML text of every CRD."""
    return {
        filename(crd): HEADER + yaml.safe_dump(crd, sort_keys=False, allow_unicode=True, width=100)
        for crd in crds()
    }


def _differences(out: Path, wanted: dict[str, str]) -> dict[str, tuple[str, str]]:
    """File name → (current text, wanted text) for each file that must change."""
    current = {p.name: p.read_text(encoding="utf-8") for p in sorted(out.glob(_OURS))}
    return {
        name: (current.get(name, ""), wanted.get(name, ""))
        for name in sorted(current.keys() | wanted.keys())
        if current.get(name) != wanted.get(name)
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodepool_operator.manifests")
    parser.add_argument("--check", action="store_true", help="diff instead of writing")
    parser.add_argument(
        "--out",
        type=Path,
        action="append",
        help="a directory to write the CRDs to; repeatable (default: "
        + ", ".join(map(str, DEFAULT_OUTS))
        + ")",
    )
    args = parser.parse_args(argv)
    outs: list[Path] = args.out or list(DEFAULT_OUTS)
    wanted = render()
    stale = 0
    for out in outs:
        changes = _differences(out, wanted)
        stale += len(changes)
        if args.check:
            _print_diff(out, changes)
        else:
            _write(out, changes)
    if args.check and stale:
        print(f"{stale} CRD file(s) out of date; run `make manifests`", file=sys.stderr)
    return 1 if args.check and stale else 0


def _print_diff(out: Path, changes: dict[str, tuple[str, str]]) -> None:
    for name, (have, want) in changes.items():
        sys.stdout.writelines(
            difflib.unified_diff(
                have.splitlines(keepends=True),
                want.splitlines(keepends=True),
                fromfile=str(out / name),
                tofile=f"{out / name} (generated)",
            )
        )


def _write(out: Path, changes: dict[str, tuple[str, str]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (_, want) in changes.items():
        path = out / name
        if want:
            path.write_text(want, encoding="utf-8")
            print(f"wrote {path}")
        else:
            path.unlink()
            print(f"removed {path}")


if __name__ == "__main__":
    raise SystemExit(main())
