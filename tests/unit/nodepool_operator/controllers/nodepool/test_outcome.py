"""When a pass over a live pool looks again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodepool_operator.api import InstanceRecord
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers.nodepool import _outcome
from tests.unit.nodepool_operator.controllers.nodepool.tables import NOW, SETTINGS, pool, rec, vm


def requeue(records: Sequence[InstanceRecord], vms: Sequence[Instance], **given: Any) -> float:
    args: dict[str, Any] = {
        "waits": [],
        "draining": False,
        "drain_wait": None,
        "gc_wait": None,
        "gate_remaining": None,
        "resting": False,
    }
    args.update(given)
    return _outcome.requeue_after(
        pool=pool(len(records)),
        records=records,
        vms={v.id: v for v in vms},
        now=NOW,
        settings=SETTINGS,
        **args,
    )


def test_requeue_idle_after_one_gc_grace() -> None:
    assert requeue([rec("a")], [vm("a")]) == SETTINGS.gc_grace_seconds


def test_requeue_while_booting_when_the_vm_should_be_running() -> None:
    assert requeue([rec("a", "pending")], [vm("a", "pending", age=2)]) == 3.0


def test_requeue_draining_and_gate() -> None:
    assert requeue([rec("a")], [vm("a")], draining=True) == _outcome.DRAIN_POLL
    assert requeue([rec("a")], [vm("a")], draining=True, drain_wait=0.01) == _outcome.MIN_POLL
    assert requeue([rec("a")], [vm("a")], gate_remaining=7.0) == 7.0
