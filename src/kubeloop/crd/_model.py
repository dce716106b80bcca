"""How a dataclass or a msgspec Struct reads as a CRD type: its fields' JSON names, markers,
defaults and documentation (the attribute docstrings, read from the source)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import textwrap
import types
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import msgspec

from kubeloop.crd._markers import Name


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    json: str
    hint: Any
    markers: tuple[object, ...]
    optional: bool
    default: Any
    factory: Callable[[], Any] | None
    doc: str

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.factory is None


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def unwrap(hint: Any) -> tuple[Any, tuple[object, ...], bool]:
    """``Annotated[T, m] | None`` and the like → ``(T, markers, optional)``."""
    markers: list[object] = []
    optional = False
    while True:
        origin = get_origin(hint)
        if origin is Annotated:
            hint, *meta = get_args(hint)
            markers.extend(meta)
        elif origin is Union or origin is types.UnionType:
            args = [a for a in get_args(hint) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"only `X | None` unions are supported, not {hint}")
            optional, hint = True, args[0]
        else:
            return hint, tuple(markers), optional


def _prose(doc: str) -> str:
    # Docstrings wrap at the source's line length; kubectl explain re-wraps paragraphs itself.
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


@functools.cache
def docs(cls: type) -> tuple[str, dict[str, str]]:
    """The class docstring, and the string literal after each annotated attribute (as Sphinx
    reads them). From the source, since a dataclass's ``__doc__`` defaults to its signature."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return "", {}
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
    fields: dict[str, str] = {}
    for stmt, after in itertools.pairwise(node.body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            fields[stmt.target.id] = _prose(after.value.value)
    return _prose(ast.get_docstring(node, clean=True) or ""), fields


def is_record(hint: Any) -> bool:
    """Whether ``hint`` is a type with fields: a dataclass or a msgspec Struct."""
    return isinstance(hint, type) and (
        dataclasses.is_dataclass(hint) or issubclass(hint, msgspec.Struct)
    )


def _declared(cls: type) -> list[tuple[str, Any, Callable[[], Any] | None, str | None]]:
    """(name, default or MISSING, factory, the Struct's own JSON name) of each field."""
    if dataclasses.is_dataclass(cls):
        return [
            (f.name, f.default, None if f.default_factory is MISSING else f.default_factory, None)
            for f in dataclasses.fields(cls)
        ]
    if issubclass(cls, msgspec.Struct):
        return [
            (
                f.name,
                MISSING if f.default is msgspec.NODEFAULT else f.default,
                None if f.default_factory is msgspec.NODEFAULT else f.default_factory,
                # a Struct renamed (rename="camel", ...) says its JSON names itself
                f.encode_name if f.encode_name != f.name else None,
            )
            for f in msgspec.structs.fields(cls)
        ]
    raise TypeError(f"{cls!r} is neither a dataclass nor a msgspec Struct")


@functools.cache
def fields(cls: type) -> tuple[Field, ...]:
    """The fields of a dataclass or a msgspec Struct, in declaration order."""
    declared = _declared(cls)
    hints = get_type_hints(cls, include_extras=True)
    _, documented = docs(cls)
    out = []
    for name, default, factory, encoded in declared:
        hint, markers, optional = unwrap(hints[name])
        names = [m.json for m in markers if isinstance(m, Name)]
        if optional and default is MISSING and factory is None:
            raise TypeError(f"{cls.__name__}.{name}: an optional field needs `= None`")
        out.append(
            Field(
                name=name,
                json=names[0] if names else encoded or camel(name),
                hint=hint,
                markers=markers,
                optional=optional,
                default=default,
                factory=factory,
                doc=documented.get(name, ""),
            )
        )
    return tuple(out)


def attribute(cls: type, json: str) -> str:
    """The Python attribute of ``cls`` whose JSON name is ``json``."""
    for f in fields(cls):
        if f.json == json:
            return f.name
    raise TypeError(f"{cls.__name__} has no field with the JSON name {json!r}")
