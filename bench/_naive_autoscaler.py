"""The baseline for ``bench/autoscaler_scenarios.py``: the autoscaler the seeds start from.

Every ``frequency`` seconds it lists the pods of its namespaces, counts those that are
``Pending`` with ``PodScheduled=False, reason=Unschedulable`` (it reads nothing else: not
the scheduler's message, not the node name, gates, nominations or priorities, not the
pool's nodes) and raises the pool's ``targetNodes`` by that count, one node per pod, through
the scale subresource, clamped to the pool's ``maxNodes`` (the API refuses more). It never
lowers the target. The same NodePool controller as in the operator turns the target into
VMs and Nodes, so the two runs differ only in the decision.

It counts its own requests: the operator's writes come from its metrics registry, and this
loop writes with its own client, outside any controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeloop import PODS, Client, Conflict
from nodepool_operator.api import NODEPOOLS


@dataclass(frozen=True)
class NaiveDecision:
    """One raise: when (the given clock), the target before and after, the pods counted."""

    at: float
    before: int
    after: int
    pods: int


@dataclass
class NaiveAutoscaler:
    """One node per unschedulable pod, every ``frequency`` seconds; see the module docstring.

    The first look comes ``phase`` seconds after :meth:`run` starts (``frequency`` when not
    given), then every ``frequency``: a periodic loop's phase against the pods' arrival is
    chance, so the benchmark draws it rather than handing the baseline its worst case.
    """

    client: Client
    pool: str
    namespaces: Sequence[str]
    frequency: float
    phase: float | None = None
    clock: Callable[[], float] = time.monotonic
    ticks: int = 0
    reads: int = 0
    writes: int = 0
    conflicts: int = 0
    decisions: list[NaiveDecision] = field(default_factory=list)
    #: What ended the loop, if anything but cancellation did.
    error: BaseException | None = None

    async def run(self) -> None:
        """Loop until cancelled; an error ends the loop and is kept in :attr:`error`."""
        try:
            max_nodes = int((await self._get_pool())["spec"].get("maxNodes", 10))
            await asyncio.sleep(self.frequency if self.phase is None else self.phase)
            while True:
                await self.tick(max_nodes)
                await asyncio.sleep(self.frequency)
        except Exception as err:  # the caller checks .error; a dead task says nothing
            self.error = err

    async def tick(self, max_nodes: int) -> None:
        self.ticks += 1
        pending = 0
        for namespace in self.namespaces:
            self.reads += 1
            pods = (await self.client.list(PODS, namespace))["items"]
            pending += sum(1 for pod in pods if _unschedulable(pod))
        if pending:
            await self._raise(pending, max_nodes)

    async def _raise(self, pods: int, max_nodes: int) -> None:
        for _ in range(5):  # a read-modify-write; another writer may be in between
            self.reads += 1
            scale = await self.client.get_scale(NODEPOOLS, self.pool)
            before = int(scale.get("spec", {}).get("replicas") or 0)
            after = min(before + pods, max_nodes)
            if after <= before:
                return
            scale["spec"]["replicas"] = after
            try:
                await self.client.update_scale(NODEPOOLS, scale)
            except Conflict:
                self.conflicts += 1
                continue
            self.writes += 1
            self.decisions.append(NaiveDecision(self.clock(), before, after, pods))
            return

    async def _get_pool(self) -> dict[str, Any]:
        self.reads += 1
        return dict(await self.client.get(NODEPOOLS, self.pool))

    def figures(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "first_look_after_s": self.frequency if self.phase is None else self.phase,
            "reads": self.reads,
            "scale_writes": self.writes,
            "conflicts": self.conflicts,
            "raises": [f"{d.before}->{d.after} ({d.pods} pods)" for d in self.decisions],
        }


def _unschedulable(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or []
    )


@contextlib.asynccontextmanager
async def running(naive: NaiveAutoscaler) -> AsyncIterator[NaiveAutoscaler]:
    """Run ``naive`` in the background for the block."""
    task = asyncio.create_task(naive.run(), name=f"naive-autoscaler-{naive.pool}")
    try:
        yield naive
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
