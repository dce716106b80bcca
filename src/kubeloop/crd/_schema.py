"""The generator: a dataclass and its markers as a structural openAPIV3Schema.

Each fact is stated once, in the type: a field's attribute docstring is its ``description``
(what ``kubectl explain`` shows; an undocumented field or class is refused), a plain default
is the schema's ``default`` (so the apiserver and the parser fill in the same value), a field
without a default is ``required``, ``Literal[...]`` is an ``enum``, ``dict[str, V]`` a map,
``timedelta`` a Go duration string and ``datetime`` an RFC 3339 ``date-time``.
"""

from __future__ import annotations

from dataclasses import MISSING
from datetime import datetime, timedelta
from typing import Any, Literal, get_args, get_origin

from kubeloop.crd._duration import DURATION_PATTERN
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
    Name,
    Pattern,
    Quantity,
    class_rules,
)
from kubeloop.crd._meta import ObjectMeta
from kubeloop.crd._model import docs, fields, is_record, unwrap
from kubeloop.crd._parse import to_api


def schema(cls: type) -> dict[str, Any]:
    """The structural schema of a dataclass, described by its docstring.

    Raises:
        TypeError: a field or the class is undocumented, a type has no schema, or a marker
            does not fit its field (naming ``Class.field``).
    """
    return _object(cls)


def kind_schema(cls: type) -> dict[str, Any]:
    """The openAPIV3Schema of a kind: ``cls`` has ``metadata`` and ``spec``, and may have
    ``status``; ``apiVersion`` and ``kind`` are added as every kind has them."""
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
    for f in fields(cls):
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
    description, _ = docs(cls)
    if not description:
        raise TypeError(f"{cls.__name__}: document the class (it describes the type)")
    node = {"description": description, "type": "object"}
    node["properties"] = dict(sorted(props.items()))
    if required:
        node["required"] = sorted(required)
    cel = class_rules(cls)
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
        item, item_markers, optional = unwrap(get_args(hint)[0])
        if optional:
            raise TypeError(f"{where}: list items cannot be None")
        node = {"items": _item(item, item_markers, f"{where}[]"), "type": "array"}
    elif origin is dict:
        key, value = get_args(hint)
        value, value_markers, optional = unwrap(value)
        if key is not str or optional:
            raise TypeError(f"{where}: maps are dict[str, V] with non-None V")
        node = {"additionalProperties": _item(value, value_markers, f"{where}{{}}")}
        node["type"] = "object"
    elif hint is ObjectMeta:
        node = {"type": "object"}
    elif is_record(hint):
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
