"""The reflector's pauses: a watch that the server drops at once, and relists, back off
(client-go's reflector backoff) instead of hammering the apiserver."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kubeloop._client import Client
from kubeloop._config import ClusterConfig
from kubeloop._reflector import Reflector, ReflectorOptions
from kubeloop._resource import CONFIGMAPS
from kubeloop._store import Store
from kubeloop._transport import Response
from tests.unit.kubeloop.test_client import FakeStream, FakeTransport, status


def _list(rv: str) -> Response:
    body = {"kind": "ConfigMapList", "metadata": {"resourceVersion": rv}, "items": []}
    return Response(200, {}, json.dumps(body).encode())


class _Transport(FakeTransport):
    """Lists answer from ``replies``; every watch is the next of ``streams``."""

    def __init__(self, replies: list[Response], streams: list[FakeStream]) -> None:
        super().__init__(*replies)
        self.streams = streams

    def stream(self, method: str, path: str, **kwargs: Any) -> Any:
        self._stream = self.streams.pop(0) if self.streams else FakeStream(200, [])
        return super().stream(method, path, **kwargs)


async def _run(transport: _Transport, pauses: int, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) >= pauses:
            raise asyncio.CancelledError

    monkeypatch.setattr("kubeloop._reflector.asyncio.sleep", fake_sleep)
    client = Client(ClusterConfig("https://h"), transport=transport, qps=None)
    opts = ReflectorOptions(backoff_initial=1.0, backoff_max=4.0)
    reflector = Reflector(client, CONFIGMAPS, Store(), lambda e: None, options=opts)
    with pytest.raises(asyncio.CancelledError):
        await reflector.run()
    return slept


async def test_watches_dropped_at_once_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = _Transport([_list("5")], [])  # every watch ends at once, empty
    slept = await _run(transport, 4, monkeypatch)
    # jitter stretches each pause by up to 2x: 1, 2, 4, 4 (capped)
    for pause, base in zip(slept, [1.0, 2.0, 4.0, 4.0], strict=True):
        assert base <= pause <= 2 * base
    watches = [c for c in transport.calls if c[2].get("watch") == "true"]
    assert len(watches) == 4
    assert all(c[2]["resourceVersion"] == "5" for c in watches), "no relist, resumed"


async def test_a_watch_with_events_resumes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    event = json.dumps(
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "6"}}}
    ).encode()
    transport = _Transport([_list("5")], [FakeStream(200, [event]), FakeStream(200, [])])
    await _run(transport, 1, monkeypatch)
    watches = [c[2]["resourceVersion"] for c in transport.calls if c[2].get("watch") == "true"]
    assert watches == ["5", "6"], "the second watch followed the first without a pause"


async def test_relists_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = FakeStream(410, [], status(410, "Expired", "too old"))
    transport = _Transport([_list("5"), _list("9"), _list("12")], [gone, gone, gone])
    slept = await _run(transport, 3, monkeypatch)
    assert len(slept) == 3
    assert 1.0 <= slept[0] <= 2.0
    assert 2.0 <= slept[1] <= 4.0
    lists = [c for c in transport.calls if "watch" not in c[2]]
    assert len(lists) == 3, "each 410 relisted once, after a pause"


async def test_a_throttled_watch_waits_for_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    throttled = FakeStream(429, [], status(429, "TooManyRequests", "slow down"))
    throttled.headers = {"Retry-After": "7"}
    transport = _Transport([_list("5")], [throttled])
    slept = await _run(transport, 1, monkeypatch)
    assert 7.0 <= slept[0] < 7.2, "the server's 7 s, not the 1 s first backoff step"
