"""The Prometheus registry: values, label children, and a parseable 0.0.4 exposition."""

from __future__ import annotations

import math
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubeloop._metrics import (
    CONTENT_TYPE,
    DEFAULT_BUCKETS,
    RECONCILE_RESULTS,
    RECONCILE_TIME_BUCKETS,
    REGISTRY,
    RUNTIME_METRICS,
    Counter,
    Histogram,
    Registry,
    RuntimeMetrics,
)

# -- a small, strict parser of the text format ----------------------------------------

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

Key = tuple[str, frozenset[tuple[str, str]]]


def _parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq]
        assert _LABEL_NAME.fullmatch(name), name
        assert text[eq + 1] == '"'
        j = eq + 2
        value: list[str] = []
        while text[j] != '"':
            if text[j] == "\\":
                value.append({"\\": "\\", '"': '"', "n": "\n"}[text[j + 1]])
                j += 2
            else:
                value.append(text[j])
                j += 1
        assert name not in labels
        labels[name] = "".join(value)
        i = j + 1
        if i < len(text):
            assert text[i] == ",", text
            i += 1
    return labels


def _parse_value(text: str) -> float:
    return {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(text) or float(text)


def parse(exposition: str) -> tuple[dict[Key, float], dict[str, str], dict[str, str]]:
    """(samples, TYPE per family, HELP per family); asserts the format's rules."""
    assert exposition.endswith("\n")
    samples: dict[Key, float] = {}
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    for line in exposition.splitlines():
        if line.startswith("# HELP "):
            name, _, text = line[7:].partition(" ")
            assert name not in helps
            helps[name] = text.replace("\\n", "\n").replace("\\\\", "\\")
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert kind in {"counter", "gauge", "histogram"}
            assert name not in types
            types[name] = kind
        else:
            match = _SAMPLE.fullmatch(line)
            assert match, line
            name, labels, value = match.groups()
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            # Samples follow their family's TYPE line.
            assert name in types or (family in types and types[family] == "histogram"), line
            key = (name, frozenset(_parse_labels(labels or "").items()))
            assert key not in samples, line
            samples[key] = _parse_value(value)
    return samples, types, helps


def sample(samples: dict[Key, float], name: str, /, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


# -- values and children ----------------------------------------------------------


def test_counter_children_by_name_or_position_are_the_same_dict_entry() -> None:
    registry = Registry()
    counter = registry.counter("hits_total", "Hits.", ("code", "method"))
    child = counter.labels(code="200", method="GET")
    assert counter.labels("200", "GET") is child
    child.inc()
    counter.labels(method="GET", code="200").inc(2)
    samples, types, _ = parse(registry.render())
    assert types == {"hits_total": "counter"}
    assert sample(samples, "hits_total", code="200", method="GET") == 3


def test_wrong_labels_are_rejected() -> None:
    counter = Registry().counter("c_total", "C.", ("a",))
    with pytest.raises(ValueError, match="takes"):
        counter.labels(b="x")
    with pytest.raises(ValueError, match="takes"):
        counter.labels(a="x", b="y")
    with pytest.raises(ValueError, match="takes"):
        counter.labels("x", "y")
    with pytest.raises(ValueError, match="takes"):
        counter.labels(409)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"use \.labels"):
        counter.inc()
    with pytest.raises(ValueError, match="cannot decrease"):
        counter.labels("x").inc(-1)


def test_invalid_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="metric name"):
        Counter("bad-name", "x")
    with pytest.raises(ValueError, match="label name"):
        Counter("ok", "x", ("__reserved",))
    with pytest.raises(ValueError, match="duplicate"):
        Counter("ok", "x", ("a", "a"))
    with pytest.raises(ValueError, match="reserved"):
        Histogram("h", "x", ("le",))
    with pytest.raises(ValueError, match="ascending"):
        Histogram("h", "x", buckets=(1.0, 1.0))


def test_unlabelled_metrics_render_zero_before_use() -> None:
    registry = Registry()
    registry.counter("a_total", "A.")
    registry.gauge("b", "B.")
    registry.histogram("c_seconds", "C.", buckets=(1.0,))
    samples, _, _ = parse(registry.render())
    assert sample(samples, "a_total") == 0
    assert sample(samples, "b") == 0
    assert sample(samples, "c_seconds_bucket", le="1") == 0
    assert sample(samples, "c_seconds_bucket", le="+Inf") == 0
    assert sample(samples, "c_seconds_count") == 0


def test_gauge_set_inc_dec_and_function() -> None:
    registry = Registry()
    gauge = registry.gauge("g", "G.", ("k",))
    gauge.labels("a").set(5)
    gauge.labels("a").inc(2)
    gauge.labels("a").dec()
    level = [1.5]
    gauge.labels("b").set_function(lambda: level[0])
    level[0] = 7.25
    samples, _, _ = parse(registry.render())
    assert sample(samples, "g", k="a") == 6
    assert sample(samples, "g", k="b") == 7.25
    gauge.labels("b").set(0)  # a plain set replaces the function
    level[0] = 99
    assert sample(parse(registry.render())[0], "g", k="b") == 0


def test_histogram_buckets_are_cumulative_and_le_inclusive() -> None:
    registry = Registry()
    hist = registry.histogram("h_seconds", "H.", ("op",), buckets=(0.1, 1.0, 10.0))
    for value in (0.05, 0.1, 0.5, 1.0, 3.0, 100.0):
        hist.labels("x").observe(value)
    samples, types, _ = parse(registry.render())
    assert types == {"h_seconds": "histogram"}
    buckets = {
        dict(labels)["le"]: value
        for (name, labels), value in samples.items()
        if name == "h_seconds_bucket"
    }
    assert buckets == {"0.1": 2, "1": 4, "10": 5, "+Inf": 6}
    assert sample(samples, "h_seconds_count", op="x") == 6
    assert sample(samples, "h_seconds_sum", op="x") == pytest.approx(104.65)


def test_histogram_bucket_lines_are_in_ascending_le_order() -> None:
    registry = Registry()
    registry.histogram("h", "H.", buckets=DEFAULT_BUCKETS).observe(0.3)
    les = re.findall(r'le="([^"]+)"', registry.render())
    assert [float(v) for v in les] == sorted(float(v) for v in les)
    assert les[-1] == "+Inf"
    assert len(les) == len(DEFAULT_BUCKETS) + 1
    counts = [
        float(line.rsplit(" ", 1)[1]) for line in registry.render().splitlines() if "le=" in line
    ]
    assert counts == sorted(counts)


def test_escaping_round_trips() -> None:
    registry = Registry()
    nasty = 'a "quoted" back\\slash\nnewline'
    counter = registry.counter("esc_total", "Help with \\ and\nnewline.", ("v",))
    counter.labels(nasty).inc()
    text = registry.render()
    assert len(text.splitlines()) == 3  # HELP, TYPE, one sample: no raw newline leaked
    samples, _, helps = parse(text)
    assert sample(samples, "esc_total", v=nasty) == 1
    assert helps["esc_total"] == "Help with \\ and\nnewline."


def test_special_values_are_spelled_as_prometheus_expects() -> None:
    registry = Registry()
    gauge = registry.gauge("g", "G.", ("k",))
    gauge.labels("inf").set(math.inf)
    gauge.labels("nan").set(math.nan)
    gauge.labels("small").set(1e-08)
    text = registry.render()
    assert 'g{k="inf"} +Inf' in text
    assert 'g{k="nan"} NaN' in text
    samples, _, _ = parse(text)
    assert sample(samples, "g", k="small") == 1e-08


def test_remove_and_clear_children() -> None:
    registry = Registry()
    gauge = registry.gauge("g", "G.", ("k",))
    gauge.labels("a").set(1)
    gauge.labels("b").set(2)
    gauge.remove("a")
    samples, _, _ = parse(registry.render())
    assert [dict(labels) for (_, labels) in samples] == [{"k": "b"}]
    gauge.clear()
    assert parse(registry.render())[0] == {}


# -- registries -------------------------------------------------------------------


def test_registries_are_independent() -> None:
    one, two = Registry(), Registry()
    one.counter("x_total", "X.").inc()
    two.counter("x_total", "X.")
    assert sample(parse(one.render())[0], "x_total") == 1
    assert sample(parse(two.render())[0], "x_total") == 0


def test_get_or_create_and_conflicts() -> None:
    registry = Registry()
    first = registry.counter("x_total", "X.", ("a",))
    assert registry.counter("x_total", "X.", ("a",)) is first
    assert registry.get("x_total") is first
    with pytest.raises(ValueError, match="exists as counter"):
        registry.gauge("x_total", "X.", ("a",))
    with pytest.raises(ValueError, match="exists as counter"):
        registry.counter("x_total", "X.", ("b",))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Counter("x_total", "X."))
    registry.unregister("x_total")
    assert registry.get("x_total") is None
    assert registry.render() == ""


def test_families_render_sorted_by_name() -> None:
    registry = Registry()
    for name in ("zeta", "alpha", "mid"):
        registry.gauge(name, "G.")
    names = [
        line.split()[2] for line in registry.render().splitlines() if line.startswith("# TYPE")
    ]
    assert names == ["alpha", "mid", "zeta"]


# -- the runtime's families -------------------------------------------------------

EXPECTED_FAMILIES = {
    "controller_runtime_reconcile_total": ("counter", ("controller", "result")),
    "controller_runtime_reconcile_errors_total": ("counter", ("controller",)),
    "controller_runtime_terminal_reconcile_errors_total": ("counter", ("controller",)),
    "controller_runtime_reconcile_panics_total": ("counter", ("controller",)),
    "controller_runtime_reconcile_timeouts_total": ("counter", ("controller",)),
    "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",)),
    "controller_runtime_active_workers": ("gauge", ("controller",)),
    "controller_runtime_max_concurrent_reconciles": ("gauge", ("controller",)),
    "rest_client_requests_total": ("counter", ("code", "method", "host")),
    "rest_client_request_duration_seconds": ("histogram", ("verb", "host")),
    "workqueue_depth": ("gauge", ("name", "controller")),
    "workqueue_adds_total": ("counter", ("name", "controller")),
    "workqueue_queue_duration_seconds": ("histogram", ("name", "controller")),
    "workqueue_work_duration_seconds": ("histogram", ("name", "controller")),
    "workqueue_retries_total": ("counter", ("name", "controller")),
    "workqueue_unfinished_work_seconds": ("gauge", ("name", "controller")),
    "workqueue_longest_running_processor_seconds": ("gauge", ("name", "controller")),
    "kubeloop_api_writes_total": ("counter", ("controller", "verb", "resource", "subresource")),
    "kubeloop_writes_skipped_total": ("counter", ("controller", "resource", "subresource")),
    "kubeloop_conflicts_total": ("counter", ("controller", "resource", "outcome")),
    "kubeloop_conflict_writers_total": ("counter", ("controller", "other_manager")),
    "kubeloop_self_triggered_reconciles_total": ("counter", ("controller",)),
    "kubeloop_reconcile_loops_detected_total": ("counter", ("controller",)),
    "kubeloop_spec_fights_detected_total": ("counter", ("controller",)),
    "leader_election_master_status": ("gauge", ("name",)),
}


def test_runtime_metrics_names_types_and_labels() -> None:
    metrics = RuntimeMetrics(Registry())
    _, types, helps = parse(metrics.registry.render())
    assert {name: kind for name, (kind, _) in EXPECTED_FAMILIES.items()} == types
    assert all(helps.values())
    for name, (_, labels) in EXPECTED_FAMILIES.items():
        family = metrics.registry.get(name)
        assert family is not None
        assert family.labelnames == labels, name
    reconcile_time = metrics.reconcile_time_seconds
    assert reconcile_time.buckets == RECONCILE_TIME_BUCKETS
    assert reconcile_time.buckets[0] == 0.005
    assert reconcile_time.buckets[-1] == 60


def test_runtime_metrics_twice_on_one_registry_share_families() -> None:
    registry = Registry()
    assert RuntimeMetrics(registry).reconcile_total is RuntimeMetrics(registry).reconcile_total
    assert RUNTIME_METRICS.registry is REGISTRY
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_init_controller_creates_zero_series() -> None:
    metrics = RuntimeMetrics(Registry())
    metrics.init_controller("pools", max_concurrent_reconciles=4)
    samples, _, _ = parse(metrics.registry.render())
    for result in RECONCILE_RESULTS:
        assert (
            sample(samples, "controller_runtime_reconcile_total", controller="pools", result=result)
            == 0
        )
    assert sample(samples, "controller_runtime_reconcile_errors_total", controller="pools") == 0
    assert sample(samples, "controller_runtime_reconcile_panics_total", controller="pools") == 0
    assert sample(samples, "controller_runtime_active_workers", controller="pools") == 0
    assert sample(samples, "controller_runtime_max_concurrent_reconciles", controller="pools") == 4


def test_workqueue_adapter_labels_name_and_controller() -> None:
    metrics = RuntimeMetrics(Registry())
    wq = metrics.workqueue("pools")
    wq.added()
    wq.depth(3)
    wq.queue_latency(0.002)
    wq.work_duration(0.5)
    wq.retried()
    wq.watch_unfinished(lambda: (4.0, 2.5))
    samples, _, _ = parse(metrics.registry.render())
    lbl = {"name": "pools", "controller": "pools"}
    assert sample(samples, "workqueue_adds_total", **lbl) == 1
    assert sample(samples, "workqueue_depth", **lbl) == 3
    assert sample(samples, "workqueue_retries_total", **lbl) == 1
    assert sample(samples, "workqueue_queue_duration_seconds_count", **lbl) == 1
    assert sample(samples, "workqueue_queue_duration_seconds_bucket", le="0.01", **lbl) == 1
    assert sample(samples, "workqueue_queue_duration_seconds_bucket", le="0.001", **lbl) == 0
    assert sample(samples, "workqueue_work_duration_seconds_sum", **lbl) == 0.5
    assert sample(samples, "workqueue_unfinished_work_seconds", **lbl) == 4.0
    assert sample(samples, "workqueue_longest_running_processor_seconds", **lbl) == 2.5


def test_kubeloop_counters_render() -> None:
    metrics = RuntimeMetrics(Registry())
    metrics.api_writes_total.labels(
        controller="pools", verb="patch", resource="nodepools", subresource="status"
    ).inc()
    metrics.conflicts_total.labels("pools", "nodepools", "retried").inc(2)
    metrics.rest_client_requests_total.labels(code="409", method="PATCH", host="h:6443").inc()
    metrics.leader_election_master_status.labels(name="kubeloop-lock").set(1)
    samples, _, _ = parse(metrics.registry.render())
    write = {"controller": "pools", "verb": "patch", "resource": "nodepools"}
    assert sample(samples, "kubeloop_api_writes_total", **write, subresource="status") == 1
    conflict = {"controller": "pools", "resource": "nodepools", "outcome": "retried"}
    assert sample(samples, "kubeloop_conflicts_total", **conflict) == 2
    request = {"code": "409", "method": "PATCH", "host": "h:6443"}
    assert sample(samples, "rest_client_requests_total", **request) == 1
    assert sample(samples, "leader_election_master_status", name="kubeloop-lock") == 1


# -- prometheus_client ------------------------------------------------------------------


def test_users_prometheus_client_metrics_share_the_exposition() -> None:
    import prometheus_client

    prom = prometheus_client.CollectorRegistry()
    mine = prometheus_client.Counter("orders_total", "The user's own counter.", registry=prom)
    mine.inc(3)
    runtime = RuntimeMetrics(Registry(prom))
    runtime.reconcile_total.labels("c", "success").inc(2)
    text = runtime.registry.render()
    assert text == prometheus_client.generate_latest(prom).decode()  # one exposition
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["orders"].samples[0].value == 3
    [ok] = [
        s
        for s in families["controller_runtime_reconcile"].samples
        if s.labels == {"controller": "c", "result": "success"}
    ]
    assert ok.value == 2


def test_the_default_registry_carries_process_and_python_info() -> None:
    from kubeloop._metrics import REGISTRY

    names = {f.name for f in text_string_to_metric_families(REGISTRY.render())}
    assert {"python_info", "process_resident_memory_bytes", "process_cpu_seconds"} <= names
    assert "controller_runtime_reconcile" in names  # kubeloop's families are on it too


def test_rest_client_request_duration_has_client_gos_name_and_labels() -> None:
    runtime = RuntimeMetrics(Registry())
    runtime.rest_client_request_duration_seconds.labels("GET", "h:1").observe(0.03)
    families = {f.name: f for f in text_string_to_metric_families(runtime.registry.render())}
    family = families["rest_client_request_duration_seconds"]
    assert family.type == "histogram"
    count = [s for s in family.samples if s.name.endswith("_count")]
    assert [(s.labels, s.value) for s in count] == [({"verb": "GET", "host": "h:1"}, 1.0)]
