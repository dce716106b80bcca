"""The demo's outputs: the live view, the PNG encoder and chart, the report, and the CLI."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from nodepool_operator import __main__ as cli
from nodepool_operator.demo._apiactivity import ApiActivity
from nodepool_operator.demo._canvas import Canvas, has_glyph
from nodepool_operator.demo._chart import SERIES, TITLE, X_LABEL, chart_png, nice_step
from nodepool_operator.demo._figures import Figures
from nodepool_operator.demo._liveview import LiveView, render, sparkline, status_line
from nodepool_operator.demo._png import SIGNATURE, encode_png
from nodepool_operator.demo._report import summary_markdown, terminal_summary, write_report
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._sample import PodCounts, Sample
from nodepool_operator.demo._workload import Workload
from nodepool_operator.settings import OperatorSettings


def run_samples() -> list[Sample]:
    samples = []
    for i in range(40):
        t = i * 0.25
        up = t >= 2.0
        ready = 3 if t >= 5.0 else 0
        samples.append(
            Sample(
                t=t,
                by_namespace={"prod": PodCounts(2 if ready else 10, 8 if ready else 0)},
                fitting=PodCounts(0 if ready else 13, 13 if ready else 0),
                target_nodes=3 if up else 0,
                ready_nodes=ready,
                nodes=ready,
                vms=3 if up else 0,
                last_decision="scale up 0 -> 3: 15 pods need 3 new mem96.large nodes" if up else "",
                api=ApiActivity(writes=i, writes_by_controller={"nodepool": i}),
            )
        )
    return samples


def figures(**overrides: Any) -> Figures:
    values: dict[str, Any] = {
        "pods": 17,
        "pods_fitting": 13,
        "pods_scheduled": 13,
        "pods_not_triggering": 4,
        "nodes": 3,
        "nodes_lower_bound": 3,
        "vms": 3,
        "duplicate_vms": 0,
        "leaked_vms": 0,
        "api_writes": 39,
        "conflicts": 0,
        "seconds": 5.0,
    }
    return Figures(**{**values, **overrides})


def result(**overrides: Any) -> DemoResult:
    return DemoResult(
        workload=Workload(),
        figures=figures(**overrides),
        samples=tuple(run_samples()),
        pod_nodes={("prod", "web-28gi-0"): "mem96-abcde"},
        cloud_calls={"create": 3, "describe": 9},
    )


# -- PNG ----------------------------------------------------------------------------------


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and RGB rows (filter bytes removed) of a PNG this encoder wrote."""
    assert data.startswith(SIGNATURE)
    pos = len(SIGNATURE)
    chunks: dict[bytes, bytes] = {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color) == (8, 2)
    assert b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = width * 3 + 1
    rows = b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))
    return width, height, rows


def test_png_round_trip() -> None:
    pixels = bytes([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9])
    assert decode_png(encode_png(2, 2, pixels)) == (2, 2, pixels)


def test_png_refuses_the_wrong_amount_of_pixels() -> None:
    with pytest.raises(ValueError, match="2x2x3 = 12 bytes"):
        encode_png(2, 2, b"\x00" * 11)


def test_canvas_fill_is_clipped_and_inclusive() -> None:
    canvas = Canvas(4, 3, background=(0, 0, 0))
    canvas.fill(2, 1, 10, -5, (1, 2, 3))
    assert canvas.pixel(2, 0) == canvas.pixel(3, 1) == (1, 2, 3)
    assert canvas.pixel(1, 1) == canvas.pixel(2, 2) == (0, 0, 0)


def test_chart_labels_have_glyphs() -> None:
    text = TITLE + X_LABEL + "".join(s.label for s in SERIES) + "0123456789."
    assert [c for c in text if not has_glyph(c)] == []


def test_chart_is_a_png_with_the_series_colours() -> None:
    width, height, rows = decode_png(chart_png(run_samples()))
    assert (width, height) == (800, 420)
    colours = {rows[i : i + 3] for i in range(0, len(rows), 3)}
    for series in SERIES:
        assert bytes(series.color) in colours, series.label


def test_chart_of_nothing_still_draws() -> None:
    assert chart_png([]).startswith(SIGNATURE)


@pytest.mark.parametrize(
    ("span", "ticks", "step"), [(17, 10, 2.0), (3, 10, 1.0), (95, 8, 20.0), (0, 8, 1.0)]
)
def test_nice_step(span: float, ticks: int, step: float) -> None:
    assert nice_step(span, ticks) == step


# -- live view ----------------------------------------------------------------------------


def test_render_shows_pods_pool_writes_and_decision() -> None:
    samples = run_samples()
    screen = render(samples[-1], samples, Workload(), width=100)
    assert "prod" in screen
    assert "that fit" in screen
    assert "target 3   current 0   ready 3   nodes 3   scaleOperation inactive" in screen
    assert "API writes 39 (nodepool 39)" in screen
    assert "last decision: scale up 0 -> 3" in screen
    assert "prod/too-big-120gi" in screen
    assert all(len(line) <= 100 for line in screen.splitlines())


def test_live_view_redraws_in_place_and_gives_the_cursor_back() -> None:
    out = io.StringIO()
    view = LiveView(out, Workload())
    samples = run_samples()
    view.draw(samples[0], samples[:1])
    view.draw(samples[1], samples[:2])
    view.close()
    text = out.getvalue()
    assert text.count("\x1b[H\x1b[J") == 2
    assert text.startswith("\x1b[?25l")
    assert text.endswith("\x1b[?25h")


def test_sparkline_and_status_line() -> None:
    assert sparkline([0, 4, 8], 8) == " ▄█"
    line = status_line(run_samples()[-1])
    assert "target=3 ready=3" in line
    assert "writes=39" in line


# -- report -------------------------------------------------------------------------------


def test_write_report(tmp_path: Path) -> None:
    summary, chart = write_report(result(), tmp_path / "out")
    assert chart.read_bytes().startswith(SIGNATURE)
    text = summary.read_text()
    assert "| `nodes_lower_bound` | 3 |" in text
    assert "![pending pods, target nodes and ready nodes over time](chart.png)" in text
    assert "frequency: 30s" in text
    assert "default is `5m`" in text
    assert "| `prod/web-28gi-0` | 28Gi | 2 | yes | mem96-abcde |" in text
    assert "| 2.0 | targetNodes 0 -> 3 |" in text


def test_summary_says_what_went_wrong() -> None:
    assert "Converged in 5.0 s, but: 1 duplicate VMs." in summary_markdown(result(duplicate_vms=1))
    timed_out = DemoResult(**{**result().__dict__, "converged": False})
    assert terminal_summary(timed_out).startswith("\nTimed out after 300 s")


# -- CLI ----------------------------------------------------------------------------------


def test_run_maps_flags_onto_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    async def fake_run(kubeconfig: str | None, settings: OperatorSettings) -> None:
        seen.update(kubeconfig=kubeconfig, settings=settings)

    monkeypatch.setattr("nodepool_operator.operator.run", fake_run)
    monkeypatch.setattr(cli, "configure_logging", lambda *a, **k: None)
    argv = ["run", "--kubeconfig", "k", "--boot-seconds", "1.5", "--metrics-bind-address", "0"]
    argv += ["--label-selector", "shard=a", "--leader-elect", "--install-crds"]
    assert cli.main(argv) == 0
    settings = seen["settings"]
    assert seen["kubeconfig"] == "k"
    assert settings.boot_seconds == 1.5
    assert settings.metrics_bind_address is None
    assert settings.health_probe_bind_address == OperatorSettings().health_probe_bind_address
    assert (settings.label_selector, settings.leader_election, settings.install_crds) == (
        "shard=a",
        True,
        True,  # opt-in: the default is off
    )


def test_run_defaults_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[OperatorSettings] = []

    async def fake_run(kubeconfig: str | None, settings: OperatorSettings) -> None:
        seen.append(settings)

    monkeypatch.setattr("nodepool_operator.operator.run", fake_run)
    monkeypatch.setattr(cli, "configure_logging", lambda *a, **k: None)
    assert cli.main(["run"]) == 0
    assert seen == [OperatorSettings()]


def test_demo_exit_status() -> None:
    assert cli._exit_status(result()) == 0
    assert cli._exit_status(result(nodes=4)) == 0  # more nodes than needed: a warning
    assert cli._exit_status(result(leaked_vms=1)) == 1
    timed_out = DemoResult(**{**result().__dict__, "converged": False})
    assert cli._exit_status(timed_out) == 1
