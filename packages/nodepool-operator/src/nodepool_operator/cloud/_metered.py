"""Every cloud call counted and timed, whichever provider is behind the port.

A decorator around :class:`CloudProvider`, wired in by the composition root, so the
controllers stay free of metrics code and the simulated and real clouds report the same
series: ``nodepool_cloud_requests_total{operation, outcome}`` (``outcome`` is ``ok`` or the
typed error's class name, e.g. ``QuotaExceeded``) and
``nodepool_cloud_request_duration_seconds{operation}``. The scale-up-failure alert in
config/prometheus/rules.yaml reads the first.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from kubeloop import Registry

from ._port import (
    CloudError,
    CloudProvider,
    ClusterInfo,
    CreateRequest,
    Instance,
    InstanceType,
    SelectorTerm,
    Subnet,
)

T = TypeVar("T")

#: Cloud APIs answer in tens of milliseconds to a few seconds (a RunInstances).
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class MeteredCloud:
    """:class:`CloudProvider` that delegates to ``inner`` and records each call."""

    def __init__(self, inner: CloudProvider, registry: Registry) -> None:
        self.inner = inner
        self._requests = registry.counter(
            "nodepool_cloud_requests_total",
            "Cloud API calls by operation and outcome (ok, or the port's error class).",
            ("operation", "outcome"),
        )
        self._duration = registry.histogram(
            "nodepool_cloud_request_duration_seconds",
            "Cloud API call latency by operation.",
            ("operation",),
            buckets=BUCKETS,
        )

    async def _call(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        start = time.monotonic()
        outcome = "ok"
        try:
            return await fn()
        except CloudError as err:
            outcome = type(err).__name__
            raise
        except Exception:
            outcome = "unexpected"
            raise
        finally:
            self._requests.labels(operation, outcome).inc()
            self._duration.labels(operation).observe(time.monotonic() - start)

    async def create(self, request: CreateRequest) -> Instance:
        return await self._call("create", lambda: self.inner.create(request))

    async def find(self, idempotency_token: str) -> Instance | None:
        return await self._call("find", lambda: self.inner.find(idempotency_token))

    async def delete(self, instance_id: str) -> None:
        await self._call("delete", lambda: self.inner.delete(instance_id))

    async def describe(self, instance_id: str) -> Instance:
        return await self._call("describe", lambda: self.inner.describe(instance_id))

    async def list(self, tags: dict[str, str]) -> builtins.list[Instance]:
        return await self._call("list", lambda: self.inner.list(tags))

    async def start(self, instance_id: str) -> None:
        await self._call("start", lambda: self.inner.start(instance_id))

    async def stop(self, instance_id: str) -> None:
        await self._call("stop", lambda: self.inner.stop(instance_id))

    async def instance_types(self) -> builtins.list[InstanceType]:
        return await self._call("instance_types", self.inner.instance_types)

    async def resolve_image(self, image: str) -> str:
        return await self._call("resolve_image", lambda: self.inner.resolve_image(image))

    async def describe_cluster(self, name: str) -> ClusterInfo:
        return await self._call("describe_cluster", lambda: self.inner.describe_cluster(name))

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        return await self._call("subnets", lambda: self.inner.subnets(terms))

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        return await self._call("security_groups", lambda: self.inner.security_groups(terms))

    @property
    def region(self) -> str:
        return self.inner.region
