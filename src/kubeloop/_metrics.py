"""kubeloop's metric families, exposed through a ``prometheus_client`` registry.

The families (:class:`Counter`, :class:`Gauge`, :class:`Histogram`) are kubeloop's own:
everything runs on one event loop, so a child needs no lock and looking one up is one
dict get, which keeps the per-reconcile cost at a fraction of ``prometheus_client``'s
locked children (``bench/metrics_cost.py`` measures both). Exposition is
``prometheus_client``'s: each :class:`Registry` is a collector on a
``prometheus_client.CollectorRegistry``, so an operator's own ``prometheus_client``
metrics, the ``process_*`` and ``python_info`` series and kubeloop's share one
``/metrics``. :data:`REGISTRY` sits on ``prometheus_client.REGISTRY`` (the default);
``Registry(my_collector_registry)`` puts kubeloop's families on another one, and a bare
``Registry()`` gets a fresh one of its own (tests, two managers in one process).

:class:`RuntimeMetrics` holds the families with controller-runtime's (and client-go's)
names, so existing dashboards and alerts work unchanged, plus kubeloop's own
write/conflict counters.
"""

from __future__ import annotations

import contextvars
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any, ClassVar, Generic, TypeVar

import prometheus_client
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.core import (
    Metric as PromMetric,
)
from prometheus_client.registry import Collector, CollectorRegistry

CONTENT_TYPE = prometheus_client.exposition.CONTENT_TYPE_PLAIN_0_0_4
"""The ``Content-Type`` of :meth:`Registry.render`'s output (text format 0.0.4)."""

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
"""Prometheus' default histogram buckets (seconds)."""

RECONCILE_TIME_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
    10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip
"""controller-runtime's buckets for ``controller_runtime_reconcile_time_seconds``."""

REST_CLIENT_BUCKETS: tuple[float, ...] = (
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
)  # fmt: skip
"""client-go's buckets for ``rest_client_request_duration_seconds``."""

WORKQUEUE_BUCKETS: tuple[float, ...] = tuple(10.0**e for e in range(-8, 4))
"""client-go's workqueue latency buckets: 10 ns to 1000 s, one per decade."""

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")
"""The values of the ``result`` label of ``controller_runtime_reconcile_total``."""

CONFLICT_OUTCOMES = ("retried", "resolved", "gave_up", "superseded")
"""The values of the ``outcome`` label of ``kubeloop_conflicts_total`` (``superseded``:
a status write stopped because the spec moved on to a new generation)."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _le(bound: float) -> str:
    """An ``le`` bound as Prometheus writes it (``1``, ``0.005``, ``+Inf``)."""
    if math.isinf(bound):
        return "+Inf"
    return str(int(bound)) if bound.is_integer() and abs(bound) < 1e15 else repr(bound)


class CounterChild:
    """One counter series: only ever goes up."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"a counter cannot decrease (inc by {amount})")
        self.value += amount


class GaugeChild:
    """One gauge series: a value that goes up and down, or is computed when scraped."""

    __slots__ = ("_fn", "_value")

    def __init__(self) -> None:
        self._value = 0.0
        self._fn: Callable[[], float] | None = None

    @property
    def value(self) -> float:
        return self._fn() if self._fn is not None else self._value

    def set(self, value: float) -> None:
        self._fn = None
        self._value = float(value)

    def inc(self, amount: float = 1.0) -> None:
        self._value += amount

    def dec(self, amount: float = 1.0) -> None:
        self._value -= amount

    def set_function(self, fn: Callable[[], float]) -> None:
        """Compute the value with ``fn`` at every scrape instead (no polling task needed)."""
        self._fn = fn


class HistogramChild:
    """One histogram series: counts per bucket, plus the sum and count of observations."""

    __slots__ = ("_bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        # Per-bucket (not cumulative) counts; the last slot is +Inf.
        self.buckets = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        # ``le`` is inclusive, so a value equal to a bound lands in that bound's bucket.
        self.buckets[bisect_left(self._bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, count of observations <= le)`` for every bound, ending with ``+Inf``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self._bounds, math.inf), self.buckets, strict=True):
            running += n
            out.append((bound, running))
        return out


_C = TypeVar("_C", CounterChild, GaugeChild, HistogramChild)


class _Family(Generic[_C]):
    """A named metric and its children, one per combination of label values.

    Args:
        name: the metric name, e.g. ``controller_runtime_reconcile_total``.
        help: one line for the ``# HELP`` comment.
        labelnames: the label names, in order. Default ``()``: a single, unlabelled series.
    """

    type_name: ClassVar[str]

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid metric name {name!r}")
        for label in labelnames:
            if not _LABEL.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} for {name}")
        if len(set(labelnames)) != len(labelnames):
            raise ValueError(f"duplicate label names for {name}: {labelnames}")
        self.name = name
        self.help = help
        self.labelnames: tuple[str, ...] = tuple(labelnames)
        self._children: dict[tuple[str, ...], _C] = {}
        if not self.labelnames:
            # An unlabelled metric has exactly one series, shown even before first use.
            self._children[()] = self._new_child()

    def _new_child(self) -> _C:
        raise NotImplementedError

    def labels(self, *values: str, **kv: str) -> _C:
        """The child for these label values (by position or by name), created on first use."""
        if kv:
            if values or len(kv) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {kv}")
            try:
                key = tuple([kv[n] for n in self.labelnames])
            except KeyError:
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {kv}") from None
        else:
            key = values
        child = self._children.get(key)
        if child is None:
            if len(key) != len(self.labelnames) or not all(isinstance(v, str) for v in key):
                raise ValueError(f"{self.name} takes str labels {self.labelnames}, got {key}")
            child = self._children[key] = self._new_child()
        return child

    def remove(self, *values: str, **kv: str) -> None:
        """Drop one child (e.g. for an object that no longer exists)."""
        key = tuple([kv[n] for n in self.labelnames]) if kv else values
        self._children.pop(key, None)

    def clear(self) -> None:
        """Drop every child of a labelled metric."""
        if self.labelnames:
            self._children.clear()

    def _single(self) -> _C:
        if self.labelnames:
            raise ValueError(f"{self.name} has labels {self.labelnames}: use .labels(...)")
        return self._children[()]

    def _family(self) -> PromMetric:
        raise NotImplementedError

    def _add(self, family: PromMetric, key: tuple[str, ...], child: _C) -> None:
        raise NotImplementedError

    def collect(self) -> PromMetric:
        """This family as ``prometheus_client`` exposes it, samples sorted by labels."""
        family = self._family()
        for key in sorted(self._children):
            self._add(family, key, self._children[key])
        return family


class Counter(_Family[CounterChild]):
    """A monotonically increasing count. By convention its name ends in ``_total``."""

    type_name = "counter"

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def inc(self, amount: float = 1.0) -> None:
        """Increment an unlabelled counter."""
        self._single().inc(amount)

    def _family(self) -> PromMetric:
        return CounterMetricFamily(self.name, self.help, labels=self.labelnames)

    def _add(self, family: PromMetric, key: tuple[str, ...], child: CounterChild) -> None:
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(key, child.value)


class Gauge(_Family[GaugeChild]):
    """A value that can go up and down."""

    type_name = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def set(self, value: float) -> None:
        """Set an unlabelled gauge."""
        self._single().set(value)

    def inc(self, amount: float = 1.0) -> None:
        self._single().inc(amount)

    def dec(self, amount: float = 1.0) -> None:
        self._single().dec(amount)

    def _family(self) -> PromMetric:
        return GaugeMetricFamily(self.name, self.help, labels=self.labelnames)

    def _add(self, family: PromMetric, key: tuple[str, ...], child: GaugeChild) -> None:
        assert isinstance(family, GaugeMetricFamily)
        family.add_metric(key, child.value)


class Histogram(_Family[HistogramChild]):
    """Observations counted into cumulative ``le`` buckets.

    Args:
        buckets: upper bounds, ascending; ``+Inf`` is always added. Default
            :data:`DEFAULT_BUCKETS`.
    """

    type_name = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Iterable[float] = DEFAULT_BUCKETS,
    ) -> None:
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if not bounds or any(a >= b for a, b in pairwise(bounds)):
            raise ValueError(f"histogram buckets must be strictly ascending, got {bounds}")
        if "le" in labelnames:
            raise ValueError("'le' is reserved for histogram buckets")
        self.buckets = bounds
        super().__init__(name, help, labelnames)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.buckets)

    def observe(self, value: float) -> None:
        """Observe into an unlabelled histogram."""
        self._single().observe(value)

    def _family(self) -> PromMetric:
        return HistogramMetricFamily(self.name, self.help, labels=self.labelnames)

    def _add(self, family: PromMetric, key: tuple[str, ...], child: HistogramChild) -> None:
        assert isinstance(family, HistogramMetricFamily)
        buckets = [(_le(bound), count) for bound, count in child.cumulative()]
        family.add_metric(key, buckets, child.sum)


Metric = Counter | Gauge | Histogram


class Registry:
    """A set of metric families with unique names, exposed as one ``prometheus_client``
    collector on ``prometheus`` (a new ``CollectorRegistry`` when not given)."""

    def __init__(self, prometheus: CollectorRegistry | None = None) -> None:
        self._metrics: dict[str, Metric] = {}
        self.prometheus = prometheus if prometheus is not None else CollectorRegistry()
        self.prometheus.register(_RegistryCollector(self))

    def register(self, metric: Metric) -> None:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} is already registered")
        self._metrics[metric.name] = metric

    def unregister(self, name: str) -> None:
        self._metrics.pop(name, None)

    def get(self, name: str) -> Metric | None:
        return self._metrics.get(name)

    def _get_or_create(self, kind: type[Any], name: str, labelnames: Sequence[str]) -> Any:
        existing = self._metrics.get(name)
        if existing is None:
            return None
        if type(existing) is not kind or existing.labelnames != tuple(labelnames):
            raise ValueError(
                f"metric {name} exists as {existing.type_name}{existing.labelnames}, "
                f"not {kind.type_name}{tuple(labelnames)}"
            )
        return existing

    def counter(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Counter:
        """The counter called ``name``, registered now unless it already is."""
        metric: Counter | None = self._get_or_create(Counter, name, labelnames)
        if metric is None:
            metric = Counter(name, help, labelnames)
            self.register(metric)
        return metric

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Gauge:
        """The gauge called ``name``, registered now unless it already is."""
        metric: Gauge | None = self._get_or_create(Gauge, name, labelnames)
        if metric is None:
            metric = Gauge(name, help, labelnames)
            self.register(metric)
        return metric

    def histogram(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Iterable[float] = DEFAULT_BUCKETS,
    ) -> Histogram:
        """The histogram called ``name``, registered now unless it already is.

        ``buckets`` defaults to :data:`DEFAULT_BUCKETS`; it is ignored if the histogram exists.
        """
        metric: Histogram | None = self._get_or_create(Histogram, name, labelnames)
        if metric is None:
            metric = Histogram(name, help, labelnames, buckets=buckets)
            self.register(metric)
        return metric

    def collect(self) -> Iterator[PromMetric]:
        for name in sorted(self._metrics):
            yield self._metrics[name].collect()

    def render(self) -> str:
        """Everything on the ``prometheus_client`` registry (kubeloop's families, the user's
        metrics, ``process_*``, ...) in text exposition format 0.0.4."""
        return prometheus_client.generate_latest(self.prometheus).decode()


class _RegistryCollector(Collector):
    """Bridges a :class:`Registry` into ``prometheus_client``'s collection."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[PromMetric]:
        return self._registry.collect()

    def describe(self) -> Iterator[PromMetric]:
        # families are added after registration; an empty describe skips the
        # registration-time name check rather than freezing today's names
        return iter(())


REGISTRY = Registry(prometheus_client.REGISTRY)
"""The process-wide default registry (on ``prometheus_client.REGISTRY``, with the
``process_*``, ``python_*`` and the user's own metrics), served by ``/metrics``."""


class WorkQueueMetrics:
    """The ``workqueue_*`` series of one queue; satisfies ``_workqueue.QueueMetrics``.

    Labelled ``name`` and ``controller``, both the controller name, as
    controller-runtime does.
    """

    __slots__ = ("_adds", "_depth", "_latency", "_longest", "_retries", "_unfinished", "_work")

    def __init__(self, metrics: RuntimeMetrics, name: str) -> None:
        self._depth = metrics.workqueue_depth.labels(name, name)
        self._adds = metrics.workqueue_adds_total.labels(name, name)
        self._latency = metrics.workqueue_queue_duration_seconds.labels(name, name)
        self._work = metrics.workqueue_work_duration_seconds.labels(name, name)
        self._retries = metrics.workqueue_retries_total.labels(name, name)
        self._unfinished = metrics.workqueue_unfinished_work_seconds.labels(name, name)
        self._longest = metrics.workqueue_longest_running_processor_seconds.labels(name, name)

    def added(self) -> None:
        self._adds.inc()

    def depth(self, n: int) -> None:
        self._depth.set(n)

    def queue_latency(self, seconds: float) -> None:
        self._latency.observe(seconds)

    def work_duration(self, seconds: float) -> None:
        self._work.observe(seconds)

    def retried(self) -> None:
        self._retries.inc()

    def watch_unfinished(self, probe: Callable[[], tuple[float, float]]) -> None:
        # Computed at scrape time, so no task has to refresh them every 500 ms as client-go does.
        self._unfinished.set_function(lambda: probe()[0])
        self._longest.set_function(lambda: probe()[1])


class RuntimeMetrics:
    """The metric families kubeloop maintains, registered on ``registry``.

    Constructing it twice on one registry returns the same families (registration
    is get-or-create), so components may each build their own handle.

    Args:
        registry: where the families live. Default :data:`REGISTRY`.
    """

    def __init__(self, registry: Registry = REGISTRY) -> None:
        self.registry = registry
        r = registry
        ctl = ("controller",)
        # controller-runtime: pkg/internal/controller/metrics
        self.reconcile_total = r.counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller, by result.",
            ("controller", "result"),
        )
        self.reconcile_errors_total = r.counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller.",
            ctl,
        )
        self.terminal_reconcile_errors_total = r.counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal (not retried) reconciliation errors per controller.",
            ctl,
        )
        self.reconcile_time_seconds = r.histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            ctl,
            buckets=RECONCILE_TIME_BUCKETS,
        )
        self.reconcile_panics_total = r.counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller: the reconciler crashed "
            "with an unexpected exception (not an API, I/O or timeout error).",
            ctl,
        )
        self.reconcile_timeouts_total = r.counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller.",
            ctl,
        )
        self.active_workers = r.gauge(
            "controller_runtime_active_workers",
            "Number of workers currently reconciling, per controller.",
            ctl,
        )
        self.max_concurrent_reconciles = r.gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller.",
            ctl,
        )
        # client-go REST client, as re-exported by controller-runtime
        self.rest_client_requests_total = r.counter(
            "rest_client_requests_total",
            "Number of HTTP requests to the API server, by status code, method and host.",
            ("code", "method", "host"),
        )
        self.rest_client_request_duration_seconds = r.histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, by HTTP method and host (watches excluded).",
            ("verb", "host"),
            buckets=REST_CLIENT_BUCKETS,
        )
        # client-go workqueue, as registered by controller-runtime
        wq = ("name", "controller")
        self.workqueue_depth = r.gauge(
            "workqueue_depth", "Current number of items waiting in the workqueue.", wq
        )
        self.workqueue_adds_total = r.counter(
            "workqueue_adds_total", "Total number of adds handled by the workqueue.", wq
        )
        self.workqueue_queue_duration_seconds = r.histogram(
            "workqueue_queue_duration_seconds",
            "Seconds an item waits in the workqueue before a worker takes it.",
            wq,
            buckets=WORKQUEUE_BUCKETS,
        )
        self.workqueue_work_duration_seconds = r.histogram(
            "workqueue_work_duration_seconds",
            "Seconds a worker spends on an item taken from the workqueue.",
            wq,
            buckets=WORKQUEUE_BUCKETS,
        )
        self.workqueue_retries_total = r.counter(
            "workqueue_retries_total", "Total number of delayed re-adds (retries).", wq
        )
        self.workqueue_unfinished_work_seconds = r.gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; "
            "a steady rise means stuck workers.",
            wq,
        )
        self.workqueue_longest_running_processor_seconds = r.gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running item in the workqueue has been in progress.",
            wq,
        )
        # kubeloop's own: what the writes of a controller cost
        self.api_writes_total = r.counter(
            "kubeloop_api_writes_total",
            "Writes sent to the API server, by controller, verb, resource and subresource.",
            ("controller", "verb", "resource", "subresource"),
        )
        self.writes_skipped_total = r.counter(
            "kubeloop_writes_skipped_total",
            "Writes not sent because they would not have changed anything.",
            ("controller", "resource", "subresource"),
        )
        self.conflicts_total = r.counter(
            "kubeloop_conflicts_total",
            "409 Conflicts met by a controller, by outcome (retried, resolved, gave_up).",
            ("controller", "resource", "outcome"),
        )
        self.conflict_writers_total = r.counter(
            "kubeloop_conflict_writers_total",
            "409 Conflicts by the other writer (field manager) that changed the object since "
            "our read; a conflict caused by two writers counts once for each.",
            ("controller", "other_manager"),
        )
        self.self_triggered_reconciles_total = r.counter(
            "kubeloop_self_triggered_reconciles_total",
            "Reconciles caused only by the controller's own write coming back on the watch.",
            ctl,
        )
        self.spec_fights_detected_total = r.counter(
            "kubeloop_spec_fights_detected_total",
            "Times a spec field was seen flipping back and forth between two field managers.",
            ctl,
        )
        self.reconcile_loops_detected_total = r.counter(
            "kubeloop_reconcile_loops_detected_total",
            "Times a controller was seen re-triggering itself without converging.",
            ctl,
        )
        # leader election, as controller-runtime exposes it
        self.leader_election_master_status = r.gauge(
            "leader_election_master_status",
            "1 if this process holds the named lease, 0 if it is a standby.",
            ("name",),
        )

    def init_controller(self, controller: str, max_concurrent_reconciles: int) -> None:
        """Create a controller's series at zero, as controller-runtime does on start.

        So that ``rate()`` and absent-series alerts see them before the first event.
        """
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(controller, result)
        self.reconcile_errors_total.labels(controller)
        self.terminal_reconcile_errors_total.labels(controller)
        self.reconcile_panics_total.labels(controller)
        self.reconcile_timeouts_total.labels(controller)
        self.active_workers.labels(controller).set(0)
        self.max_concurrent_reconciles.labels(controller).set(max_concurrent_reconciles)

    def workqueue(self, name: str) -> WorkQueueMetrics:
        """The ``workqueue_*`` series for the queue of controller ``name``."""
        return WorkQueueMetrics(self, name)


class WebhookMetrics:
    """The webhook server's families, with controller-runtime's names
    (``pkg/webhook/internal/metrics``), so its dashboards and alerts work unchanged.

    Separate from :class:`RuntimeMetrics` so an operator without webhooks exposes no
    empty webhook families. Labelled ``webhook``: the path a webhook is served at.
    """

    def __init__(self, registry: Registry = REGISTRY) -> None:
        self.requests_total = registry.counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission and conversion requests by HTTP status code.",
            ("webhook", "code"),
        )
        self.latency_seconds = registry.histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission and conversion requests.",
            ("webhook",),
        )
        self.requests_in_flight = registry.gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission and conversion requests being served.",
            ("webhook",),
        )


RUNTIME_METRICS = RuntimeMetrics(REGISTRY)
"""kubeloop's metric families on the default :data:`REGISTRY`."""

CURRENT: contextvars.ContextVar[RuntimeMetrics | None] = contextvars.ContextVar(
    "kubeloop_metrics", default=None
)
"""The metrics of the controller whose reconcile is running (set around each reconcile),
so helpers called inside it (``update_status``) count into its manager's registry."""
