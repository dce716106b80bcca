"""Resource quantities: Kubernetes ``resource.Quantity`` strings as exact integers.

A quantity is ``<sign><number><suffix>`` where the suffix is binary SI (``Ki Mi Gi Ti Pi Ei``),
decimal SI (``n u m k M G T P E``), a decimal exponent (``e3``, ``E-2``) or nothing. The value is
parsed as an exact :class:`~fractions.Fraction` and then rounded *up* to the unit we keep, as
``Quantity.Value()`` and ``MilliValue()`` do, so ``"0.1m"`` of cpu is one millicore.

:class:`Resources` is the vector the scheduler reasons about: cpu in millicores, memory and
ephemeral storage in bytes, a pod count, and any extended resources (``nvidia.com/gpu``,
``hugepages-2Mi``) as integers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "QuantityLike",
    "Resources",
    "format_bytes",
    "format_cpu",
    "format_resource",
    "parse_bytes",
    "parse_cpu",
    "parse_quantity",
]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)", re.ASCII)
# Larger exponents overflow int64 in Kubernetes anyway; the cap stops "1e999999999" from
# building a gigantic integer.
_MAX_EXPONENT = 60

QuantityLike = str | int
_BinaryOp = Callable[[int, int], int]


def parse_quantity(quantity: QuantityLike) -> Fraction:
    """Parse a quantity (``"500m"``, ``"28Gi"``, ``"1e3"``, ``2``) to its exact value.

    Raises:
        ValueError: naming the bad string, e.g. for ``"28Gb"`` or ``""``.
    """
    if isinstance(quantity, bool):  # bool is an int subclass; True is never a quantity
        raise ValueError(f"invalid quantity {quantity!r}: not a number")
    if isinstance(quantity, int):
        return Fraction(quantity)
    match = _NUMBER.fullmatch(quantity)
    if match is None:
        raise ValueError(f"invalid quantity {quantity!r}: expected a number such as 500m or 28Gi")
    sign, number, suffix = match.groups()
    value = Fraction(number) * _multiplier(quantity, suffix)
    return -value if sign == "-" else value


def _multiplier(quantity: str, suffix: str) -> Fraction:
    if suffix in _BINARY:
        return Fraction(_BINARY[suffix])
    if suffix in _DECIMAL:
        return _DECIMAL[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise ValueError(
            f"invalid quantity {quantity!r}: unknown suffix {suffix!r} "
            "(use Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent such as 1e3)"
        )
    power = int(exponent.group(1))
    if abs(power) > _MAX_EXPONENT:
        raise ValueError(f"invalid quantity {quantity!r}: exponent out of range")
    return Fraction(10) ** power


def _non_negative(quantity: QuantityLike, value: Fraction) -> Fraction:
    if value < 0:
        raise ValueError(f"invalid quantity {quantity!r}: must not be negative")
    return value


def parse_cpu(quantity: QuantityLike) -> int:
    """Parse a cpu quantity to millicores: ``"500m"`` → 500, ``"1.5"`` → 1500, ``2`` → 2000."""
    return math.ceil(_non_negative(quantity, parse_quantity(quantity)) * 1000)


def parse_bytes(quantity: QuantityLike) -> int:
    """Parse a memory or storage quantity to bytes: ``"28Gi"`` → 30064771072, ``"1e3"`` → 1000."""
    return math.ceil(_non_negative(quantity, parse_quantity(quantity)))


def format_cpu(millicores: int) -> str:
    """Render millicores the way a manifest would: 2000 → ``"2"``, 1500 → ``"1500m"``."""
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m"


_BINARY_DESCENDING = sorted(_BINARY.items(), key=lambda item: item[1], reverse=True)


def format_bytes(amount: int) -> str:
    """Render bytes for a human: ``"96Gi"``, ``"3100Mi"``, or ``"1.1Gi"`` when not exact.

    The largest binary unit that divides the amount exactly is used when that keeps the number
    short; otherwise the amount is rounded to one decimal in the largest unit not above it.
    """
    if amount < 0:
        return "-" + format_bytes(-amount)
    for suffix, unit in _BINARY_DESCENDING:
        if amount >= unit and amount % unit == 0 and amount // unit < 10_000:
            return f"{amount // unit}{suffix}"
    for suffix, unit in _BINARY_DESCENDING:
        if amount >= unit:
            return f"{amount / unit:.1f}{suffix}"
    return str(amount)


_BYTE_RESOURCES = ("memory", "ephemeral-storage")


def format_resource(name: str, amount: int) -> str:
    """Render an amount of the named resource in its natural unit (cores, bytes or a count)."""
    if name == "cpu":
        return format_cpu(amount)
    if name in _BYTE_RESOURCES or name.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each schedulable resource; a request, a node's allocatable or its free room.

    Attributes:
        cpu: millicores.
        memory: bytes.
        ephemeral_storage: bytes.
        pods: pod slots (a pod request is always 1; kubelet's default node limit is 110).
        extended: other resources as sorted ``(name, amount)`` pairs, e.g. ``nvidia.com/gpu``.
            A tuple, not a dict, so the value stays hashable and usable as a cache key.
    """

    cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_resource_list(cls, resources: Mapping[str, object]) -> Resources:
        """Build from an API ``ResourceList`` such as a node's ``status.allocatable``.

        Raises:
            ValueError: if a value is not a valid quantity.
        """
        extended: dict[str, int] = {}
        fields = {"cpu": 0, "memory": 0, "ephemeral-storage": 0, "pods": 0}
        for name, raw in resources.items():
            if not isinstance(raw, str | int):
                raise ValueError(f"invalid quantity {raw!r} for {name}: expected a string")
            if name == "cpu":
                fields[name] = parse_cpu(raw)
            elif name in fields:
                fields[name] = parse_bytes(raw)
            else:
                extended[name] = parse_bytes(raw)
        return cls(
            cpu=fields["cpu"],
            memory=fields["memory"],
            ephemeral_storage=fields["ephemeral-storage"],
            pods=fields["pods"],
            extended=_sorted_pairs(extended),
        )

    def items(self) -> Iterator[tuple[str, int]]:
        """Yield ``(resource name, amount)`` with API names, standard resources first."""
        yield "cpu", self.cpu
        yield "memory", self.memory
        yield "ephemeral-storage", self.ephemeral_storage
        yield "pods", self.pods
        yield from self.extended

    def get(self, name: str) -> int:
        """The amount of one resource by its API name; 0 when absent."""
        for key, amount in self.items():
            if key == name:
                return amount
        return 0

    def __add__(self, other: Resources) -> Resources:
        return self._combine(other, lambda a, b: a + b)

    def __sub__(self, other: Resources) -> Resources:
        return self._combine(other, lambda a, b: a - b)

    def max(self, other: Resources) -> Resources:
        """The per-resource maximum of two vectors."""
        return self._combine(other, max)

    def fits_in(self, room: Resources) -> bool:
        """Whether every resource of ``self`` is at most the same resource of ``room``."""
        # The four standard fields first: this runs once per pod per candidate node.
        if (
            self.cpu > room.cpu
            or self.memory > room.memory
            or self.ephemeral_storage > room.ephemeral_storage
            or self.pods > room.pods
        ):
            return False
        return not self.extended or all(amount <= room.get(n) for n, amount in self.extended)

    def exceeding(self, room: Resources) -> list[str]:
        """Names of the resources where ``self`` is larger than ``room``, in :meth:`items` order."""
        return [name for name, amount in self.items() if amount > room.get(name)]

    def _combine(self, other: Resources, op: _BinaryOp) -> Resources:
        extended: tuple[tuple[str, int], ...] = ()
        if self.extended or other.extended:
            mine, theirs = dict(self.extended), dict(other.extended)
            extended = _sorted_pairs(
                {n: op(mine.get(n, 0), theirs.get(n, 0)) for n in mine.keys() | theirs.keys()}
            )
        return Resources(
            cpu=op(self.cpu, other.cpu),
            memory=op(self.memory, other.memory),
            ephemeral_storage=op(self.ephemeral_storage, other.ephemeral_storage),
            pods=op(self.pods, other.pods),
            extended=extended,
        )


def _sorted_pairs(amounts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(amounts.items()))
