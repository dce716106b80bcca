"""The Autoscaler's reconcile keeps the event loop free for a large input: reading the pods it
observed (a pod's view is read once per version, ~0.5 ms each) and deciding (the plan) are
pure and run in a worker thread, each in one call, never in one piece on the loop's thread.
``bench/scale.py`` measures what that buys (the loop's longest callback during a reconcile of
2,000 pods); this says where the work runs, by counts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from nodepool_operator.controllers.autoscaler import controller, decide, observe
from tests.unit.nodepool_operator.controllers.autoscaler.test_reconcile import (
    Passes,
    node,
    pods,
    pool,
    scale_targets,
    scaler,
)


async def test_observing_and_deciding_run_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop_thread = threading.current_thread()
    calls: list[tuple[str, bool]] = []

    def noted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, threading.current_thread() is loop_thread))
            return fn(*args, **kwargs)

        return call

    monkeypatch.setattr(observe, "snapshot", noted("snapshot", observe.snapshot))
    monkeypatch.setattr(controller, "decide", noted("decide", decide.decide))
    # 400 pods of 20Gi, 4 to a 96Gi node: one ready node holds 4, 99 new nodes the rest (names
    # of their own: pod views are kept by uid and resourceVersion for the process)
    _, writes = await Passes().run(
        scaler(), pool(max_nodes=200), node("offload-ready"), *pods("offload", 400, memory="20Gi")
    )
    assert calls == [("snapshot", False), ("decide", False)]
    assert scale_targets(writes) == [99]
