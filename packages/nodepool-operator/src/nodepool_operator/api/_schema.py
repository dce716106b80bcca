"""CRD schemas from dataclasses: the markers, the generator, and the matching parser.

A kind's Python types are the one source of its API. :func:`kind_schema` turns them into a
structural openAPIV3Schema that the apiserver enforces at admission; :func:`parse` turns an
API object back into those types, filling in the same defaults and checking the same markers.
The parser is the operator's own guard for objects admission never judged (stored before a
rule existed, kept by validation ratcheting, written past a relaxed schema), and it names the
field path the way the apiserver does, so a condition message can point at the field.

Conventions, so that each fact is stated once:

- a field's attribute docstring is its ``description`` (what ``kubectl explain`` shows) and a
  class docstring describes the type; generating a schema with an undocumented field fails;
- a plain dataclass default is also the schema ``default``, so the apiserver and the operator
  fill in the same value; ``X | None = None`` and ``default_factory`` fields are optional with
  no server default; a field without a default is ``required``;
- JSON names are the camelCase of the Python names unless :class:`Name` says otherwise;
- ``Literal[...]`` is an ``enum``; ``dict[str, V]`` is a map (``additionalProperties``);
  ``timedelta`` is a Go duration string such as ``5m``; ``datetime`` is an RFC 3339
  ``date-time``; ``str`` marked :class:`Quantity` is a Kubernetes quantity (int or string).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import re
import textwrap
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

__all__ = [
    "CEL",
    "DURATION_PATTERN",
    "QUANTITY_PATTERN",
    "Condition",
    "InvalidField",
    "ListMapKey",
    "ListSet",
    "MaxItems",
    "MaxLength",
    "MaxProperties",
    "Maximum",
    "MinItems",
    "MinLength",
    "Minimum",
    "Name",
    "ObjectMeta",
    "Pattern",
    "Quantity",
    "format_duration",
    "kind_schema",
    "parse",
    "parse_duration",
    "rules",
    "schema",
    "to_api",
]

T = TypeVar("T")

#: What controller-gen emits for ``resource.Quantity`` (k8s.io/apimachinery).
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: Go's ``time.ParseDuration`` units, without its sign and bare ``0`` (we want ``0s``).
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"


# -- markers (the metadata of ``Annotated[...]``) -----------------------------------------
@dataclass(frozen=True, slots=True)
class Minimum:
    value: int


@dataclass(frozen=True, slots=True)
class Maximum:
    value: int


@dataclass(frozen=True, slots=True)
class MinLength:
    value: int


@dataclass(frozen=True, slots=True)
class MaxLength:
    value: int


@dataclass(frozen=True, slots=True)
class Pattern:
    regex: str


@dataclass(frozen=True, slots=True)
class MinItems:
    value: int


@dataclass(frozen=True, slots=True)
class MaxItems:
    value: int


@dataclass(frozen=True, slots=True)
class MaxProperties:
    value: int


@dataclass(frozen=True, slots=True)
class Name:
    """The JSON name, where camelCase of the Python name is wrong (``publicIP``)."""

    json: str


@dataclass(frozen=True, slots=True)
class Quantity:
    """A Kubernetes quantity (``4``, ``500m``, ``28Gi``): int-or-string with its pattern."""


@dataclass(frozen=True, slots=True)
class ListMapKey:
    """A list of objects merged by ``key`` (``x-kubernetes-list-type: map``), like conditions."""

    key: str


@dataclass(frozen=True, slots=True)
class ListSet:
    """A list of unique scalars (``x-kubernetes-list-type: set``)."""


@dataclass(frozen=True, slots=True)
class CEL:
    """An ``x-kubernetes-validations`` rule, and optionally its Python mirror.

    ``check`` receives the parsed value (the dataclass instance for a class rule) and must
    agree with ``rule``: it is how :func:`parse` guards objects that admission never judged.
    """

    rule: str
    message: str
    field_path: str | None = None
    check: Callable[[Any], bool] | None = field(default=None, compare=False)

    def to_schema(self) -> dict[str, str]:
        out = {"message": self.message, "rule": self.rule}
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        return dict(sorted(out.items()))


_CLASS_RULES: dict[type, tuple[CEL, ...]] = {}


def rules(*cel: CEL) -> Callable[[type[T]], type[T]]:
    """Class decorator: CEL rules on the object as a whole (cross-field checks)."""

    def register(cls: type[T]) -> type[T]:
        _CLASS_RULES[cls] = (*_CLASS_RULES.get(cls, ()), *cel)
        return cls

    return register


class InvalidField(ValueError):
    """A value the schema forbids, at ``path`` (``spec.taints[0].effect``)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail


# -- shared types --------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ObjectMeta:
    """The parts of metav1.ObjectMeta a controller reads. The schema leaves metadata to the
    apiserver (a CRD may not constrain it), so this type renders as a bare object."""

    name: str = ""
    namespace: str | None = None
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: list[str] = field(default_factory=list)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


_CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


@dataclass(frozen=True, kw_only=True)
class Condition:
    """Condition contains details for one aspect of the current state of this API Resource
    (the standard metav1.Condition)."""

    type: Annotated[str, Pattern(_CONDITION_TYPE), MaxLength(316)]
    """Type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: Literal["True", "False", "Unknown"]
    """Status of the condition, one of True, False, Unknown."""
    observed_generation: Annotated[int, Minimum(0)] | None = None
    """The .metadata.generation that the condition was set based upon. For instance, if
    .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration
    is 9, the condition is out of date with respect to the current state of the instance."""
    last_transition_time: datetime
    """The last time the condition transitioned from one status to another. This should be
    when the underlying condition changed. If that is not known, then using the time when the
    API field changed is acceptable."""
    reason: Annotated[
        str, MinLength(1), MaxLength(1024), Pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    ]
    """A programmatic identifier indicating the reason for the condition's last transition,
    in CamelCase. This field may not be empty."""
    message: Annotated[str, MaxLength(32768)]
    """A human readable message indicating details about the transition. This may be an
    empty string."""


# -- field model -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Field:
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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _unwrap(hint: Any) -> tuple[Any, tuple[object, ...], bool]:
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
def _docs(cls: type) -> tuple[str, dict[str, str]]:
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


@functools.cache
def _fields(cls: type) -> tuple[_Field, ...]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = get_type_hints(cls, include_extras=True)
    _, docs = _docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint, markers, optional = _unwrap(hints[f.name])
        names = [m.json for m in markers if isinstance(m, Name)]
        factory = None if f.default_factory is MISSING else f.default_factory
        if optional and f.default is MISSING and factory is None:
            raise TypeError(f"{cls.__name__}.{f.name}: an optional field needs `= None`")
        out.append(
            _Field(
                name=f.name,
                json=names[0] if names else _camel(f.name),
                hint=hint,
                markers=markers,
                optional=optional,
                default=f.default,
                factory=factory,
                doc=docs.get(f.name, ""),
            )
        )
    return tuple(out)


# -- generator -------------------------------------------------------------------------------
def schema(cls: type) -> dict[str, Any]:
    """The structural schema of a dataclass, described by its docstring."""
    return _object(cls)


def kind_schema(cls: type) -> dict[str, Any]:
    """The openAPIV3Schema of a kind: ``cls`` has ``metadata``, ``spec`` and ``status``."""
    node = _object(cls)
    node["properties"] |= {
        "apiVersion": {
            "description": "APIVersion defines the versioned schema of this representation "
            "of an object. Servers should convert recognized schemas to the latest internal "
            "value, and may reject unrecognized values.",
            "type": "string",
        },
        "kind": {
            "description": "Kind is a string value representing the REST resource this "
            "object represents. Servers may infer this from the endpoint the client submits "
            "requests to. Cannot be updated. In CamelCase.",
            "type": "string",
        },
        # the apiserver owns metadata's schema; a CRD may say nothing else about it
        "metadata": {"type": "object"},
    }
    node["properties"] = dict(sorted(node["properties"].items()))
    return node


def _object(cls: type) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in _fields(cls):
        where = f"{cls.__name__}.{f.name}"
        if not f.doc:
            raise TypeError(f"{where}: document the field (it is its `kubectl explain` text)")
        node = _node(f.hint, f.markers, where)
        node["description"] = f.doc
        if f.default is not MISSING and f.default is not None:
            node["default"] = to_api(f.default)
        props[f.json] = dict(sorted(node.items()))
        if f.required:
            required.append(f.json)
    description, _ = _docs(cls)
    if not description:
        raise TypeError(f"{cls.__name__}: document the class (it describes the type)")
    node = {"description": description, "type": "object"}
    node["properties"] = dict(sorted(props.items()))
    if required:
        node["required"] = sorted(required)
    cel = _CLASS_RULES.get(cls, ())
    if cel:
        node["x-kubernetes-validations"] = [r.to_schema() for r in cel]
    return dict(sorted(node.items()))


def _node(hint: Any, markers: tuple[object, ...], where: str) -> dict[str, Any]:
    origin = get_origin(hint)
    node: dict[str, Any]
    if any(isinstance(m, Quantity) for m in markers):
        if hint is not str:
            raise TypeError(f"{where}: Quantity() marks a `str` field")
        node = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    elif hint is bool:
        node = {"type": "boolean"}
    elif hint is int:
        node = {"format": "int64", "type": "integer"}
    elif hint is float:
        node = {"type": "number"}
    elif hint is str:
        node = {"type": "string"}
    elif hint is datetime:
        node = {"format": "date-time", "type": "string"}
    elif hint is timedelta:
        node = {"pattern": DURATION_PATTERN, "type": "string"}
    elif origin is Literal:
        values = get_args(hint)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"{where}: only string enums are supported")
        node = {"enum": list(values), "type": "string"}
    elif origin is list:
        item, item_markers, optional = _unwrap(get_args(hint)[0])
        if optional:
            raise TypeError(f"{where}: list items cannot be None")
        node = {"items": _item(item, item_markers, f"{where}[]"), "type": "array"}
    elif origin is dict:
        key, value = get_args(hint)
        value, value_markers, optional = _unwrap(value)
        if key is not str or optional:
            raise TypeError(f"{where}: maps are dict[str, V] with non-None V")
        node = {"additionalProperties": _item(value, value_markers, f"{where}{{}}")}
        node["type"] = "object"
    elif hint is ObjectMeta:
        node = {"type": "object"}
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        node = _object(hint)
    else:
        raise TypeError(f"{where}: no schema for {hint!r}")
    for marker in markers:
        _apply(node, marker, hint, where)
    return node


def _item(hint: Any, markers: tuple[object, ...], where: str) -> dict[str, Any]:
    return dict(sorted(_node(hint, markers, where).items()))


def _apply(node: dict[str, Any], marker: object, hint: Any, where: str) -> None:
    kind = node.get("type", "int-or-string")

    def need(*kinds: str) -> None:
        if kind not in kinds:
            raise TypeError(f"{where}: {marker!r} does not apply to a {kind}")

    match marker:
        case Minimum(value) | Maximum(value):
            need("integer", "number")
            node["minimum" if isinstance(marker, Minimum) else "maximum"] = value
        case MinLength(value) | MaxLength(value):
            need("string", "int-or-string")
            node["minLength" if isinstance(marker, MinLength) else "maxLength"] = value
        case Pattern(regex):
            need("string")
            node["pattern"] = regex
        case MinItems(value) | MaxItems(value):
            need("array")
            node["minItems" if isinstance(marker, MinItems) else "maxItems"] = value
        case MaxProperties(value):
            need("object")
            node["maxProperties"] = value
        case ListMapKey(key):
            need("array")
            if key not in node["items"].get("required", ()):
                raise TypeError(f"{where}: list map key {key!r} must be a required field")
            node["x-kubernetes-list-map-keys"] = [key]
            node["x-kubernetes-list-type"] = "map"
        case ListSet():
            need("array")
            node["x-kubernetes-list-type"] = "set"
        case CEL():
            node.setdefault("x-kubernetes-validations", []).append(marker.to_schema())
        case Quantity() | Name():
            pass
        case _:
            raise TypeError(f"{where}: unknown marker {marker!r} on {hint!r}")


# -- parser and encoder ----------------------------------------------------------------------
def parse(cls: type[T], data: Any, path: str = "") -> T:
    """``data`` (decoded JSON) as ``cls``, with defaults filled in and markers checked.

    Raises:
        InvalidField: naming the first offending field's path, as the apiserver would.
    """
    return _parse_object(cls, data, path)


def _parse_object(cls: type[T], data: Any, path: str) -> T:
    if not isinstance(data, Mapping):
        raise InvalidField(path, f"Invalid value: must be an object, not {_kind(data)}")
    kwargs: dict[str, Any] = {}
    klass: type = cls  # mypy cannot see that a type[T] is hashable
    for f in _fields(klass):
        at = f"{path}.{f.json}" if path else f.json
        raw = data.get(f.json)
        if raw is None:  # the apiserver prunes a non-nullable null, then defaults
            if f.factory is not None:
                kwargs[f.name] = f.factory()
            elif f.default is not MISSING:
                kwargs[f.name] = f.default
            else:
                raise InvalidField(at, "Required value")
            continue
        kwargs[f.name] = _parse_value(f.hint, f.markers, raw, at)
    obj = cls(**kwargs)
    _run_checks(_CLASS_RULES.get(cls, ()), obj, path)
    return obj


def _parse_value(hint: Any, markers: tuple[object, ...], raw: Any, path: str) -> Any:
    origin = get_origin(hint)
    value: Any
    if any(isinstance(m, Quantity) for m in markers):
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise _wrong_type(path, raw, "a quantity")
        value = str(raw)
        if not re.search(QUANTITY_PATTERN, value):
            raise InvalidField(path, f"Invalid value: {value!r}: must be a quantity like 28Gi")
    elif hint is bool:
        if not isinstance(raw, bool):
            raise _wrong_type(path, raw, "boolean")
        value = raw
    elif hint is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise _wrong_type(path, raw, "integer")
        value = raw
    elif hint is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise _wrong_type(path, raw, "number")
        value = float(raw)
    elif hint is str:
        if not isinstance(raw, str):
            raise _wrong_type(path, raw, "string")
        value = raw
    elif hint is datetime:
        value = _parse_time(raw, path)
    elif hint is timedelta:
        if not isinstance(raw, str):
            raise _wrong_type(path, raw, "string")
        try:
            value = parse_duration(raw)
        except ValueError as err:
            raise InvalidField(path, f"Invalid value: {raw!r}: {err}") from None
    elif origin is Literal:
        if raw not in get_args(hint):
            allowed = ", ".join(repr(v) for v in get_args(hint))
            raise InvalidField(path, f"Unsupported value: {raw!r}: supported values: {allowed}")
        value = raw
    elif origin is list:
        if not isinstance(raw, list):
            raise _wrong_type(path, raw, "array")
        item, item_markers, _ = _unwrap(get_args(hint)[0])
        value = [_parse_value(item, item_markers, v, f"{path}[{i}]") for i, v in enumerate(raw)]
    elif origin is dict:
        if not isinstance(raw, Mapping):
            raise _wrong_type(path, raw, "object")
        item, item_markers, _ = _unwrap(get_args(hint)[1])
        value = {
            str(k): _parse_value(item, item_markers, v, f"{path}[{k}]") for k, v in raw.items()
        }
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        value = _parse_object(hint, raw, path)
    else:
        raise TypeError(f"{path}: no parser for {hint!r}")
    for marker in markers:
        _check(marker, value, path)
    return value


def _check(marker: object, value: Any, path: str) -> None:
    problem = None
    match marker:
        case Minimum(bound) if value < bound:
            problem = f"must be greater than or equal to {bound}"
        case Maximum(bound) if value > bound:
            problem = f"must be less than or equal to {bound}"
        case MinLength(bound) if len(value) < bound:
            problem = f"must be at least {bound} characters long"
        case MaxLength(bound) if len(value) > bound:
            problem = f"must be at most {bound} characters long"
        case Pattern(regex) if not re.search(regex, value):
            problem = f"must match {regex}"
        case MinItems(bound) if len(value) < bound:
            problem = f"must have at least {bound} items"
        case MaxItems(bound) | MaxProperties(bound) if len(value) > bound:
            problem = f"must have at most {bound} items"
        case ListSet() if len(set(value)) != len(value):
            problem = "must not contain duplicates"
        case ListMapKey(key):
            keys = [getattr(v, _attr_for(type(v), key)) for v in value]
            if len(set(keys)) != len(keys):
                problem = f"must not contain two items with the same {key}"
        case CEL():
            _run_checks((marker,), value, path)
    if problem is not None:
        shown = value if isinstance(value, int | str) else _kind(value)
        raise InvalidField(path, f"Invalid value: {shown!r}: {problem}")


def _run_checks(cel: tuple[CEL, ...], value: Any, path: str) -> None:
    for rule in cel:
        if rule.check is not None and not rule.check(value):
            raise InvalidField(path + (rule.field_path or ""), f"Invalid value: {rule.message}")


def _attr_for(cls: type, json: str) -> str:
    return next(f.name for f in _fields(cls) if f.json == json)


def _wrong_type(path: str, raw: Any, want: str) -> InvalidField:
    return InvalidField(path, f"Invalid value: {_kind(raw)}: must be of type {want}")


def _kind(raw: Any) -> str:
    return {dict: "object", list: "array", bool: "boolean", str: "string"}.get(
        type(raw), type(raw).__name__
    )


def _parse_time(raw: Any, path: str) -> datetime:
    if not isinstance(raw, str):
        raise _wrong_type(path, raw, "string")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidField(path, f"Invalid value: {raw!r}: must be an RFC 3339 time") from None
    if when.tzinfo is None:
        raise InvalidField(path, f"Invalid value: {raw!r}: must carry a time zone")
    return when


def to_api(value: Any) -> Any:
    """A parsed value as decoded JSON, ready to send.

    A field is left out where its absence means the same: ``None``, and an empty collection
    from a ``default_factory`` (Go's ``omitempty``). Plain defaults are kept, as the
    apiserver would fill them in anyway. So ``to_api(parse(C, x)) == x`` for admitted ``x``.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in _fields(type(value)):
            item = getattr(value, f.name)
            if item is None or (f.factory is not None and item == f.factory()):
                continue
            out[f.json] = to_api(item)
        return out
    if isinstance(value, datetime):
        # metav1.Time serialises at seconds precision in UTC
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return [to_api(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_api(v) for k, v in value.items()}
    return value


# -- Go durations ----------------------------------------------------------------------------
_UNITS: Final = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> timedelta:
    """A Go duration as the schema admits it (``5m``, ``1h30m``, ``250ms``)."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError("must be a duration like 30s, 5m or 1h30m")
    seconds = sum(Fraction(num) * _UNITS[unit] for num, unit in _PART.findall(text))
    try:
        return timedelta(microseconds=round(seconds * 10**6))
    except OverflowError:
        raise ValueError("duration out of range") from None


def format_duration(value: timedelta) -> str:
    """The shortest Go duration for ``value``: ``5m``, not Go's ``5m0s``."""
    micros = value // timedelta(microseconds=1)
    if micros < 0:
        raise ValueError(f"negative duration {value!r}")
    hours, rest = divmod(micros, 3600 * 10**6)
    minutes, rest = divmod(rest, 60 * 10**6)
    seconds, fraction = divmod(rest, 10**6)
    out = f"{hours}h" if hours else ""
    out += f"{minutes}m" if minutes else ""
    if seconds or fraction or not out:
        out += str(seconds) + (f".{fraction:06d}".rstrip("0") if fraction else "") + "s"
    return out
