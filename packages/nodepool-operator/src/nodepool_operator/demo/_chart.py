"""The report's chart: pods (pending, running) and nodes (target, ready) over time, as a PNG.

Two panels share the time axis, pods above and nodes below, each with its own scale: on one
scale 17 pods flatten 3 nodes into the floor. Values hold until the next sample, so each series
is drawn as steps, the honest shape for counts that change at instants. Target is drawn wide and
ready narrow on top of it, so when they agree (the goal) both stay visible. The second act
(part of the workload goes, the pool drains and shrinks) is shaded from where it began to the
last sample, which the driver takes a little after the pool came to rest, so the whole
scale-down shows.

Drawn on a bare :class:`~matplotlib.figure.Figure` with the Agg canvas: no display, and no
pyplot state shared between threads.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from nodepool_operator.demo._sample import Sample

TITLE = "pods and nodes: the burst scales the pool up, the second act drains it down"
X_LABEL = "time after the burst of pods was created (s)"
PODS_LABEL = "pods (count)"
NODES_LABEL = "nodes (count)"
SCALE_DOWN_LABEL = "scale-down act"
SCALE_DOWN_SHADE = "0.93"

Color = tuple[int, int, int]
Panel = Literal["pods", "nodes"]


@dataclass(frozen=True)
class Series:
    """One line of the chart; ``colour`` and ``meaning`` are what the report's caption says."""

    label: str
    panel: Panel
    color: Color
    colour: str
    thickness: float
    value: Callable[[Sample], int]
    meaning: str


SERIES = (
    Series(
        "pending pods",
        "pods",
        (31, 119, 180),
        "blue",
        2.0,
        lambda s: s.pending,
        "every demo pod not bound to a node yet, so it ends at the pods that can never fit",
    ),
    Series(
        "running pods",
        "pods",
        (148, 103, 189),
        "purple",
        2.0,
        lambda s: s.running,
        "demo pods that kwok runs (phase Running with a pod IP); it drops where the second act "
        "deletes the pods of one node",
    ),
    Series(
        "target nodes",
        "nodes",
        (255, 127, 14),
        "orange, wide",
        6.0,
        lambda s: s.target_nodes,
        "the NodePool's spec.targetNodes, which the Autoscaler raises for the burst and lowers "
        "once a node is unneeded",
    ),
    Series(
        "ready nodes",
        "nodes",
        (44, 160, 44),
        "green, narrow",
        2.0,
        lambda s: s.ready_nodes,
        "the pool's Nodes whose Ready condition is True; it follows the target down only after "
        "the node was drained and its VM terminated",
    ),
)


def _rgb(color: Color) -> tuple[float, float, float]:
    return (color[0] / 255, color[1] / 255, color[2] / 255)


def chart_figure(
    samples: Sequence[Sample],
    *,
    width: int = 800,
    height: int = 520,
    scale_down_at: float | None = None,
) -> Figure:
    """The chart of ``samples`` (in time order) as a figure of ``width`` x ``height`` pixels
    at 100 dpi: a pods panel over a nodes panel; ``scale_down_at`` (seconds) is where the
    second act began."""
    dpi = 100
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    pods_ax, nodes_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    axes: dict[Panel, Axes] = {"pods": pods_ax, "nodes": nodes_ax}
    times = [s.t for s in samples]
    end = times[-1] if times else 1.0
    for series in SERIES:
        axes[series.panel].plot(
            times,
            [series.value(s) for s in samples],
            drawstyle="steps-post",
            color=_rgb(series.color),
            linewidth=series.thickness,
            label=series.label,
            solid_capstyle="butt",
        )
    for panel, ax in axes.items():
        highest = max((series.value(s) for s in samples for series in _of(panel)), default=0)
        # Room above the highest value and a little below 0, so no line hides in the frame.
        top = highest + max(1, round(highest * 0.1))
        ax.set_ylim(-0.03 * top, top)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, color="0.9")
        if scale_down_at is not None:
            ax.axvspan(scale_down_at, max(end, scale_down_at), color=SCALE_DOWN_SHADE, zorder=0)
            ax.axvline(scale_down_at, color="0.4", linestyle="--", linewidth=1)
    pods_ax.set_ylabel(PODS_LABEL)
    nodes_ax.set_ylabel(NODES_LABEL)
    nodes_ax.set_xlabel(X_LABEL)
    nodes_ax.set_xlim(0, max(end, scale_down_at or 0.0))
    if scale_down_at is not None:
        pods_ax.annotate(
            SCALE_DOWN_LABEL,
            (scale_down_at, 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=8,
            color="0.3",
        )
    pods_ax.set_title(TITLE, fontsize=11)
    pods_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, borderaxespad=0)
    nodes_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, borderaxespad=0)
    fig.tight_layout()
    return fig


def _of(panel: Panel) -> tuple[Series, ...]:
    return tuple(s for s in SERIES if s.panel == panel)


def chart_png(samples: Sequence[Sample], *, scale_down_at: float | None = None) -> bytes:
    """:func:`chart_figure`, at its default size, as PNG bytes."""
    fig = chart_figure(samples, scale_down_at=scale_down_at)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=fig.dpi)
    return out.getvalue()


def caption() -> str:
    """The report's words under the chart: every line, its colour and what it counts."""
    lines = "; ".join(f"{s.label} ({s.colour}): {s.meaning}" for s in SERIES)
    return (
        f"Top panel, pods; bottom panel, nodes; each on its own scale. {lines[0].upper()}"
        f"{lines[1:]}. The dashed line and the grey band from it to the end are the "
        "scale-down act: the demo deleted the pods of one node, put a PodDisruptionBudget over "
        "the pods that stay and turned the Autoscaler's scale-down on."
    )
