"""Typed parsing: an API object (decoded JSON) into its dataclasses and back.

The parser is an operator's guard for objects admission never judged (stored before a rule
existed, kept by validation ratcheting, written past a relaxed schema): it fills in the
schema's defaults, checks the same markers and CEL mirrors, and names the offending field's
path as the apiserver does (``spec.taints[0].effect``), so a condition message can point at it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar, get_args, get_origin

from kubeloop.crd._duration import format_duration, parse_duration
from kubeloop.crd._markers import (
    CEL,
    QUANTITY_PATTERN,
    ListMapKey,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinItems,
    MinLength,
    Pattern,
    Quantity,
    class_rules,
)
from kubeloop.crd._model import attribute, fields, is_record, unwrap

T = TypeVar("T")


class InvalidField(ValueError):
    """A value the schema forbids, at ``path`` (``spec.taints[0].effect``; empty for the
    object itself), with ``detail`` worded as the apiserver words it."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail


def parse(cls: type[T], data: Any, path: str = "") -> T:
    """``data`` (decoded JSON) as ``cls``, with defaults filled in and markers checked.

    Unknown fields are ignored (the apiserver prunes them from a structural schema's objects).

    Raises:
        InvalidField: naming the first offending field's path, as the apiserver would;
            ``path`` prefixes it (to parse a part of an object).
    """
    klass: type = cls  # mypy cannot see that a type[T] is hashable
    value: T = _object_parser(klass)(data, path)
    return value


# Each type is compiled once into a parser (a closure per field, with only the checks its
# markers ask for), so a parse does no type introspection: objects are parsed on every
# reconcile, types defined once.
Parser = Callable[[Any, str], Any]
Check = Callable[[Any, str], None]


@functools.cache
def _object_parser(cls: type) -> Parser:
    plan = []
    for f in fields(cls):
        try:
            parse_value = _value_parser(f.hint, f.markers)
        except TypeError as err:
            raise TypeError(f"{cls.__name__}.{f.name}: {err}") from None
        plan.append((f.name, f.json, f.factory, f.default, parse_value))
    cel = class_rules(cls)

    def parse_object(data: Any, path: str) -> Any:
        if not isinstance(data, Mapping):
            raise InvalidField(path, f"Invalid value: must be an object, not {_kind(data)}")
        kwargs: dict[str, Any] = {}
        for name, json, factory, default, parse_value in plan:
            raw = data.get(json)
            if raw is None:  # the apiserver prunes a non-nullable null, then defaults
                if factory is not None:
                    kwargs[name] = factory()
                elif default is not MISSING:
                    kwargs[name] = default
                else:
                    raise InvalidField(f"{path}.{json}" if path else json, "Required value")
                continue
            kwargs[name] = parse_value(raw, f"{path}.{json}" if path else json)
        obj = cls(**kwargs)
        if cel:
            _run_checks(cel, obj, path)
        return obj

    return parse_object


def _value_parser(hint: Any, markers: tuple[object, ...]) -> Parser:
    base = _base_parser(hint, markers)
    checks = [c for c in map(_marker_check, markers) if c is not None]
    if not checks:
        return base

    def parse_checked(raw: Any, path: str) -> Any:
        value = base(raw, path)
        for check in checks:
            check(value, path)
        return value

    return parse_checked


def _base_parser(hint: Any, markers: tuple[object, ...]) -> Parser:
    origin = get_origin(hint)
    if any(isinstance(m, Quantity) for m in markers):
        return _parse_quantity
    if hint is bool:
        return _scalar(bool, "boolean")
    if hint is int:
        return _scalar(int, "integer")
    if hint is float:
        return _parse_float
    if hint is str:
        return _scalar(str, "string")
    if hint is datetime:
        return _parse_time
    if hint is timedelta:
        return _parse_duration
    if origin is Literal:
        return _literal(get_args(hint))
    if origin is list:
        item = _value_parser(*unwrap(get_args(hint)[0])[:2])

        def parse_list(raw: Any, path: str) -> Any:
            if not isinstance(raw, list):
                raise _wrong_type(path, raw, "array")
            return [item(v, f"{path}[{i}]") for i, v in enumerate(raw)]

        return parse_list
    if origin is dict:
        value = _value_parser(*unwrap(get_args(hint)[1])[:2])

        def parse_map(raw: Any, path: str) -> Any:
            if not isinstance(raw, Mapping):
                raise _wrong_type(path, raw, "object")
            return {str(k): value(v, f"{path}[{k}]") for k, v in raw.items()}

        return parse_map
    if is_record(hint):
        return _object_parser(hint)
    raise TypeError(f"no parser for {hint!r}")


def _scalar(kind: type, name: str) -> Parser:
    def parse_scalar(raw: Any, path: str) -> Any:
        # bool is an int in Python, not in JSON
        if type(raw) is not kind and not (isinstance(raw, kind) and not isinstance(raw, bool)):
            raise _wrong_type(path, raw, name)
        return raw

    return parse_scalar


def _parse_float(raw: Any, path: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _wrong_type(path, raw, "number")
    return float(raw)


_QUANTITY = re.compile(QUANTITY_PATTERN)


def _parse_quantity(raw: Any, path: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise _wrong_type(path, raw, "a quantity")
    value = str(raw)
    if not _QUANTITY.search(value):
        raise InvalidField(path, f"Invalid value: {value!r}: must be a quantity like 28Gi")
    return value


def _parse_duration(raw: Any, path: str) -> timedelta:
    if not isinstance(raw, str):
        raise _wrong_type(path, raw, "string")
    try:
        return parse_duration(raw)
    except ValueError as err:
        raise InvalidField(path, f"Invalid value: {raw!r}: {err}") from None


def _literal(allowed: tuple[Any, ...]) -> Parser:
    def parse_literal(raw: Any, path: str) -> Any:
        if raw not in allowed:
            listed = ", ".join(repr(v) for v in allowed)
            raise InvalidField(path, f"Unsupported value: {raw!r}: supported values: {listed}")
        return raw

    return parse_literal


def _marker_check(marker: object) -> Check | None:
    match marker:
        case Minimum(bound):
            return _refuse(lambda v: v < bound, f"must be greater than or equal to {bound}")
        case Maximum(bound):
            return _refuse(lambda v: v > bound, f"must be less than or equal to {bound}")
        case MinLength(bound):
            return _refuse(lambda v: len(v) < bound, f"must be at least {bound} characters long")
        case MaxLength(bound):
            return _refuse(lambda v: len(v) > bound, f"must be at most {bound} characters long")
        case Pattern(regex):
            compiled = re.compile(regex)
            return _refuse(lambda v: not compiled.search(v), f"must match {regex}")
        case MinItems(bound):
            return _refuse(lambda v: len(v) < bound, f"must have at least {bound} items")
        case MaxItems(bound) | MaxProperties(bound):
            return _refuse(lambda v: len(v) > bound, f"must have at most {bound} items")
        case ListSet():
            return lambda value, path: _unique(value, path)
        case ListMapKey(key):
            return lambda value, path: _unique(
                [getattr(v, attribute(type(v), key)) for v in value], path, key
            )
        case CEL():
            rules = (marker,)
            return lambda value, path: _run_checks(rules, value, path)
    return None


def _refuse(bad: Callable[[Any], bool], problem: str) -> Check:
    def check(value: Any, path: str) -> None:
        if bad(value):
            shown = value if isinstance(value, int | str) else _kind(value)
            raise InvalidField(path, f"Invalid value: {shown!r}: {problem}")

    return check


def _unique(keys: list[Any], path: str, key: str | None = None) -> None:
    # as the apiserver: the second of two equal items is the duplicate, by its index
    seen = set()
    for index, k in enumerate(keys):
        if k in seen:
            shown = repr(k) if key is None else f"{key}={k!r}"
            raise InvalidField(f"{path}[{index}]", f"Duplicate value: {shown}")
        seen.add(k)


def _run_checks(cel: tuple[CEL, ...], value: Any, path: str) -> None:
    for rule in cel:
        if rule.check is not None and not rule.check(value):
            at = path + (rule.field_path or "")
            # a rule on the root names its field without the leading dot (``low``, not ``.low``)
            raise InvalidField(at if path else at.lstrip("."), f"Invalid value: {rule.message}")


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
    kind: type = type(value)
    if is_record(kind):
        out = {}
        for f in fields(kind):
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
