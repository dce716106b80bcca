"""Go durations (``5m``, ``1h30m``, ``250ms``) as :class:`~datetime.timedelta`, the way a CRD
field typed ``timedelta`` is written in YAML and read back."""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Final

#: Go's ``time.ParseDuration`` units, without its sign and bare ``0`` (we want ``0s``).
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"

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
