"""CEL rules derived from one definition: each builder writes the ``x-kubernetes-validations``
rule the apiserver runs at admission and the Python check :func:`~kubeloop.crd.parse` runs,
from the same arguments, so the two cannot say different things.

Field rules go in ``Annotated[...]`` next to the field; rules over several fields (named by
their JSON names) go in :func:`~kubeloop.crd.rules` on the class. A rule no builder covers is
a :class:`~kubeloop.crd.CEL` with its ``check`` written beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from kubeloop.crd._duration import format_duration
from kubeloop.crd._markers import CEL
from kubeloop.crd._model import attribute


def _literal(text: str) -> str:
    # CEL's single-quoted string; our rules never need an escape, so refuse one outright
    if "'" in text or "\\'" in text or "\n" in text:
        raise ValueError(f"{text!r}: a CEL literal here may not hold a quote or a newline")
    return f"'{text}'"


def _get(obj: Any, json: str) -> Any:
    return getattr(obj, attribute(type(obj), json))


def min_duration(bound: timedelta) -> CEL:
    """A ``timedelta`` field of at least ``bound``."""
    text = format_duration(bound)
    return CEL(
        f"duration(self) >= duration({_literal(text)})",
        f"must be at least {text}",
        check=lambda value: value >= bound,
    )


def not_negative() -> CEL:
    """A :class:`~kubeloop.crd.Quantity` field that is not below zero."""
    return CEL(
        "!string(self).startsWith('-')",
        "must not be negative",
        check=lambda value: not str(value).startswith("-"),
    )


def keys_match(regex: str, *, max_length: int, message: str) -> CEL:
    """A map whose keys are at most ``max_length`` long and match ``regex`` (searched, as
    CEL's ``matches`` does: anchor it)."""
    compiled = re.compile(regex)
    return CEL(
        f"self.all(k, k.size() <= {max_length} && k.matches(r{_literal(regex)}))",
        message,
        check=lambda value: all(len(k) <= max_length and compiled.search(k) for k in value),
    )


def key_length(minimum: int, maximum: int, *, message: str) -> CEL:
    """A map whose keys are ``minimum`` to ``maximum`` characters long."""
    return CEL(
        f"self.all(k, k.size() >= {minimum} && k.size() <= {maximum})",
        message,
        check=lambda value: all(minimum <= len(k) <= maximum for k in value),
    )


def reserved_keys(*, prefixes: Iterable[str] = (), keys: Iterable[str] = (), message: str) -> CEL:
    """A map with no key starting with one of ``prefixes`` nor equal to one of ``keys``."""
    prefixes, keys = tuple(prefixes), tuple(keys)
    tests = [f"k.startsWith({_literal(p)})" for p in prefixes]
    tests += [f"k == {_literal(k)}" for k in keys]
    if not tests:
        raise ValueError("reserved_keys needs a prefix or a key")
    return CEL(
        f"!self.exists(k, {' || '.join(tests)})",
        message,
        check=lambda value: not any(k.startswith(prefixes) or k in keys for k in value),
    )


def all_found_in(regex: str, allowed: Iterable[str], *, message: str) -> CEL:
    """A string in which every match of ``regex`` is one of ``allowed`` (placeholders in a
    template, say)."""
    allowed = tuple(allowed)
    compiled = re.compile(regex)
    listed = ", ".join(_literal(a) for a in allowed)
    return CEL(
        f"self.findAll(r{_literal(regex)}).all(p, p in [{listed}])",
        message,
        check=lambda text: all(m.group(0) in allowed for m in compiled.finditer(text)),
    )


def less_or_equal(smaller: str, larger: str, *, message: str | None = None) -> CEL:
    """A class rule: field ``smaller`` at most field ``larger`` (JSON names; both with a
    default or required, so both are always set); the error points at ``smaller``."""
    return CEL(
        f"self.{smaller} <= self.{larger}",
        message or f"{smaller} must be less than or equal to {larger}",
        field_path=f".{smaller}",
        check=lambda obj: _get(obj, smaller) <= _get(obj, larger),
    )


def exactly_one_of(*names: str, message: str | None = None) -> CEL:
    """A class rule: exactly one of the optional fields ``names`` (JSON names, each
    ``X | None = None``) is set."""
    if len(names) < 2:
        raise ValueError("exactly_one_of needs two fields or more")
    tests = [f"has(self.{n})" for n in names]
    rule = (
        f"{tests[0]} != {tests[1]}"
        if len(names) == 2
        else f"[{', '.join(tests)}].filter(x, x).size() == 1"
    )
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    return CEL(
        rule,
        message or f"exactly one of {listed} must be set",
        check=lambda obj: sum(_get(obj, n) is not None for n in names) == 1,
    )


def none_of(*names: str, message: str) -> CEL:
    """A class rule: none of the optional fields ``names`` (JSON names, each
    ``X | None = None``) is set (fields reserved for later, say)."""
    if not names:
        raise ValueError("none_of needs a field")
    return CEL(
        " && ".join(f"!has(self.{n})" for n in names),
        message,
        check=lambda obj: all(_get(obj, n) is None for n in names),
    )
