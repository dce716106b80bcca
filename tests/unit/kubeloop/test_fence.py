"""The write fence's bound on a write it lets through (the wire is in
``tests/integration/test_fence.py``; here the transport below it is a stand-in that
records what it was asked and times out as told)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import NotLeader, _log
from kubeloop._errors import RequestTimeout
from kubeloop._fence import FencedTransport
from kubeloop._transport import Response


class Recorder:
    def __init__(self, *, times_out: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.times_out = times_out

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self.calls.append((method, kwargs))
        if self.times_out:
            raise RequestTimeout(f"{method} {path}: timed out")
        return Response(200, {}, b"{}")


def fence(inner: Recorder, left: float) -> FencedTransport:
    f = FencedTransport(inner, lambda controller: controller == "leader-only")  # type: ignore[arg-type]
    f.lease_left = lambda: left
    return f


@pytest.fixture(autouse=True)
def leader_only() -> Any:
    token = _log.CONTROLLER.set("leader-only")
    yield
    _log.CONTROLLER.reset(token)


async def test_a_write_carries_the_lease_left_as_its_deadline_on_both_ends() -> None:
    inner = Recorder()
    await fence(inner, 2.5).request("PUT", "/x", params={"fieldManager": "m"})
    [(_, kwargs)] = inner.calls
    assert kwargs["timeout"] == 2.5
    assert kwargs["params"] == {"fieldManager": "m", "timeout": "2500ms"}


async def test_a_shorter_deadline_of_the_caller_wins_and_its_timeout_stays_a_timeout() -> None:
    inner = Recorder(times_out=True)
    f = fence(inner, 9.0)
    with pytest.raises(RequestTimeout):
        await f.request("POST", "/x", timeout=1.0)
    assert inner.calls[0][1]["params"] == {"timeout": "1000ms"}
    assert f.abandoned == 0


async def test_a_write_that_outlives_the_lease_is_abandoned_as_not_leader() -> None:
    inner = Recorder(times_out=True)
    f = fence(inner, 0.2)
    with pytest.raises(NotLeader, match="ran out while it was in flight"):
        await f.request("PATCH", "/x", timeout=5.0)
    assert (f.abandoned, f.refused) == (1, 0)


async def test_reads_and_unfenced_controllers_pass_untouched() -> None:
    inner = Recorder()
    f = fence(inner, 0.0)
    await f.request("GET", "/x")
    token = _log.CONTROLLER.set("everywhere")
    try:
        await f.request("PUT", "/x")
    finally:
        _log.CONTROLLER.reset(token)
    assert [kwargs for _, kwargs in inner.calls] == [{}, {}]
    with pytest.raises(NotLeader, match="not held"):
        await f.request("DELETE", "/x")
    assert f.refused == 1
