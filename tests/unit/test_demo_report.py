"""The demo's outputs: the live view, the PNG encoder and chart, the report, and the CLI."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from nodepool_operator import __main__ as cli
from nodepool_operator.demo._apiactivity import ApiActivity
from nodepool_operator.demo._chart import SERIES, chart_png
from nodepool_operator.demo._figures import Figures
from nodepool_operator.demo._liveview import LiveView, render, sparkline, status_line
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
        "pods_running": 13,
        "nodes_drained": 1,
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


# -- chart ----------------------------------------------------------------------------------

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_chart_is_a_png_with_the_series_colours() -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(chart_png(run_samples(), scale_down_at=7.5))).convert("RGB")
    assert image.size == (800, 420)
    colours = {image.getpixel((x, y)) for x in range(0, 800) for y in range(0, 420)}
    for series in SERIES:
        assert series.color in colours, series.label


def test_chart_of_nothing_still_draws() -> None:
    assert chart_png([]).startswith(SIGNATURE)


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

    async def fake_run(kubeconfig: str | None, settings: OperatorSettings, vms: Any) -> None:
        seen.update(kubeconfig=kubeconfig, settings=settings, vms=vms)

    monkeypatch.setattr("nodepool_operator.operator.run", fake_run)
    monkeypatch.setattr(cli, "configure_logging", lambda *a, **k: None)
    argv = ["run", "--kubeconfig", "k", "--boot-seconds", "1.5", "--metrics-bind-address", "0"]
    argv += ["--label-selector", "shard=a", "--leader-elect", "--install-crds"]
    argv += ["--registration-timeout", "7", "--node-repair-seconds", "9", "--no-simulated-kubelets"]
    assert cli.main(argv) == 0
    settings = seen["settings"]
    assert (settings.registration_timeout_seconds, settings.node_repair_seconds) == (7.0, 9.0)
    assert not settings.simulated_kubelets
    assert seen["vms"] is None
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

    async def fake_run(kubeconfig: str | None, settings: OperatorSettings, vms: Any) -> None:
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


def test_the_report_names_the_schedulers_scoring() -> None:
    packed = DemoResult(**{**result().__dict__, "scheduler_scoring": "MostAllocated"})
    assert "`NodeResourcesFit` `MostAllocated` (fullest node first)" in summary_markdown(packed)
    given = DemoResult(**{**result().__dict__, "scheduler_scoring": None})
    assert "NodeResourcesFit" not in summary_markdown(given)  # another's cluster: not ours to say


def test_demo_refuses_a_scoring_for_a_cluster_it_did_not_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    argv = ["demo", "--kubeconfig", str(kubeconfig), "--scheduler-scoring", "MostAllocated"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "--scheduler-scoring" in err
    assert "--kubeconfig" in err
