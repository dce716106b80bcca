"""The report's chart: pending pods, target nodes and ready nodes over time, as a PNG.

Values hold until the next sample, so each series is drawn as steps, the honest shape for
counts that change at instants. Target is drawn wide and ready narrow on top of it, so when
they agree (the goal) both stay visible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nodepool_operator.demo._canvas import Canvas, Color
from nodepool_operator.demo._sample import Sample

TITLE = "pending pods, target nodes and ready nodes"
X_LABEL = "seconds after the pods were created"

_INK: Color = (40, 40, 40)
_GRID: Color = (225, 225, 225)
_AXIS: Color = (120, 120, 120)


@dataclass(frozen=True)
class Series:
    label: str
    color: Color
    thickness: int
    value: Callable[[Sample], int]


SERIES = (
    Series("pending pods", (31, 119, 180), 2, lambda s: s.pending),
    Series("target nodes", (255, 127, 14), 6, lambda s: s.target_nodes),
    Series("ready nodes", (44, 160, 44), 2, lambda s: s.ready_nodes),
)


def chart_png(samples: Sequence[Sample], *, width: int = 800, height: int = 420) -> bytes:
    """The chart of ``samples`` (in time order) as PNG bytes."""
    canvas = Canvas(width, height)
    left, right, top, bottom = 56, width - 24, 70, height - 52
    t_last = max((s.t for s in samples), default=0.0) or 1.0
    y_top = max((series.value(s) for s in samples for series in SERIES), default=0) or 1
    t_step = nice_step(t_last, 8)
    y_step = nice_step(y_top, 10)
    # The axes end on a tick, so the last grid line frames the plot.
    t_max = math.ceil(t_last / t_step) * t_step
    y_max = math.ceil(y_top / y_step) * y_step

    def px(t: float) -> int:
        return round(left + t / t_max * (right - left))

    def py(v: float) -> int:
        return round(bottom - v / y_max * (bottom - top))

    canvas.text(left, 12, TITLE, _INK, scale=2)
    x = left
    for series in SERIES:
        canvas.fill(x, 46, x + 19, 46 + series.thickness - 1, series.color)
        x = canvas.text(x + 26, 43, series.label, _INK) + 24

    for i in range(round(y_max / y_step) + 1):
        v = i * y_step
        canvas.fill(left, py(v), right, py(v), _GRID)
        label = _number(v)
        canvas.text(left - 8 - Canvas.text_width(label), py(v) - 3, label, _INK)
    for i in range(round(t_max / t_step) + 1):
        t = i * t_step
        canvas.fill(px(t), top, px(t), bottom, _GRID)
        label = _number(t)
        canvas.text(px(t) - Canvas.text_width(label) // 2, bottom + 8, label, _INK)
    canvas.fill(left, top, left, bottom, _AXIS)
    canvas.fill(left, bottom, right, bottom, _AXIS)
    canvas.text((left + right - Canvas.text_width(X_LABEL)) // 2, height - 22, X_LABEL, _INK)

    for series in SERIES:
        _steps(canvas, samples, series, px, py)
    return canvas.png()


def _steps(
    canvas: Canvas,
    samples: Sequence[Sample],
    series: Series,
    px: Callable[[float], int],
    py: Callable[[float], int],
) -> None:
    half = series.thickness // 2
    low = series.thickness - half - 1
    for before, after in itertools.pairwise(samples):
        y0, y1 = py(series.value(before)), py(series.value(after))
        x0, x1 = px(before.t), px(after.t)
        canvas.fill(x0, y0 - half, x1 + low, y0 + low, series.color)
        canvas.fill(x1 - half, y0, x1 + low, y1, series.color)


def nice_step(span: float, ticks: int) -> float:
    """The smallest of 1, 2 or 5 times a power of ten that cuts ``span`` into at most
    ``ticks`` parts (at least 1 for spans of whole units)."""
    raw = span / ticks
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 5, 10):
        step = factor * magnitude
        if step >= raw:
            return float(max(step, 1))
    return float(max(10 * magnitude, 1))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
