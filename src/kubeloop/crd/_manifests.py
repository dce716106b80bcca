"""CRDs as YAML files: render them, write them to directories, or diff what is there.

One file per CRD, ``<group>_<plural>.yaml`` (controller-gen's naming). A directory may hold
other files: only ``<group>_*.yaml`` of the CRDs' groups are ours (written, compared, and
removed when no CRD generates them any more).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from kubeloop.crd._definition import CustomResource

Crd = Mapping[str, Any]


def filename(crd: Crd) -> str:
    """``<group>_<plural>.yaml``, controller-gen's naming."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


def render(crds: Iterable[CustomResource | Crd], header: str = "") -> dict[str, str]:
    """File name → YAML text of every CRD, ``header`` (comment lines) first."""
    out: dict[str, str] = {}
    for crd in crds:
        obj = crd.definition() if isinstance(crd, CustomResource) else dict(crd)
        out[filename(obj)] = header + yaml.safe_dump(
            obj, sort_keys=False, allow_unicode=True, width=100
        )
    return out


@dataclass(frozen=True)
class Change:
    """One file to write (``want`` set) or remove (``want`` empty)."""

    path: Path
    have: str
    want: str

    def diff(self) -> list[str]:
        return list(
            difflib.unified_diff(
                self.have.splitlines(keepends=True),
                self.want.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=f"{self.path} (generated)",
            )
        )


def changes(out: Path, rendered: Mapping[str, str]) -> list[Change]:
    """What must change in ``out`` for it to hold exactly ``rendered``'s files (of ours)."""
    groups = {name.split("_", 1)[0] for name in rendered}
    current = {
        p.name: p.read_text(encoding="utf-8")
        for group in sorted(groups)
        for p in sorted(out.glob(f"{group}_*.yaml"))
    }
    return [
        Change(out / name, current.get(name, ""), rendered.get(name, ""))
        for name in sorted(current.keys() | rendered.keys())
        if current.get(name) != rendered.get(name)
    ]


def apply(change: Change, log: TextIO) -> None:
    """Write or remove one file, saying so on ``log``."""
    change.path.parent.mkdir(parents=True, exist_ok=True)
    if change.want:
        change.path.write_text(change.want, encoding="utf-8")
        print(f"wrote {change.path}", file=log)
    else:
        change.path.unlink()
        print(f"removed {change.path}", file=log)


def write_manifests(
    crds: Iterable[CustomResource | Crd],
    outs: Iterable[Path],
    *,
    header: str = "",
    check: bool = False,
    log: TextIO | None = None,
) -> int:
    """Write the CRDs' files into every directory of ``outs`` (the same files to each); with
    ``check``, write nothing and print a unified diff of each stale file instead.

    Returns:
        How many files were (or, with ``check``, are) out of date.
    """
    import sys

    log = log or sys.stdout
    rendered = render(crds, header)
    if not rendered:
        raise ValueError("no CRDs to write")
    stale = 0
    for out in outs:
        for change in changes(out, rendered):
            stale += 1
            if check:
                log.writelines(change.diff())
            else:
                apply(change, log)
    return stale


def load(target: str) -> list[CustomResource | Crd]:
    """The CRDs ``target`` names: ``package.module`` (every :class:`CustomResource` at its top
    level, in order) or ``package.module:attr``, where ``attr`` is a CustomResource, a list of
    them (or of CRD dicts), or a function returning one.

    Raises:
        ValueError: the module has none, or ``attr`` is none of those (naming ``target``).
        ImportError: the module does not import.
    """
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    if not attr:
        found: list[CustomResource | Crd] = []
        for member in vars(module).values():
            if isinstance(member, CustomResource) and member not in found:
                found.append(member)
        if not found:
            raise ValueError(f"{module_name} defines no CustomResource at its top level")
        return found
    try:
        value: Any = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, CustomResource):
        value = value()
    if isinstance(value, CustomResource | Mapping):
        listed = [value]
    elif isinstance(value, list | tuple):
        listed = list(value)
    else:
        raise ValueError(f"{target} is a {type(value).__name__}, not CRDs")
    for item in listed:
        if not isinstance(item, CustomResource) and not (
            isinstance(item, Mapping) and item.get("kind") == "CustomResourceDefinition"
        ):
            raise ValueError(f"{target}: {item!r} is neither a CustomResource nor a CRD")
    return listed
