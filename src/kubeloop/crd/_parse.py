"""Typed parsing: an API object (decoded JSON) into its dataclasses and back.

The parser is an operator's guard for objects admission never judged (stored before a rule
existed, kept by validation ratcheting, written past a relaxed schema): it fills in the
schema's defaults, checks the same markers and CEL mirrors, and names the offending field's
path as the apiserver does (``spec.taints[0].effect``), so a condition message can point at it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
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
from kubeloop.crd._model import attribute, fields, unwrap

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
    return _parse_object(cls, data, path)


def _parse_object(cls: type[T], data: Any, path: str) -> T:
    if not isinstance(data, Mapping):
        raise InvalidField(path, f"Invalid value: must be an object, not {_kind(data)}")
    kwargs: dict[str, Any] = {}
    klass: type = cls  # mypy cannot see that a type[T] is hashable
    for f in fields(klass):
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
    _run_checks(class_rules(klass), obj, path)
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
        item, item_markers, _ = unwrap(get_args(hint)[0])
        value = [_parse_value(item, item_markers, v, f"{path}[{i}]") for i, v in enumerate(raw)]
    elif origin is dict:
        if not isinstance(raw, Mapping):
            raise _wrong_type(path, raw, "object")
        item, item_markers, _ = unwrap(get_args(hint)[1])
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
        case ListSet():
            _unique(value, value, path)
        case ListMapKey(key):
            _unique([getattr(v, attribute(type(v), key)) for v in value], value, path, key)
        case CEL():
            _run_checks((marker,), value, path)
    if problem is not None:
        shown = value if isinstance(value, int | str) else _kind(value)
        raise InvalidField(path, f"Invalid value: {shown!r}: {problem}")


def _unique(keys: list[Any], items: list[Any], path: str, key: str | None = None) -> None:
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
            raise InvalidField(path + (rule.field_path or ""), f"Invalid value: {rule.message}")


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
        for f in fields(type(value)):
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
