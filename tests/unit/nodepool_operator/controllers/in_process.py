"""The operator's controllers run once in process (:func:`kubeloop.testing.reconcile_once`)
over a fixed :class:`~kubeloop.testing.Snapshot`, with a real :class:`SimulatedCloud` in a
known state: what one reconcile wrote and what it asked the cloud, in one order.

The cloud is the real simulated cloud (a SQLite file), seen through :class:`CloudJournal`,
which only notes each call beside how many writes the reconcile had sent by then, so a test
can say "recorded before created" without a clock.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeloop import Object, Request, Result
from kubeloop.testing import Snapshot, Write, reconcile_once
from nodepool_operator.api import AUTOSCALERS, AWSNODECLASSES, INSTANCES, NODEPOOLS
from nodepool_operator.cloud import (
    ClusterInfo,
    CreateRequest,
    Instance,
    InstanceType,
    SelectorTerm,
    SimulatedCloud,
    Subnet,
)
from nodepool_operator.operator import build_manager
from nodepool_operator.settings import OperatorSettings


def settings(tmp_path: Path, **changes: Any) -> OperatorSettings:
    """The operator's settings with no servers, on a cloud file under ``tmp_path``."""
    return OperatorSettings(
        cloud_state=tmp_path / "cloud.sqlite",
        metrics_bind_address=None,
        health_probe_bind_address=None,
        handle_signals=False,
        **changes,
    )


@dataclass
class CloudJournal:
    """The real cloud, each call noted as ``"<method> <argument>"`` with the number of
    writes the reconcile had made when it was called."""

    cloud: SimulatedCloud
    snapshot: Snapshot | None = None
    calls: list[tuple[str, int]] = field(default_factory=list)

    def _note(self, call: str) -> None:
        self.calls.append((call, len(self.snapshot.writes) if self.snapshot else 0))

    async def create(self, request: CreateRequest) -> Instance:
        self._note(f"create {request.name}")
        return await self.cloud.create(request)

    async def find(self, idempotency_token: str) -> Instance | None:
        self._note(f"find {idempotency_token}")
        return await self.cloud.find(idempotency_token)

    async def delete(self, instance_id: str) -> None:
        self._note(f"delete {instance_id}")
        await self.cloud.delete(instance_id)

    async def describe(self, instance_id: str) -> Instance:
        self._note(f"describe {instance_id}")
        return await self.cloud.describe(instance_id)

    async def list(self, tags: dict[str, str]) -> builtins.list[Instance]:
        self._note("list")
        return await self.cloud.list(tags)

    async def start(self, instance_id: str) -> None:
        self._note(f"start {instance_id}")
        await self.cloud.start(instance_id)

    async def stop(self, instance_id: str) -> None:
        self._note(f"stop {instance_id}")
        await self.cloud.stop(instance_id)

    async def instance_types(self) -> builtins.list[InstanceType]:
        self._note("instance_types")
        return await self.cloud.instance_types()

    async def resolve_image(self, image: str) -> str:
        self._note(f"resolve_image {image}")
        return await self.cloud.resolve_image(image)

    async def describe_cluster(self, name: str) -> ClusterInfo:
        self._note(f"describe_cluster {name}")
        return await self.cloud.describe_cluster(name)

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        # a read, not noted: the controller caches it, so how often it runs is its own
        return await self.cloud.subnets(terms)

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        self._note("security_groups")
        return await self.cloud.security_groups(terms)

    @property
    def region(self) -> str:
        return self.cloud.region

    def mutating(self) -> builtins.list[str]:
        """The calls that change the cloud, in order."""
        verbs = ("create", "delete", "start", "stop")
        return [call for call, _ in self.calls if call.split()[0] in verbs]


@dataclass
class Pass:
    """One reconcile's result, its writes, and the cloud calls around them."""

    result: Result | None
    """None when the reconcile raised (:attr:`error`)."""
    writes: list[Write]
    journal: CloudJournal
    error: Exception | None = None

    @property
    def requeue_after(self) -> float | None:
        """The result's requeue_after (the reconcile must have returned)."""
        assert self.result is not None, f"the reconcile raised {self.error!r}"
        return self.result.requeue_after

    def kinds(self, *, events: bool = False) -> list[str]:
        """``str()`` of each write (Events left out unless asked)."""
        return [str(w) for w in self.writes if events or w.kind != "Event"]

    def events(self) -> list[tuple[str, str]]:
        """(reason, note) of each Event written."""
        return [(w.body["reason"], w.body["note"]) for w in self.writes if w.kind == "Event"]

    def timeline(self) -> list[str]:
        """Writes (Events left out) and mutating cloud calls, in the order they were made."""
        out: list[str] = []
        calls = [(c, n) for c, n in self.journal.calls if c in self.journal.mutating()]
        for index, write in enumerate([*self.writes, None]):
            out += [f"cloud {c}" for c, n in calls if n == index]
            if write is not None and write.kind != "Event":
                out.append(str(write))
        return out

    def status_writes(self) -> list[dict[str, Any]]:
        return [w.body["status"] for w in self.writes if w.subresource == "status"]


def with_uid(obj: Object) -> Object:
    """``obj`` with a uid of its content unless it has one. The snapshot's default
    (``uid-<name>``, resourceVersion ``1``) is the same for two different pods of one name in
    two tests, and the operator keeps pod views by (uid, resourceVersion) for the process,
    as the apiserver lets it (it never reuses a uid): one test would read another's pod."""
    if (obj.get("metadata") or {}).get("uid"):
        return obj
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]
    return {**obj, "metadata": {**obj["metadata"], "uid": f"uid-{digest}"}}


async def reconcile(
    objects: Iterable[Object],
    cloud: SimulatedCloud,
    config: OperatorSettings,
    request: Request,
    *,
    controller: str,
    refuse_evictions: Collection[str] = (),
) -> Pass:
    """One reconcile of ``controller`` for ``request`` over ``objects`` and ``cloud``."""
    journal = CloudJournal(cloud)
    snapshot = Snapshot(
        [with_uid(obj) for obj in objects],
        resources=[NODEPOOLS, INSTANCES, AWSNODECLASSES, AUTOSCALERS],
        refuse_evictions=refuse_evictions,
    )
    journal.snapshot = snapshot
    mgr = build_manager(snapshot.client, journal, config, controllers=(controller,))
    try:
        result, writes = await reconcile_once(mgr, request)
    except Exception as err:  # the writes before it are the test's to look at
        return Pass(None, list(snapshot.writes), journal, err)
    return Pass(result, writes, journal)
