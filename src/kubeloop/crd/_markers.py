"""Field markers: what ``Annotated[T, ...]`` may carry on a CRD type's field, each rendered
into the schema by the generator and checked by the parser, so one marker is one rule in both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

T = TypeVar("T")

#: What controller-gen emits for ``resource.Quantity`` (k8s.io/apimachinery).
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


@dataclass(frozen=True, slots=True)
class Minimum:
    """``minimum``: the smallest allowed number."""

    value: int


@dataclass(frozen=True, slots=True)
class Maximum:
    """``maximum``: the largest allowed number."""

    value: int


@dataclass(frozen=True, slots=True)
class MinLength:
    """``minLength`` of a string."""

    value: int


@dataclass(frozen=True, slots=True)
class MaxLength:
    """``maxLength`` of a string (the apiserver needs it to bound a CEL rule's cost)."""

    value: int


@dataclass(frozen=True, slots=True)
class Pattern:
    """``pattern``: a regular expression the string must match (searched, as the apiserver
    does: anchor it with ``^...$``)."""

    regex: str


@dataclass(frozen=True, slots=True)
class MinItems:
    """``minItems`` of a list."""

    value: int


@dataclass(frozen=True, slots=True)
class MaxItems:
    """``maxItems`` of a list."""

    value: int


@dataclass(frozen=True, slots=True)
class MaxProperties:
    """``maxProperties`` of a map."""

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
    agree with ``rule``: it is how :func:`~kubeloop.crd.parse` guards objects that admission
    never judged. Write the two side by side, once, next to the field; or take a rule from
    the builders in :mod:`kubeloop.crd` (:func:`~kubeloop.crd.less_or_equal`, ...), which
    derive both from one definition.
    """

    rule: str
    message: str
    field_path: str | None = None
    check: Callable[[Any], bool] | None = field(default=None, compare=False)

    def to_schema(self) -> dict[str, str]:
        """The rule as one item of ``x-kubernetes-validations``."""
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


def class_rules(cls: type) -> tuple[CEL, ...]:
    """The rules :func:`rules` registered on ``cls``."""
    return _CLASS_RULES.get(cls, ())
