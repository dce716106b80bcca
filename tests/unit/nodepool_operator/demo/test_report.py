"""The demo's outputs: the live view, the PNG encoder and chart, the report, and the CLI."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from nodepool_operator import __main__ as cli
from nodepool_operator.demo._apiactivity import ApiActivity
from nodepool_operator.demo._chart import (
    NODES_LABEL,
    PODS_LABEL,
    SCALE_DOWN_LABEL,
    SERIES,
    X_LABEL,
    caption,
    chart_figure,
    chart_png,
)
from nodepool_operator.demo._figures import Figures
from nodepool_operator.demo._liveview import LiveView, render, sparkline, status_line
from nodepool_operator.demo._report import (
    CHART_ALT,
    story,
    summary_markdown,
    terminal_summary,
    write_report,
)
from nodepool_operator.demo._result import DemoResult
from nodepool_operator.demo._sample import PodCounts, Sample
from nodepool_operator.demo._timeline import milestones
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
                running=13 if ready else 0,
            )
        )
    return samples


#: Where the second act of :func:`act_samples` begins, its target drop and its last node gone.
ACT2, TARGET_DOWN, NODE_GONE = 10.0, 13.5, 15.0


def act_samples() -> list[Sample]:
    """:func:`run_samples`, then a second act: two pods deleted, the pool shrunk by one."""
    last = run_samples()[-1]
    samples = run_samples()
    for i in range(29):
        t = ACT2 + i * 0.25
        shrunk = 2 if t >= NODE_GONE else 3
        samples.append(
            replace(
                last,
                t=t,
                fitting=PodCounts(0, 11),
                running=11,
                target_nodes=2 if t >= TARGET_DOWN else 3,
                ready_nodes=shrunk,
                nodes=shrunk,
                vms=shrunk,
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
        "evictions": 2,
        "pdb_blocked_s": 0.5,
        "evictions_refused": 1,
    }
    return Figures(**{**values, **overrides})


def result(**overrides: Any) -> DemoResult:
    return DemoResult(
        workload=Workload(),
        figures=figures(**overrides),
        samples=tuple(run_samples()),
        pod_nodes={("prod", "web-28gi-0"): "mem96-abcde"},
        cloud_record={"cloud": "simulated", "live": 2, "calls": {"create": 3, "describe": 9}},
    )


# -- chart ----------------------------------------------------------------------------------

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_chart_is_a_png_with_the_series_colours() -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(chart_png(act_samples(), scale_down_at=ACT2))).convert("RGB")
    assert image.size == (800, 520)
    colours = {image.getpixel((x, y)) for x in range(0, 800) for y in range(0, 520)}
    for series in SERIES:
        assert series.color in colours, series.label


def test_chart_puts_pods_and_nodes_on_their_own_labelled_axes() -> None:
    fig = chart_figure(act_samples(), scale_down_at=ACT2)
    pods, nodes = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == [PODS_LABEL, NODES_LABEL]
    assert "(count)" in PODS_LABEL
    assert "(count)" in NODES_LABEL
    assert nodes.get_xlabel() == X_LABEL
    assert "(s)" in X_LABEL
    assert pods.get_shared_x_axes().joined(pods, nodes)
    assert [line.get_label() for line in pods.get_lines()][:2] == ["pending pods", "running pods"]
    assert [line.get_label() for line in nodes.get_lines()][:2] == ["target nodes", "ready nodes"]
    # Each panel scales to its own counts: the nodes' top is near 3, not near 13 pods.
    assert pods.get_ylim()[1] >= 13
    assert 3 < nodes.get_ylim()[1] < 5
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert [t.get_text() for t in legend.get_texts()] == [
            line.get_label() for line in ax.get_lines()[:2]
        ]


def test_chart_shows_the_whole_scale_down_act() -> None:
    samples = act_samples()
    fig = chart_figure(samples, scale_down_at=ACT2)
    left, right = fig.axes[1].get_xlim()
    events = [m.t for m in milestones(samples)]
    assert TARGET_DOWN in events
    assert NODE_GONE in events
    assert left <= min(events)
    assert max(events) < right
    assert right == samples[-1].t
    for ax in fig.axes:
        # the act is shaded from where it began to the end, and its start is a dashed line
        (band,) = (p for p in ax.patches if isinstance(p, Rectangle))
        assert (band.get_x(), band.get_x() + band.get_width()) == (ACT2, right)
        (marker,) = ax.get_lines()[2:]
        assert list(np.asarray(marker.get_xdata())) == [ACT2, ACT2]
        assert marker.get_linestyle() == "--"
    assert SCALE_DOWN_LABEL in [t.get_text() for t in fig.axes[0].texts]


def test_chart_without_a_second_act_marks_none() -> None:
    fig = chart_figure(run_samples())
    assert all(not ax.patches and len(ax.get_lines()) == 2 for ax in fig.axes)
    assert fig.axes[0].get_xlim()[1] == run_samples()[-1].t


def test_caption_names_every_line_and_its_colour() -> None:
    text = caption().lower()
    for series in SERIES:
        assert f"{series.label} ({series.colour})" in text
    assert "scale-down act" in text


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
    assert f"![{CHART_ALT}](chart.png)" in text
    assert caption() in text
    assert "frequency: 30s" in text
    assert "default is `5m`" in text
    assert "| `prod/web-28gi-0` | 28Gi | 2 | yes | mem96-abcde |" in text
    assert "| 2.0 | targetNodes 0 -> 3 |" in text


def test_summary_and_cloud_json_count_the_same_cloud_calls(tmp_path: Path) -> None:
    # The second act's terminate is a call too: the record is taken at the very end.
    record = {"cloud": "simulated", "calls": {"create": 3, "delete": 1, "describe": 40}}
    done = DemoResult(**{**result().__dict__, "cloud_record": record})
    summary, _ = write_report(done, tmp_path)
    assert json.loads((tmp_path / "cloud.json").read_text()) == record
    (line,) = (x for x in summary.read_text().splitlines() if x.startswith("Cloud calls"))
    assert line.endswith(": create 3, delete 1, describe 40.")


def test_the_timeline_says_where_the_second_act_began() -> None:
    acted = DemoResult(
        **{**result().__dict__, "samples": tuple(act_samples()), "scale_down_at": ACT2}
    )
    told = [m.text for m in story(acted)]
    (act,) = (i for i, text in enumerate(told) if text.startswith("second act: "))
    assert told[act - 1] == "all 13 fitting pods scheduled"  # the first act ends at 5.0 s
    assert told[act + 1 :] == ["targetNodes 3 -> 2", "VMs 3 -> 2", "ready nodes 3 -> 2"]
    summary = terminal_summary(acted)
    assert f"  {ACT2:6.1f} s  second act: the bare pods of one node deleted" in summary
    assert "| 10.0 | second act: " in summary_markdown(acted)
    assert not any(m.text.startswith("second act") for m in story(result()))


def test_the_summary_reports_the_budget_settings_and_the_blockers() -> None:
    acted = DemoResult(
        **{
            **result().__dict__,
            "samples": tuple(act_samples()),
            "scale_down_at": ACT2,
            "unremovable": ("mem96-a: NotReplicated (pod prod/web-28gi-0)",),
            "disruption": {"drainTimeout": "10m", "terminationGracePeriod": "1h"},
        }
    )
    summary = terminal_summary(acted)
    assert (
        "  PodDisruptionBudget prod/demo-web (minAvailable 2) over Deployment demo-web "
        "(2 replicas, then 3 once it held the drain): 2 eviction(s), 1 refused (429), held the "
        "drain about 0.5 s"
    ) in summary
    # the API's default budget when the pool has none (a pool API without budgets: none)
    assert (
        "  pool disruption budgets: none in spec.disruption" in summary
        or "  pool disruption budgets (nodes at once): 10% (default)" in summary
    )
    assert "  pool drain settings: drainTimeout 10m, terminationGracePeriod 1h" in summary
    assert "    mem96-a: NotReplicated (pod prod/web-28gi-0)" in summary
    markdown = summary_markdown(acted)
    assert "## Scale-down: budgets and blockers" in markdown
    assert "- kept by blockers (the Autoscaler's status.unremovableNodes):" in markdown
    assert "  - mem96-a: NotReplicated (pod prod/web-28gi-0)" in markdown
    unset = DemoResult(**{**acted.__dict__, "disruption": {}})
    assert (
        "pool drain settings: drainTimeout 10m (default), terminationGracePeriod 1h (default)"
        in terminal_summary(unset)
    )
    budgeted = DemoResult(
        **{**acted.__dict__, "disruption": {"budgets": [{"nodes": "10%"}, {"nodes": "1"}]}}
    )
    assert "pool disruption budgets (nodes at once): 10%, 1" in terminal_summary(budgeted)
    reported = DemoResult(
        **{**acted.__dict__, "disruption_status": {"disrupting": 1, "allowed": 0}}
    )
    assert "pool status.disruption at the end: 1 disrupting, 0 more allowed" in (
        terminal_summary(reported)
    )
    # no second act, no such section
    assert "budgets and blockers" not in summary_markdown(result())


def test_a_drain_without_evictions_or_a_budget_that_held_none_is_a_problem() -> None:
    assert "the drained node held no pod to evict" in summary_markdown(result(evictions=0))
    held_none = result(pdb_blocked_s=0.0, evictions_refused=0)
    assert "the PodDisruptionBudget held no eviction" in summary_markdown(held_none)
    assert result(pdb_blocked_s=0.0).figures.problems() == []


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
