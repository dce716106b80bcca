"""The live terminal view: a compact screen redrawn in place with ANSI escapes.

No curses: the screen is plain text, built by :func:`render` (testable as a string), and
:class:`LiveView` only moves the cursor home and clears before writing it again.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from typing import TextIO

from nodepool_operator.demo._sample import Sample
from nodepool_operator.demo._workload import POOL_NAME, UNWATCHED_NAMESPACE, Role, Workload

_HOME_AND_CLEAR = "\x1b[H\x1b[J"
_HIDE_CURSOR = "\x1b[?25l"
_SHOW_CURSOR = "\x1b[?25h"
_BARS = " ▁▂▃▄▅▆▇█"
_HISTORY_WIDTH = 60


def render(
    sample: Sample, history: Sequence[Sample], workload: Workload, *, width: int = 100
) -> str:
    """The whole screen for ``sample``, with sparklines of ``history`` (oldest first)."""
    shape = workload.shape
    lines = [
        f"nodepool-operator demo   {sample.t:6.1f} s   Ctrl-C stops",
        "",
        f"{'PODS':<16}{'pending':>9}{'scheduled':>11}",
    ]
    for namespace, counts in sample.by_namespace.items():
        note = "   (not watched)" if namespace == UNWATCHED_NAMESPACE else ""
        lines.append(f"  {namespace:<14}{counts.pending:>9}{counts.scheduled:>11}{note}")
    total = sample.fitting.pending + sample.fitting.scheduled
    lines.append(
        f"  {'that fit':<14}{sample.fitting.pending:>9}{sample.fitting.scheduled:>11}   of {total}"
    )
    lines.append("  must not trigger a scale-up:")
    for (namespace, name), role in workload.roles().items():
        if role is Role.FITS:
            continue
        key = f"{namespace}/{name}"
        state = "bound" if key in sample.extras_bound else "pending"
        lines.append(f"    {key:<26} {state:<8} {role.explanation}")
        if key in sample.not_triggered:
            lines.append(f"      autoscaler: {sample.not_triggered[key]}")
    lines += [
        "",
        f"NODEPOOL {POOL_NAME}   {shape.instance_type}: {shape.memory}, {shape.cpu} cpu, "
        f"max {shape.max_nodes}",
        f"  target {sample.target_nodes}   current {sample.current_nodes}   "
        f"ready {sample.ready_nodes}   nodes {sample.nodes}   "
        f"scaleOperation {sample.scale_operation}",
        f"  VMs {sample.vms} (running {sample.vms_running})",
        "",
        f"OPERATOR   API writes {sample.api.writes}{_by_controller(sample)}   "
        f"conflicts {sample.api.conflicts}",
    ]
    decision = sample.last_decision or "(none yet)"
    lines += textwrap.wrap(
        f"last decision: {decision}",
        width=max(width - 2, 40),
        initial_indent="  ",
        subsequent_indent="    ",
    )
    recent = list(history[-_HISTORY_WIDTH:])
    if recent:
        # Pods and nodes on scales of their own: 17 pods would flatten 3 nodes to nothing.
        pods_top = max(s.pending for s in recent) or 1
        nodes_top = max(max(s.target_nodes, s.ready_nodes) for s in recent) or 1
        lines += [
            "",
            f"HISTORY (last {recent[-1].t - recent[0].t:.0f} s; a full bar is {pods_top} pods, "
            f"{nodes_top} nodes)",
            f"  pending  {sparkline([s.pending for s in recent], pods_top)}",
            f"  target   {sparkline([s.target_nodes for s in recent], nodes_top)}",
            f"  ready    {sparkline([s.ready_nodes for s in recent], nodes_top)}",
        ]
    return "\n".join(line[:width] for line in lines) + "\n"


def status_line(sample: Sample) -> str:
    """One line for ``--headless`` progress on stderr."""
    return (
        f"t={sample.t:.1f}s pending={sample.pending} "
        f"fitting_scheduled={sample.fitting.scheduled}/"
        f"{sample.fitting.pending + sample.fitting.scheduled} "
        f"target={sample.target_nodes} ready={sample.ready_nodes} vms={sample.vms} "
        f"scale={sample.scale_operation} writes={sample.api.writes} "
        f"conflicts={sample.api.conflicts}"
    )


def sparkline(values: Sequence[int], top: int) -> str:
    """One character per value, from blank (0) to a full block (``top``)."""
    steps = len(_BARS) - 1
    return "".join(_BARS[min(steps, round(v * steps / top))] if top else " " for v in values)


def _by_controller(sample: Sample) -> str:
    parts = [f"{name or 'events etc.'} {n}" for name, n in sample.api.writes_by_controller.items()]
    return f" ({', '.join(parts)})" if parts else ""


class LiveView:
    """Redraws the screen on ``stream`` (a terminal) in place."""

    def __init__(self, stream: TextIO, workload: Workload) -> None:
        self._stream = stream
        self._workload = workload
        self._started = False

    def draw(self, sample: Sample, history: Sequence[Sample]) -> None:
        width = shutil.get_terminal_size().columns
        prefix = _HOME_AND_CLEAR if self._started else _HIDE_CURSOR + _HOME_AND_CLEAR
        self._started = True
        self._stream.write(prefix + render(sample, history, self._workload, width=width))
        self._stream.flush()

    def close(self) -> None:
        """Give the cursor back; the last screen stays, so the summary prints below it."""
        if self._started:
            self._stream.write(_SHOW_CURSOR)
            self._stream.flush()
