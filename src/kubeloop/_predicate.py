"""Predicates: which events are worth a reconcile.

A predicate is any function ``Callable[[Event], bool]``; ``True`` lets the event
through. There is no base class or registration: a plain function, a lambda or a
bound method already is a predicate, and the combinators below take and return
plain functions::

    def big(event: Event) -> bool:
        return event.obj["spec"].get("replicas", 0) > 10

    predicates = [all_of(generation_changed, big)]

:func:`object_filter` lifts a test on one object to all four event kinds, as
controller-runtime's ``NewPredicateFuncs`` does.

Paths are dotted (``spec.replicas``). A key that itself contains a dot, such as
a label key, goes in brackets: ``metadata.labels[app.kubernetes.io/name]``.
:func:`changed_paths` prints paths in that form, so its output can be fed back
to :func:`field_changed`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from kubeloop._event import Event, Updated
from kubeloop._resource import Object

Predicate: TypeAlias = Callable[[Event], bool]

#: What :func:`changed_paths` skips by default: fields every write changes, so
#: naming them would hide the field that actually keeps changing.
DEFAULT_IGNORED_PATHS: Final = (
    "metadata.resourceVersion",
    "metadata.managedFields",
    "metadata.generation",
)

_MISSING: Final = object()


def _named(pred: Predicate, name: str) -> Predicate:
    # Readable names in logs and reprs instead of "<locals>.pred".
    pred.__name__ = pred.__qualname__ = name
    return pred


def _metadata(obj: Object) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


# --- single-event predicates -------------------------------------------------


def generation_changed(event: Event) -> bool:
    """Pass updates whose ``metadata.generation`` changed; pass every other event.

    The API server bumps generation on spec writes only (for custom resources
    with a status subresource), so this drops status-, label- and
    annotation-only updates, and also periodic resyncs (old == new). A controller
    that relies on it therefore does not repair a status someone wiped until the
    spec changes; combine it with :func:`any_of` if that matters. Kinds that
    have no generation (ConfigMap, Secret) never pass an update.
    """
    if isinstance(event, Updated):
        return _metadata(event.old).get("generation") != _metadata(event.new).get("generation")
    return True


def resource_version_changed(event: Event) -> bool:
    """Pass updates whose ``metadata.resourceVersion`` changed (drops resyncs)."""
    if isinstance(event, Updated):
        old_rv = _metadata(event.old).get("resourceVersion")
        return old_rv != _metadata(event.new).get("resourceVersion")
    return True


def labels_changed(event: Event) -> bool:
    """Pass updates whose labels changed; pass every other event."""
    if isinstance(event, Updated):
        # Absent and empty are the same label set.
        old = _metadata(event.old).get("labels") or {}
        return bool(old != (_metadata(event.new).get("labels") or {}))
    return True


def annotations_changed(event: Event) -> bool:
    """Pass updates whose annotations changed; pass every other event."""
    if isinstance(event, Updated):
        old = _metadata(event.old).get("annotations") or {}
        return bool(old != (_metadata(event.new).get("annotations") or {}))
    return True


def field_changed(path: str) -> Predicate:
    """Pass updates where the value at ``path`` changed; pass every other event.

    A field that appears or disappears counts as changed. ``path`` is dotted,
    e.g. ``"spec.replicas"`` or ``"metadata.labels[app.kubernetes.io/name]"``.
    """
    segments = _split_path(path)

    def pred(event: Event) -> bool:
        if isinstance(event, Updated):
            return bool(_lookup(event.old, segments) != _lookup(event.new, segments))
        return True

    return _named(pred, f"field_changed({path!r})")


def object_filter(test: Callable[[Object], bool]) -> Predicate:
    """A predicate that applies ``test`` to the event's object (the new one for
    updates), whatever the event kind."""

    def pred(event: Event) -> bool:
        return test(event.obj)

    return _named(pred, f"object_filter({getattr(test, '__name__', test)!r})")


def label_selector(selector: Mapping[str, Any]) -> Predicate:
    """Pass events whose object's labels match ``selector`` (the new object for updates).

    ``selector`` is either plain matchLabels, ``{"app": "web"}``, or a full
    ``metav1.LabelSelector``, ``{"matchLabels": {...}, "matchExpressions":
    [{"key": ..., "operator": "In" | "NotIn" | "Exists" | "DoesNotExist",
    "values": [...]}]}``. An empty selector matches everything, as in Kubernetes.
    A malformed selector raises :class:`ValueError` here, not on the first event.
    """
    matches = _compile_selector(selector)

    def pred(event: Event) -> bool:
        labels = _metadata(event.obj).get("labels")
        return matches(labels if isinstance(labels, dict) else {})

    return _named(pred, f"label_selector({dict(selector)!r})")


# --- combinators -------------------------------------------------------------


def all_of(*preds: Predicate) -> Predicate:
    """Pass when every predicate passes (short-circuits; ``all_of()`` passes all)."""

    def pred(event: Event) -> bool:
        return all(p(event) for p in preds)

    return _named(pred, f"all_of({', '.join(_name(p) for p in preds)})")


def any_of(*preds: Predicate) -> Predicate:
    """Pass when at least one predicate passes (short-circuits; ``any_of()`` passes none)."""

    def pred(event: Event) -> bool:
        return any(p(event) for p in preds)

    return _named(pred, f"any_of({', '.join(_name(p) for p in preds)})")


def not_(inner: Predicate) -> Predicate:
    """Pass exactly the events ``inner`` drops."""

    def pred(event: Event) -> bool:
        return not inner(event)

    return _named(pred, f"not_({_name(inner)})")


def _name(pred: Predicate) -> str:
    return getattr(pred, "__name__", None) or repr(pred)


# --- label selectors ---------------------------------------------------------

_SET_OPERATORS: Final = frozenset({"In", "NotIn"})
_EXISTENCE_OPERATORS: Final = frozenset({"Exists", "DoesNotExist"})


def _is_label_selector(selector: Mapping[str, Any]) -> bool:
    # Label values are strings, so a non-string under these keys means a
    # LabelSelector rather than a label literally named "matchLabels".
    return bool(selector) and all(
        key in ("matchLabels", "matchExpressions") and not isinstance(value, str)
        for key, value in selector.items()
    )


def _compile_selector(selector: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    if not isinstance(selector, Mapping):
        raise ValueError(f"label selector must be a mapping, got {type(selector).__name__}")
    if _is_label_selector(selector):
        match_labels = selector.get("matchLabels") or {}
        expressions = selector.get("matchExpressions") or []
    else:
        match_labels, expressions = selector, []

    if not isinstance(match_labels, Mapping):
        raise ValueError(f"matchLabels must be a mapping, got {type(match_labels).__name__}")
    for key, value in match_labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"matchLabels entry {key!r}: {value!r} must map a string to a string")
    required = dict(match_labels)

    if not isinstance(expressions, list):
        raise ValueError(f"matchExpressions must be a list, got {type(expressions).__name__}")
    requirements = [_compile_expression(expr) for expr in expressions]

    def matches(labels: Mapping[str, Any]) -> bool:
        return all(labels.get(k) == v for k, v in required.items()) and all(
            req(labels) for req in requirements
        )

    return matches


def _compile_expression(expr: Any) -> Callable[[Mapping[str, Any]], bool]:
    if not isinstance(expr, Mapping):
        raise ValueError(f"matchExpressions entry must be a mapping, got {expr!r}")
    key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not key:
        raise ValueError(f"matchExpressions entry {dict(expr)!r} needs a non-empty 'key'")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"matchExpressions {key!r}: 'values' must be a list of strings")
    if operator in _SET_OPERATORS:
        if not values:
            raise ValueError(f"matchExpressions {key!r}: operator {operator} needs values")
    elif operator in _EXISTENCE_OPERATORS:
        if values:
            raise ValueError(f"matchExpressions {key!r}: operator {operator} takes no values")
    else:
        raise ValueError(
            f"matchExpressions {key!r}: unknown operator {operator!r} "
            "(want In, NotIn, Exists or DoesNotExist)"
        )

    allowed = frozenset(values)
    if operator == "In":
        return lambda labels: key in labels and labels[key] in allowed
    if operator == "NotIn":
        # As in Kubernetes, an absent label satisfies NotIn.
        return lambda labels: key not in labels or labels[key] not in allowed
    if operator == "Exists":
        return lambda labels: key in labels
    return lambda labels: key not in labels


# --- paths and diffs ---------------------------------------------------------

_PATH_RE: Final = re.compile(r"(?:[^.\[\]]+|\[[^\]]+\])(?:\.[^.\[\]]+|\.?\[[^\]]+\])*")
_SEGMENT_RE: Final = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")


def _split_path(path: str) -> tuple[str, ...]:
    if not isinstance(path, str) or not _PATH_RE.fullmatch(path):
        raise ValueError(
            f"invalid field path {path!r}: want dotted keys such as 'spec.replicas', "
            "with keys containing dots in brackets: 'metadata.labels[app.kubernetes.io/name]'"
        )
    return tuple(bracketed or plain for bracketed, plain in _SEGMENT_RE.findall(path))


def _join_path(segments: Iterable[str]) -> str:
    out = ""
    for seg in segments:
        if "." in seg or "[" in seg or "]" in seg or not seg:
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else seg
    return out


def _lookup(obj: Any, segments: tuple[str, ...]) -> Any:
    for seg in segments:
        if not isinstance(obj, dict) or seg not in obj:
            return _MISSING
        obj = obj[seg]
    return obj


def changed_paths(
    old: Object,
    new: Object,
    *,
    ignore: Iterable[str] = DEFAULT_IGNORED_PATHS,
) -> list[str]:
    """The dotted paths of the leaves that differ between ``old`` and ``new``, sorted.

    Maps are compared key by key; lists and scalars are compared whole, so a
    change inside ``status.conditions`` is reported as ``status.conditions``.
    A field added or removed counts as differing. A path in ``ignore`` hides
    itself and everything below it.
    """
    ignored = frozenset(_split_path(p) for p in ignore)
    found: list[tuple[str, ...]] = []
    _diff(old, new, (), ignored, found)
    return [_join_path(p) for p in found]


def _diff(
    old: Any,
    new: Any,
    prefix: tuple[str, ...],
    ignored: frozenset[tuple[str, ...]],
    found: list[tuple[str, ...]],
) -> None:
    # Ancestors were checked on the way down, so an exact match is enough here.
    if prefix in ignored:
        return
    old_is_map, new_is_map = isinstance(old, dict), isinstance(new, dict)
    if old_is_map and new_is_map:
        for key in sorted(old.keys() | new.keys()):
            _diff(old.get(key, _MISSING), new.get(key, _MISSING), (*prefix, key), ignored, found)
    elif (old_is_map and new is _MISSING) or (new_is_map and old is _MISSING):
        # A whole map appeared or vanished: name its leaves, or the map if empty.
        present = old if old_is_map else new
        if not present:
            found.append(prefix)
        for key in sorted(present):
            pair = (present[key], _MISSING) if old_is_map else (_MISSING, present[key])
            _diff(*pair, (*prefix, key), ignored, found)
    elif old_is_map or new_is_map or old != new:
        found.append(prefix)
