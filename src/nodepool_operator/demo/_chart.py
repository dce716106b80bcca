"""The report's chart: pending and running pods, target and ready nodes over time, as a PNG.

Drawn with matplotlib's Agg backend (no display needed). Values hold until the next sample, so
each series is drawn as steps, the honest shape for counts that change at instants. Target is
drawn wide and ready narrow on top of it, so when they agree (the goal) both stay visible. A
dashed line marks the start of the second act, where part of the workload goes and the pool
drains and shrinks.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files, never to a display

from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator

from nodepool_operator.demo._sample import Sample

TITLE = "pods and nodes: the burst scales the pool up, the second act drains it down"
X_LABEL = "seconds after the pods were created"
SCALE_DOWN_LABEL = "scale-down act"

Color = tuple[int, int, int]


@dataclass(frozen=True)
class Series:
    label: str
    color: Color
    thickness: float
    value: Callable[[Sample], int]


SERIES = (
    Series("pending pods", (31, 119, 180), 2.0, lambda s: s.pending),
    Series("running pods", (148, 103, 189), 2.0, lambda s: s.running),
    Series("target nodes", (255, 127, 14), 6.0, lambda s: s.target_nodes),
    Series("ready nodes", (44, 160, 44), 2.0, lambda s: s.ready_nodes),
)


def _rgb(color: Color) -> tuple[float, float, float]:
    return (color[0] / 255, color[1] / 255, color[2] / 255)


def chart_png(
    samples: Sequence[Sample],
    *,
    width: int = 800,
    height: int = 420,
    scale_down_at: float | None = None,
) -> bytes:
    """The chart of ``samples`` (in time order) as PNG bytes, ``width`` x ``height`` pixels;
    ``scale_down_at`` (seconds) marks where the second act began."""
    dpi = 100
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    try:
        ax = fig.add_subplot()
        times = [s.t for s in samples]
        for series in SERIES:
            ax.plot(
                times,
                [series.value(s) for s in samples],
                drawstyle="steps-post",
                color=_rgb(series.color),
                linewidth=series.thickness,
                label=series.label,
                solid_capstyle="butt",
            )
        if scale_down_at is not None:
            ax.axvline(scale_down_at, color="0.4", linestyle="--", linewidth=1)
            ax.annotate(
                SCALE_DOWN_LABEL,
                (scale_down_at, 1),
                xycoords=("data", "axes fraction"),
                xytext=(4, -12),
                textcoords="offset points",
                fontsize=8,
                color="0.3",
            )
        ax.set_title(TITLE, fontsize=11)
        ax.set_xlabel(X_LABEL)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, color="0.9")
        ax.legend(loc="upper right", fontsize=8, ncols=len(SERIES))
        fig.tight_layout()
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=dpi)
        return out.getvalue()
    finally:
        plt.close(fig)
