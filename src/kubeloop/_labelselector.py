"""Label selectors in the apiserver's string form, matched in memory.

A cache read with ``label_selector="app=web,tier in (a,b)"`` is served from the kind's
one informer, filtered here, instead of opening a LIST+WATCH per distinct selector (as
controller-runtime's cache does). The grammar is the apiserver's (``labels.Parse``):
requirements separated by commas, each one of ``key``, ``!key``, ``key=value``,
``key==value``, ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N``,
``key<N``. A selector this module cannot parse raises :class:`ValueError` naming it, at
the read, rather than matching something else than the apiserver would.

Equality requirements also give :attr:`Selector.needles`: the exact bytes ``"key":"value"``
as a compact JSON encoder writes them. An object whose stored JSON lacks one of them
cannot match, so the store skips it without decoding it (see ``Store.list_containing``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

_Test = Callable[[Mapping[str, Any]], bool]

_SET = re.compile(r"^\s*([^\s!=<>(),]+)\s+(in|notin)\s*\(([^()]*)\)\s*$")
_BINARY = re.compile(r"^\s*([^\s!=<>(),]+)\s*(==|=|!=|>|<)\s*([^\s!=<>(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=<>(),]+)\s*$")


@dataclass(frozen=True)
class Selector:
    """A parsed label selector."""

    text: str
    tests: tuple[_Test, ...]
    #: ``"key":"value"`` byte strings every matching object's JSON contains.
    needles: tuple[bytes, ...]
    #: The ``key=value`` (or ``key==value``) requirements, in order: the labels an object
    #: must carry to match, e.g. to put on objects made for this selector's scope.
    equalities: tuple[tuple[str, str], ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(test(labels) for test in self.tests)


def _split(text: str) -> list[str]:
    """Requirements split at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _needle(key: str, value: str) -> bytes:
    return msgspec.json.encode(key) + b":" + msgspec.json.encode(value)


def parse(text: str) -> Selector:
    """Parse ``text`` (the ``labelSelector`` query parameter's form)."""
    tests: list[_Test] = []
    needles: list[bytes] = []
    equalities: list[tuple[str, str]] = []
    if text.strip():
        for part in _split(text):
            tests.append(_requirement(text, part, needles, equalities))
    return Selector(text, tuple(tests), tuple(needles), tuple(equalities))


def _requirement(
    text: str, part: str, needles: list[bytes], equalities: list[tuple[str, str]]
) -> _Test:
    if m := _SET.match(part):
        key, op = m.group(1), m.group(2)
        values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
        if op == "in":
            if len(values) == 1:
                needles.append(_needle(key, next(iter(values))))
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _BINARY.match(part):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op in ("=", "=="):
            needles.append(_needle(key, value))
            equalities.append((key, value))
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise ValueError(
                f"label selector {text!r}: {part.strip()!r} compares with a non-integer"
            ) from None
        return _compare(key, op, bound)
    if m := _EXISTS.match(part):
        negated, key = m.group(1) == "!", m.group(2)
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise ValueError(f"label selector {text!r}: cannot parse {part.strip()!r}")


def _compare(key: str, op: str, bound: int) -> _Test:
    def test(labels: Mapping[str, Any]) -> bool:
        try:
            have = int(labels[key])
        except (KeyError, TypeError, ValueError):
            return False  # as the apiserver: absent or not an integer never matches
        return have > bound if op == ">" else have < bound

    return test
