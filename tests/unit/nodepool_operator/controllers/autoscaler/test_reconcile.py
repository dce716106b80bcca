"""The Autoscaler controller's reconcile, in process (Karpenter's ``ExpectObjectReconciled``):
each pass runs the real controller, its informers, observe, decide and act, on a manager
whose client reads a fixed :class:`~kubeloop.testing.Snapshot`; the writes are recorded, not
applied, and asserted on: the NodePool's targetNodes through its scale subresource, the
Autoscaler's status, the Events, the reservation patches, and nothing when nothing changed.

A scenario of several passes builds one manager per pass on that pass's snapshot and hands the
same memory, first-seen times and clock to each pass's controller, as one long-running
controller keeps them; time moves only by setting the clock. What needs the real cluster
(convergence, the scheduler, drain, crash) stays in tests/e2e.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubeloop import Added, Request, Result
from kubeloop.testing import Snapshot, Write, new_manager, reconcile_once
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers._reserve import RESERVED_KEY
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers._unneeded import CANDIDATE_TAINT
from nodepool_operator.controllers._unneeded import UNNEEDED_ANNOTATION as UNNEEDED
from nodepool_operator.controllers.autoscaler import AutoscalerController
from nodepool_operator.controllers.autoscaler._batching import FirstSeen
from nodepool_operator.controllers.autoscaler.decide import Memory
from nodepool_operator.scheduling import DO_NOT_DISRUPT
from nodepool_operator.settings import OperatorSettings
from tests import factories

#: The start of every scenario, on the controller's monotonic clock and on the wall clock; a
#: pass's wall time moves with its monotonic time.
NOW = 10_000.0
WALL = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
#: The pod annotations other autoscalers honour, which the Autoscaler honours too.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
#: Deciding at once: the batching test sets its own window.
SETTINGS = OperatorSettings(batch_window_seconds=0.0)

pending = functools.partial(factories.pod, namespace="prod", memory="28Gi", unschedulable=True)


def pods(prefix: str, count: int, memory: str = "28Gi") -> list[dict[str, Any]]:
    return [pending(f"{prefix}-{i}", memory=memory, uid=f"uid-{prefix}-{i}") for i in range(count)]


def scaler(**spec: Any) -> dict[str, Any]:
    obj = factories.autoscaler("as", pool="big", namespaces=["prod"], **spec)
    obj["metadata"]["generation"] = 3
    return obj


def pool(target: int = 0, *, max_nodes: int = 10, **spec: Any) -> dict[str, Any]:
    return factories.nodepool(
        "big",
        target=target,
        instance_type="mem96.large",
        max_nodes=max_nodes,
        minNodes=spec.pop("min_nodes", 0),
        generation=1,
        **spec,
    )


def wall(mono: float) -> datetime:
    return WALL + timedelta(seconds=mono - NOW)


def node(
    name: str, *, ready: bool = True, ready_since: float = NOW - 300, **fields: Any
) -> dict[str, Any]:
    """A Node of pool big, Ready (or not) since ``ready_since`` (the scenario's clock)."""
    since = wall(ready_since)
    return factories.node(
        name,
        labels={POOL_LABEL: "big"},
        allocatable={"cpu": "12", "memory": "96Gi", "pods": "110"},
        conditions=[
            factories.condition(
                "Ready", ready, lastTransitionTime=since.strftime("%Y-%m-%dT%H:%M:%SZ")
            )
        ],
        **fields,
    )


@dataclass
class Passes:
    """One Autoscaler's reconciles over time, each on its own snapshot."""

    settings: OperatorSettings = field(default_factory=lambda: SETTINGS)
    now: float = NOW
    memory: dict[str, Memory] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.first_seen = FirstSeen(self.clock)

    def clock(self) -> float:
        return self.now

    async def run(
        self, *objects: dict[str, Any], request: str = "as", controller: str = "autoscaler"
    ) -> tuple[Result, list[Write]]:
        """One reconcile of ``request`` by ``controller`` (the Autoscaler's, by default)."""
        snapshot = Snapshot(
            objects,
            resources=[NODEPOOLS, AUTOSCALERS],
            scale_paths={NODEPOOLS: "spec.targetNodes"},
        )
        mgr = new_manager(snapshot.client)
        AutoscalerController(
            mgr,
            self.settings,
            clock=self.clock,
            wall=lambda: wall(self.now),
            memory=self.memory,
            first_seen=self.first_seen,
        ).register()
        return await reconcile_once(mgr, Request(request), controller=controller)


async def reconcile(*objects: dict[str, Any]) -> tuple[Result, list[Write]]:
    return await Passes().run(*objects)


def scale_targets(writes: list[Write]) -> list[int]:
    """The targets written, through the NodePool's scale subresource."""
    return [
        w.body["spec"]["replicas"]
        for w in writes
        if (w.verb, w.kind, w.subresource, w.name) == ("update", "NodePool", "scale", "big")
    ]


def status(writes: list[Write]) -> dict[str, Any]:
    """The one Autoscaler status written, its conditions as type -> (status, reason)."""
    [body] = [w.body for w in writes if (w.kind, w.subresource) == ("Autoscaler", "status")]
    out = dict(body["status"])
    out["conditions"] = {
        c["type"]: (c["status"], c.get("reason")) for c in out.get("conditions", [])
    }
    return out


def events(writes: list[Write]) -> list[tuple[str, str, str]]:
    """(kind/name regarded, reason, note) of each Event, in order."""
    return [
        (
            f"{w.body['regarding']['kind']}/{w.body['regarding']['name']}",
            w.body["reason"],
            w.body["note"],
        )
        for w in writes
        if w.kind == "Event"
    ]


def told(writes: list[Write]) -> list[tuple[str, str]]:
    return [(who, reason) for who, reason, _ in events(writes)]


def patches(writes: list[Write]) -> list[tuple[str, Any]]:
    """The patches of objects' specs and metadata (not the nominations, :func:`nominated`)."""
    return [(str(w), w.body) for w in writes if w.verb == "patch" and w.subresource != "status"]


def nominated(writes: list[Write]) -> list[tuple[str, str | None]]:
    """(pod, node) of each nomination written (``None``: withdrawn)."""
    return [
        (w.name, w.body["status"]["nominatedNodeName"])
        for w in writes
        if (w.verb, w.kind, w.subresource) == ("patch", "Pod", "status")
    ]


# --- scale up -------------------------------------------------------------------------------


async def test_scale_up_writes_the_target_then_the_status_then_the_events() -> None:
    result, writes = await reconcile(scaler(), pool(), *pods("w", 6))
    decision = "scale up 0 -> 2: 6 pods need 2 new mem96.large nodes"
    assert [str(w) for w in writes] == [
        "update NodePool/scale big",
        "update Autoscaler/status as",
        *(f"create Event default/{w.name}" for w in writes[2:]),
    ]
    scale = writes[0]
    assert scale.field_manager == "kubeloop-autoscaler"
    assert scale.body == {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "big", "uid": "uid-big", "resourceVersion": "1"},
        "spec": {"replicas": 2},
    }
    assert status(writes) == {
        "pendingPods": 6,
        "unschedulablePods": 6,
        "lastScaleTime": "2026-01-01T12:00:00Z",
        "lastDecision": decision,
        "observedGeneration": 3,
        "conditions": {"Ready": ("True", "Watching")},
    }
    [ready] = writes[1].body["status"]["conditions"]
    assert (ready["lastTransitionTime"], ready["message"]) == (
        "2026-01-01T12:00:00Z",
        "scaling NodePool big for pods in prod",
    )
    assert events(writes) == [
        ("Autoscaler/as", "TriggeredScaleUp", f"NodePool big: {decision}"),
        ("NodePool/big", "TriggeredScaleUp", f"NodePool big: {decision}"),
    ]
    assert result == Result(requeue_after=30.0)  # the Autoscaler's frequency


async def test_booting_nodes_are_counted_and_a_second_wave_asks_only_for_the_rest() -> None:
    _, writes = await reconcile(scaler(), pool(target=2), *pods("w", 6))
    assert scale_targets(writes) == []
    assert events(writes) == []
    assert status(writes)["lastDecision"] == (
        "no scale up (target 2): 6 pods fit existing or booting nodes"
    )
    _, writes = await reconcile(scaler(), pool(target=2), *pods("w", 9))
    assert scale_targets(writes) == [3]
    assert status(writes)["lastDecision"] == (
        "scale up 2 -> 3: 3 pods need 1 new mem96.large node, 6 fit existing or booting nodes"
    )


async def test_room_on_a_ready_node_is_used_first() -> None:
    _, writes = await reconcile(scaler(), pool(target=1), *pods("w", 1), node("n-0"))
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        "no scale up (target 1): 1 pod fit existing or booting nodes"
    )


async def test_a_burst_is_planned_once_when_it_has_gone_quiet() -> None:
    passes = Passes(settings=OperatorSettings(batch_window_seconds=1.0))
    world = [scaler(), pool(), *pods("w", 3)]
    result, writes = await passes.run(*world)
    assert (writes, result) == ([], Result(requeue_after=1.0))
    passes.now += 0.5  # more of the burst arrives: the quiet time starts again
    world += pods("x", 6)
    result, writes = await passes.run(*world)
    # not looked at before the first pods' window ends: these can only make it end later
    assert (writes, result) == ([], Result(requeue_after=0.5))
    passes.now += 0.6
    result, writes = await passes.run(*world)
    assert writes == []  # the second wave's window is not over
    assert result.requeue_after == pytest.approx(0.4)
    passes.now += 0.4
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [3]  # the nine pods in one decision
    assert status(writes)["lastDecision"] == (
        "scale up 0 -> 3: 9 pods need 3 new mem96.large nodes"
    )


async def test_a_burst_is_read_once_per_window_not_once_per_pod_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod event of a burst brings the Autoscaler back; until the end of the window a
    pass found, it does not read every pending pod again (CPU the scheduler marking the
    burst needs), whatever arrives; a spec change is read at once."""
    from nodepool_operator.controllers.autoscaler import observe

    reads: list[int] = []
    real = observe.snapshot

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(len(kwargs["pods"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(observe, "snapshot", counted)
    passes = Passes(settings=OperatorSettings(batch_window_seconds=1.0))
    world = [scaler(), pool(), *pods("w", 3)]
    await passes.run(*world)
    for i in range(4):  # four more pods, a pass each, within the first window
        passes.now += 0.2
        world.append(pending(f"x-{i}", uid=f"uid-x-{i}"))
        result, writes = await passes.run(*world)
        assert writes == []
        assert result.requeue_after == pytest.approx(1.0 - 0.2 * (i + 1))
    assert reads == [3]
    changed = scaler(maxNodes=5)
    changed["metadata"]["generation"] = 4
    result, _ = await passes.run(changed, *world[1:])
    assert reads == [3, 7]  # the new spec is read at once
    assert result.requeue_after == pytest.approx(1.0)  # x-3 came 0 s ago
    passes.now += 1.0
    _, writes = await passes.run(changed, *world[1:])
    assert reads == [3, 7, 7]
    assert scale_targets(writes) == [3]


async def test_pods_the_watch_brings_while_a_pass_reads_are_a_burst_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass takes its pods from the cache on the loop, then reads them in a worker thread
    while the watch goes on: pods marked unschedulable meanwhile are not in its snapshot. It
    planned as of its read, so the next pass gathers those pods as a new burst. Taken as
    planned (a time read after the thread), they were planned at once, without the window:
    one node ahead of the rest of the burst (one S1 run in twelve, docs/benchmarks.md)."""
    from nodepool_operator.controllers.autoscaler import observe

    passes = Passes(settings=OperatorSettings(batch_window_seconds=1.0))
    early = pods("w", 3)
    real = observe.snapshot

    def slow(*args: Any, **kwargs: Any) -> Any:
        passes.now += 0.1  # the thread's time, while the watch shows the first pods
        for obj in early:
            passes.first_seen.observe(Added(obj))
        return real(*args, **kwargs)

    monkeypatch.setattr(observe, "snapshot", slow)
    _, writes = await passes.run(scaler(), pool())  # no pod pending when it read
    assert scale_targets(writes) == []
    monkeypatch.setattr(observe, "snapshot", real)
    result, writes = await passes.run(scaler(), pool(), *early)
    assert scale_targets(writes) == []
    assert result.requeue_after == pytest.approx(1.0)  # their window starts when seen
    passes.now += 1.5  # quiet for more than a window
    _, writes = await passes.run(scaler(), pool(), *early)
    assert scale_targets(writes) == [1]


# --- what caps the raise, what sets pods aside ------------------------------------------------


async def test_the_pools_max_nodes_caps_the_raise_and_tells_the_pods_left_waiting() -> None:
    _, writes = await reconcile(scaler(), pool(max_nodes=2), *pods("w", 9))
    assert scale_targets(writes) == [2]
    assert status(writes)["lastDecision"] == (
        "scale up 0 -> 2: 6 pods need 2 new mem96.large nodes; 3 pods waiting: pool at max 2 nodes"
    )
    said = told(writes)
    assert said[:3] == [
        ("Autoscaler/as", "TriggeredScaleUp"),
        ("NodePool/big", "TriggeredScaleUp"),
        ("Autoscaler/as", "NotTriggerScaleUp"),
    ]
    assert sorted(said[3:]) == [(f"Pod/w-{i}", "NotTriggerScaleUp") for i in (6, 7, 8)]


async def test_the_autoscalers_max_nodes_caps_below_the_pools() -> None:
    _, writes = await reconcile(scaler(maxNodes=1), pool(max_nodes=5), *pods("w", 6))
    assert scale_targets(writes) == [1]


async def test_at_max_nodes_nothing_is_written_to_the_pool() -> None:
    _, writes = await reconcile(
        scaler(), pool(target=2, max_nodes=2), *pods("w", 9), node("n-0"), node("n-1")
    )
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        "no scale up (target 2): 6 pods fit existing or booting nodes; "
        "3 pods waiting: pool at max 2 nodes"
    )


async def test_a_pod_that_fits_no_node_triggers_nothing_and_is_told_why() -> None:
    _, writes = await reconcile(scaler(), pool(), *pods("huge", 1, memory="120Gi"))
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        "no scale up (target 0); 1 pod too big (memory 120Gi > 96Gi)"
    )
    assert told(writes) == [
        ("Autoscaler/as", "NotTriggerScaleUp"),
        ("Pod/huge-0", "NotTriggerScaleUp"),
    ]


async def test_a_missing_secret_is_not_capacity_and_a_present_one_is() -> None:
    db = pending("db", volumes=[{"name": "s", "secret": {"secretName": "db-password"}}])
    _, writes = await reconcile(scaler(), pool(), db)
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        'no scale up (target 0); 1 pod MissingSecret (secret "db-password" not found)'
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": factories.metadata("db-password", "prod"),
    }
    _, writes = await reconcile(scaler(), pool(), db, secret)
    assert scale_targets(writes) == [1]


async def test_a_missing_volume_claim_is_not_capacity() -> None:
    app = pending("app", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    _, writes = await reconcile(scaler(), pool(), app)
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        'no scale up (target 0); 1 pod MissingPVC (persistentvolumeclaim "data" not found)'
    )


# --- landing on the planned node -----------------------------------------------------------


async def landing(*extra: dict[str, Any], after: float) -> list[list[Write]]:
    """w-0 planned onto a new node (0 -> 1); a minute later n-0 is Ready (with ``extra``
    beside it) and w-0 still pending; ``after`` seconds later the Autoscaler looks again:
    each pass's writes."""
    passes = Passes()
    _, first = await passes.run(scaler(), pool(), *pods("w", 1))
    assert scale_targets(first) == [1]
    passes.now += 60
    world = (scaler(), pool(target=1), *pods("w", 1), node("n-0"), *extra)
    _, ready = await passes.run(*world)
    passes.now += after
    _, later = await passes.run(*world)
    return [first, ready, later]


async def test_a_pod_in_the_schedulers_grace_on_its_new_node_drives_nothing() -> None:
    _, ready, later = await landing(after=5)
    assert scale_targets(ready) == scale_targets(later) == []
    assert status(later)["lastDecision"] == (
        "no scale up (target 1); 1 pod waiting for the scheduler on new Ready nodes"
    )


async def test_a_pod_its_new_node_did_not_take_is_reported_not_scaled_for_again() -> None:
    _, ready, later = await landing(after=31)
    assert scale_targets(ready) == scale_targets(later) == []
    assert status(later)["lastDecision"] == (
        "no scale up (target 1); 1 pod NotTakenByNewNode "
        "(a new node planned for it became Ready and did not take it)"
    )
    assert ("Pod/w-0", "NotTriggerScaleUp") in told(later)


async def test_a_pod_crowded_out_of_its_new_node_is_planned_again() -> None:
    others = [
        factories.pod(f"r-{i}", namespace="prod", memory="30Gi", node="n-0", phase="Running")
        for i in range(3)
    ]
    _, ready, _ = await landing(*others, after=31)
    assert scale_targets(ready) == [2]
    assert status(ready)["lastDecision"] == "scale up 1 -> 2: 1 pod needs 1 new mem96.large node"


async def test_the_new_node_a_pod_is_landing_on_is_not_scaled_down_for_empty() -> None:
    """The pod settling onto its new Ready node is left out of the plan; the node, with
    nothing bound yet, looks empty: scale-down must wait for it, not take that node (seen as
    0 -> 1 -> 0 -> 1 under load with a short unneeded time)."""
    passes = Passes()
    quick = functools.partial(scaler, scaleDownEnabled=True, scaleDownUnneededTime="1s")
    _, first = await passes.run(quick(), pool(), *pods("w", 1))
    assert scale_targets(first) == [1]
    passes.now += 60
    world = (quick(), pool(target=1), *pods("w", 1), node("n-0"))
    for _ in range(3):
        _, writes = await passes.run(*world)
        assert scale_targets(writes) == []
        passes.now += 5


# --- provisioning timeout --------------------------------------------------------------------


async def test_nodes_that_never_register_are_given_up_after_the_provision_time() -> None:
    passes = Passes()
    world = (scaler(), pool(target=3), *pods("w", 3), node("n-0"))
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == []
    passes.now += 899
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == []
    passes.now += 2
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [1]
    assert status(writes)["conditions"]["Provisioning"] == ("False", "ProvisionTimedOut")
    assert told(writes)[:2] == [
        ("Autoscaler/as", "ProvisionTimedOut"),
        ("NodePool/big", "ProvisionTimedOut"),
    ]
    # backing off: pods that need new nodes wait, until the backoff is over
    after = (scaler(), pool(target=1), *pods("w", 6), node("n-0"))
    passes.now += 10
    _, writes = await passes.run(*after)
    assert scale_targets(writes) == []
    assert status(writes)["lastDecision"] == (
        "no scale up (target 1): provisioning timed out, scale-up backed off"
    )
    passes.now += 300
    _, writes = await passes.run(*after)
    assert scale_targets(writes) == [2]


# --- scale down ---------------------------------------------------------------------------

scaling_down = functools.partial(scaler, scaleDownEnabled=True, scaleDownUnneededTime="10m")
#: A scale-down is told on the Autoscaler and its pool.
SCALED_DOWN = [("Autoscaler/as", "ScaleDown"), ("NodePool/big", "ScaleDown")]


async def test_empty_nodes_go_after_the_unneeded_time_and_not_before() -> None:
    passes = Passes()
    world = (scaling_down(), pool(target=2), node("n-0"), node("n-1"))
    result, writes = await passes.run(*world)
    assert (scale_targets(writes), result) == ([], Result(requeue_after=30.0))
    passes.now += 590
    result, writes = await passes.run(*world)
    assert (scale_targets(writes), result) == ([], Result(requeue_after=10.0))
    passes.now += 10
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [0]
    assert told(writes) == SCALED_DOWN


def marks(writes: list[Write]) -> list[tuple[str, str | None]]:
    """(write, the unneeded annotation it sets or None to take it off) of each Node patch
    (a JSON patch: the annotation added, or removed)."""
    path = "/metadata/annotations/" + UNNEEDED.replace("/", "~1")
    found = []
    for w in writes:
        if (w.verb, w.kind) != ("patch", "Node"):
            continue
        for op in w.body:
            if op["path"] == path:
                found.append((str(w), op.get("value") if op["op"] == "add" else None))
            elif op["path"] == "/metadata/annotations" and op["op"] == "add":
                found.append((str(w), op["value"][UNNEEDED]))
    return found


async def test_the_nodes_unneeded_long_enough_are_named_before_the_target_is_lowered() -> None:
    passes = Passes()
    busy = factories.pod("busy", namespace="prod", memory="80Gi", node="n-1", phase="Running")
    world = (scaling_down(), pool(target=2, min_nodes=1), node("n-0"), node("n-1"), busy)
    _, writes = await passes.run(*world)
    assert marks(writes) == []  # unneeded from now on, not for 10m yet
    passes.now += 600
    _, writes = await passes.run(*world)
    # n-0, empty for 10m, named on its Node (since the first look) before the target moves;
    # n-1, busy, is not: the NodePool controller removes n-0, whatever else it would rank
    assert [str(w) for w in writes[:2]] == ["patch Node n-0", "update NodePool/scale big"]
    assert marks(writes) == [("patch Node n-0", "2026-01-01T12:00:00Z")]
    assert scale_targets(writes) == [1]


async def test_an_autoscaler_deleted_takes_its_names_and_soft_taints_off() -> None:
    """Nothing else would: a deleted Autoscaler's names would stand, and kube-scheduler
    would go on scoring the nodes down for a scale-down that never comes."""
    passes = Passes()
    busy = factories.pod("busy", namespace="prod", memory="80Gi", node="n-1", phase="Running")
    world = (scaling_down(), pool(target=2, min_nodes=1), node("n-0"), node("n-1"), busy)
    await passes.run(*world)
    passes.now += 600
    _, writes = await passes.run(*world)
    assert marks(writes) == [("patch Node n-0", "2026-01-01T12:00:00Z")]
    soft = {"key": CANDIDATE_TAINT.key, "effect": "PreferNoSchedule"}
    named = node("n-0", annotations={UNNEEDED: "2026-01-01T12:00:00Z"}, taints=[soft])
    passes.now += 1
    _, writes = await passes.run(pool(target=1, min_nodes=1), named, node("n-1"), busy)
    assert marks(writes) == [("patch Node n-0", None)]
    [unmark] = [w.body for w in writes if (w.verb, w.kind) == ("patch", "Node")]
    assert {"op": "remove", "path": "/spec/taints/0"} in unmark
    assert "as" not in passes.memory  # forgotten: a second delete event sends nothing
    _, writes = await passes.run(pool(target=1, min_nodes=1), named, node("n-1"), busy)
    assert marks(writes) == []


async def test_the_node_named_is_one_whose_pods_every_budget_lets_go_now() -> None:
    replicated = factories.owner_reference("ReplicaSet", "rs", controller=True)
    on = functools.partial(
        factories.pod, namespace="prod", memory="28Gi", phase="Running", owner=replicated
    )
    held = factories.pdb("held", namespace="prod", max_unavailable=0)
    held["metadata"]["generation"] = 1
    held["status"] = {"disruptionsAllowed": 0, "observedGeneration": 1}
    world = (
        scaling_down(),
        pool(target=2),
        node("n-0"),
        node("n-1"),
        on("a", node="n-0", labels={"app": "held"}),  # n-0 first by name, its pod held
        on("b", node="n-1"),
        held,
    )
    passes = Passes()
    await passes.run(*world)
    passes.now += 600
    _, writes = await passes.run(*world)
    assert marks(writes) == [("patch Node n-1", "2026-01-01T12:00:00Z")]
    assert scale_targets(writes) == [1]


async def test_a_pool_spread_over_more_nodes_than_its_pods_need_is_consolidated() -> None:
    """Four nodes at 54Gi of 96Gi each (above the threshold: none unneeded by that rule); the
    pods fit on three. The first node by the consolidation's order is named, then the target
    goes 4 -> 3, the Events saying why; turned off, nothing is named."""
    replicated = factories.owner_reference("ReplicaSet", "rs", controller=True)
    on = functools.partial(factories.pod, namespace="prod", phase="Running", owner=replicated)
    spread = [
        on(f"p{size.lower()}-{i}", node=f"n-{i}", memory=size)
        for i in range(4)
        for size in ("36Gi", "18Gi")
    ]
    nodes = [node(f"n-{i}") for i in range(4)]
    world = (scaling_down(), pool(target=4), *nodes, *spread)
    passes = Passes()
    _, writes = await passes.run(*world)
    assert (marks(writes), scale_targets(writes)) == ([], [])
    passes.now += 600
    _, writes = await passes.run(*world)
    assert [str(w) for w in writes[:2]] == ["patch Node n-0", "update NodePool/scale big"]
    assert scale_targets(writes) == [3]
    note = "scale down 4 -> 3: nodes unneeded for 10m (consolidation: the pods fit on 3 nodes)"
    assert told(writes) == SCALED_DOWN
    assert all(text.endswith(note) for _, _, text in events(writes))
    off = scaling_down(scaleDownConsolidation=False)
    later = Passes()
    await later.run(off, *world[1:])
    later.now += 600
    _, writes = await later.run(off, *world[1:])
    assert (marks(writes), scale_targets(writes)) == ([], [])


async def test_a_named_node_open_and_needed_again_loses_its_name_a_drained_one_keeps_it() -> None:
    named = {UNNEEDED: "2026-01-01T11:00:00Z"}
    disrupting = [{"key": "kubeloop.dev/disrupting", "effect": "NoSchedule"}]
    world = (
        scaling_down(),
        pool(target=2),
        node("n-0", annotations=named),
        node("n-1", annotations=named, taints=disrupting),  # being drained
        factories.pod("busy", namespace="prod", memory="80Gi", node="n-0", phase="Running"),
    )
    _, writes = await reconcile(*world)
    assert marks(writes) == [("patch Node n-0", None)]
    assert scale_targets(writes) == []


async def test_scale_down_stops_at_min_nodes() -> None:
    passes = Passes()
    world = (scaling_down(), pool(target=2, min_nodes=1), node("n-0"), node("n-1"))
    await passes.run(*world)
    passes.now += 600
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [1]
    assert status(writes)["lastDecision"] == "scale down 2 -> 1: nodes unneeded for 10m"


async def test_a_blocked_node_stays_is_told_once_and_listed_unremovable() -> None:
    passes = Passes()
    world = (
        scaling_down(),
        pool(target=2),
        node("n-0", annotations={DO_NOT_DISRUPT: "true"}),
        node("n-1"),
    )
    _, writes = await passes.run(*world)
    assert told(writes) == [("Node/n-0", "ScaleDownBlocked")]
    unremovable = status(writes)["unremovableNodes"]
    assert [(u["node"], u["reason"]) for u in unremovable] == [("n-0", "NodeDoNotDisrupt")]
    passes.now += 600
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [1]
    assert told(writes) == SCALED_DOWN


async def test_scale_down_off_leaves_unneeded_nodes() -> None:
    passes = Passes()
    world = (scaler(), pool(target=2), node("n-0"), node("n-1"))
    await passes.run(*world)
    passes.now += 601
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == []


# --- reservation ----------------------------------------------------------------------------


async def test_reserved_nodes_get_their_planned_pods_then_open() -> None:
    passes = Passes()

    def reserving(target: int = 0, *instances: str) -> dict[str, Any]:
        obj = pool(target, reserveNewNodes=True)
        obj["status"] = {"instances": [{"name": n, "state": "running"} for n in instances]}
        return obj

    _, writes = await passes.run(scaler(), reserving(), *pods("w", 4))
    assert scale_targets(writes) == [2]
    assert patches(writes) == []
    passes.now += 60
    # the VMs are recorded and their Nodes register, reserved and Ready just now
    booted = [
        node(name, ready_since=passes.now, taints=[factories.taint(RESERVED_KEY, value=name)])
        for name in ("vm-a", "vm-b")
    ]
    ours = reserving(2, "vm-a", "vm-b")
    _, writes = await passes.run(scaler(), ours, *pods("w", 4), *booted)
    assert scale_targets(writes) == []

    def tolerating(node: str) -> list[dict[str, Any]]:
        toleration = {"key": RESERVED_KEY, "operator": "Equal", "value": node}
        value = [{**toleration, "effect": "NoSchedule"}]
        return [{"op": "add", "path": "/spec/tolerations", "value": value}]

    assert patches(writes) == [
        ("patch Pod prod/w-0", tolerating("vm-a")),
        ("patch Pod prod/w-1", tolerating("vm-a")),
        ("patch Pod prod/w-2", tolerating("vm-a")),
        ("patch Pod prod/w-3", tolerating("vm-b")),
    ]
    patched = {w.patch_type for w in writes if w.verb == "patch" and not w.subresource}
    assert patched == {"application/json-patch+json"}
    # the plan holds by nominations too, on a reserved pool as on any other
    assert nominated(writes) == [("w-0", "vm-a"), ("w-1", "vm-a"), ("w-2", "vm-a"), ("w-3", "vm-b")]
    # once vm-a's pods are bound it opens to every pod; the tolerations are not written twice
    passes.now += 10
    bound = [
        factories.pod(
            f"w-{i}",
            namespace="prod",
            memory="28Gi",
            node="vm-a",
            phase="Running",
            uid=f"uid-w-{i}",
        )
        for i in range(3)
    ]
    landed = (scaler(), ours, *bound, *pods("w", 4)[3:], booted[1])

    def lifting(node: str) -> tuple[str, list[dict[str, Any]]]:
        taint = {"key": RESERVED_KEY, "effect": "NoSchedule", "value": node}
        test = {"op": "test", "path": "/spec/taints/0", "value": taint}
        return f"patch Node {node}", [test, {"op": "remove", "path": "/spec/taints/0"}]

    _, writes = await passes.run(*landed, booted[0])
    assert patches(writes) == [lifting("vm-a")]
    # vm-b's pod is still unbound: it opens to every pod once Ready for the landing grace
    opened = node("vm-a", ready_since=NOW + 60)
    passes.now += 19
    _, writes = await passes.run(*landed, opened)
    assert patches(writes) == []
    passes.now += 1
    _, writes = await passes.run(*landed, opened)
    assert patches(writes) == [lifting("vm-b")]


# --- nominations ------------------------------------------------------------------------------


def planned_pods() -> list[dict[str, Any]]:
    """Four pods of 28Gi behind a pod of another kind that kube-scheduler tries first (the
    same first-seen time, the smaller key), which the plan leaves without a nomination."""
    return [pending("a-0", memory="1Gi", uid="uid-a-0"), *pods("w", 4)]


async def test_planned_pods_are_nominated_to_their_registered_new_nodes_by_default() -> None:
    """No reserveNewNodes: once the new VMs' Nodes register (not Ready yet), each planned pod
    gets its node in its status, none in its spec; a nomination the scheduler dropped is
    written again; one still standing when the node has been Ready for the landing grace is
    withdrawn. (The plan's lead kind, a-0, the first pod kube-scheduler will try, is left
    without a nomination: :func:`lead_kind`.)"""
    passes = Passes()

    def recorded(target: int, *instances: str) -> dict[str, Any]:
        obj = pool(target)
        obj["status"] = {"instances": [{"name": n, "state": "running"} for n in instances]}
        return obj

    def with_nomination(pod: dict[str, Any], node: str) -> dict[str, Any]:
        pod["status"]["nominatedNodeName"] = node
        pod["metadata"]["resourceVersion"] = "2"  # a write makes a new version
        return pod

    _, writes = await passes.run(scaler(), pool(), *planned_pods())
    assert scale_targets(writes) == [2]
    passes.now += 5
    # the VMs are recorded, vm-a's Node has not registered yet: nothing to nominate
    ours = recorded(2, "vm-a", "vm-b")
    _, writes = await passes.run(scaler(), ours, *planned_pods())
    assert nominated(writes) == []
    passes.now += 55
    booting = [factories.taint("node.kubernetes.io/not-ready")]
    a, b = (node(n, ready=False, taints=booting) for n in ("vm-a", "vm-b"))
    _, writes = await passes.run(scaler(), ours, *planned_pods(), a, b)
    assert nominated(writes) == [("w-0", "vm-a"), ("w-1", "vm-a"), ("w-2", "vm-a"), ("w-3", "vm-b")]
    assert [w for w in writes if w.kind == "Pod" and w.subresource != "status"] == []
    assert {w.patch_type for w in writes if w.kind == "Pod"} == {"application/merge-patch+json"}
    assert all(w.body["metadata"] == {"resourceVersion": "1"} for w in writes if w.kind == "Pod")
    # vm-a opened and took its pods; the scheduler dropped w-3's nomination meanwhile
    passes.now += 2
    a_open = node("vm-a", ready_since=passes.now)
    bound = [
        factories.pod(f"w-{i}", namespace="prod", memory="28Gi", node="vm-a", uid=f"uid-w-{i}")
        for i in range(3)
    ]
    w3 = pods("w", 4)[3]
    _, writes = await passes.run(scaler(), ours, *bound, w3, a_open, b)
    assert nominated(writes) == [("w-3", "vm-b")]
    # standing: nothing to write
    passes.now += 1
    b_open = node("vm-b", ready_since=passes.now)
    still = with_nomination(pods("w", 4)[3], "vm-b")
    _, writes = await passes.run(scaler(), ours, *bound, still, a_open, b_open)
    assert nominated(writes) == []
    # vm-b Ready for the landing grace and w-3 still not on it: the hold is taken back
    passes.now += 30
    _, writes = await passes.run(scaler(), ours, *bound, still, a_open, b_open)
    assert nominated(writes) == [("w-3", None)]


async def test_gated_new_nodes_are_nominated_and_opened_together_once_all_are_ready() -> None:
    """An autoscaled pool's new Nodes register gated (the reservation taint, set by the
    NodePool controller's bootstrap). Their pods are nominated behind the gates at once;
    no gate falls while a node of the plan is not Ready yet (within the hold); once both are
    Ready, one pass lifts both gates, after every nomination of their slots took. (a-0, of
    the kind kube-scheduler tries first, gets none.)"""
    passes = Passes()
    ours = pool(2)
    ours["status"] = {"instances": [{"name": n, "state": "running"} for n in ("vm-a", "vm-b")]}
    _, writes = await passes.run(scaler(), pool(), *planned_pods())
    assert scale_targets(writes) == [2]
    passes.now += 20

    def gated(name: str, *, ready: bool) -> dict[str, Any]:
        gate = factories.taint(RESERVED_KEY, value=name)
        return node(name, ready=ready, ready_since=passes.now, taints=[gate])

    _, writes = await passes.run(
        scaler(), ours, *planned_pods(), gated("vm-a", ready=True), gated("vm-b", ready=False)
    )
    planned = [("w-0", "vm-a"), ("w-1", "vm-a"), ("w-2", "vm-a"), ("w-3", "vm-b")]
    assert nominated(writes) == planned
    assert patches(writes) == []
    passes.now += 0.5
    # the cache has not seen the nominations yet: written again (409s at worst), then lifted
    _, writes = await passes.run(
        scaler(), ours, *planned_pods(), gated("vm-a", ready=True), gated("vm-b", ready=True)
    )
    assert nominated(writes) == planned
    lifts = [i for i, w in enumerate(writes) if w.kind == "Node"]
    assert [str(writes[i]) for i in lifts] == ["patch Node vm-a", "patch Node vm-b"]
    last_nomination = max(i for i, w in enumerate(writes) if w.kind == "Pod")
    assert last_nomination < min(lifts)


async def test_a_node_holding_only_nominated_pods_is_not_taken_for_empty() -> None:
    """A pod nominated to a pool Node is still waiting for it: counted by the plan, so
    scale-down does not remove the node it is about to land on, and no node is added."""
    passes = Passes()
    waiting = pods("w", 1)[0]
    waiting["status"]["nominatedNodeName"] = "n-0"
    waiting["metadata"]["resourceVersion"] = "2"  # a write makes a new version
    world = (scaling_down(), pool(target=1), node("n-0"), waiting)
    _, writes = await passes.run(*world)
    passes.now += 601
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == []  # (it may be named unneeded: the target holds it)


# --- nothing changed, nothing written ----------------------------------------------------------


async def test_a_second_look_at_an_unchanged_world_writes_nothing() -> None:
    passes = Passes()
    world = [scaler(), pool(target=1), *pods("w", 2), node("n-0")]
    _, writes = await passes.run(*world)
    [written] = [w.body for w in writes if w.kind == "Autoscaler"]
    passes.now += 30
    result, writes = await passes.run(written, *world[1:])
    assert writes == []
    assert result == Result(requeue_after=30.0)


# --- blockers, DaemonSets, spread, a missing pool ---------------------------------------------


async def test_blocked_nodes_stay_and_the_unneeded_ones_without_blockers_go() -> None:
    """Five nearly empty nodes: a bare pod on a, a safe-to-evict "false" pod on b and a
    karpenter.sh/do-not-disrupt pod on c (both replicated), nothing on d, a bare pod
    overridden safe-to-evict "true" on e: a, b and c are reported, d and e go."""
    replicated = factories.owner_reference("ReplicaSet", "rs", controller=True)
    on = functools.partial(factories.pod, namespace="prod", memory="1Gi", phase="Running")
    world = (
        scaling_down(),
        pool(target=5),
        *(node(n) for n in "abcde"),
        on("bare", node="a"),
        on("unsafe", node="b", owner=replicated, annotations={SAFE_TO_EVICT: "false"}),
        on("karp", node="c", owner=replicated, annotations={KARPENTER_DO_NOT_DISRUPT: "true"}),
        on("overridden", node="e", annotations={SAFE_TO_EVICT: "true"}),
    )
    passes = Passes()
    _, writes = await passes.run(*world)
    unremovable = status(writes)["unremovableNodes"]
    assert {u["node"]: (u["reason"], u.get("pod")) for u in unremovable} == {
        "a": ("NotReplicated", "prod/bare"),
        "b": ("NotSafeToEvictAnnotation", "prod/unsafe"),
        "c": ("DoNotDisruptAnnotation", "prod/karp"),
    }
    blocked = {who: note for who, reason, note in events(writes) if reason == "ScaleDownBlocked"}
    assert sorted(blocked) == ["Node/a", "Node/b", "Node/c"]
    assert "has no controller" in blocked["Node/a"]
    assert SAFE_TO_EVICT in blocked["Node/b"]
    assert KARPENTER_DO_NOT_DISRUPT in blocked["Node/c"]
    passes.now += 600
    _, writes = await passes.run(*world)
    assert scale_targets(writes) == [3]
    assert told(writes) == SCALED_DOWN


async def test_a_pod_that_fits_the_vm_but_not_beside_its_daemonsets_is_reported() -> None:
    agent = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": factories.metadata("agent", "kube-system"),
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {POOL_LABEL: "big"},
                    "containers": [factories.container("agent", memory="8Gi")],
                },
            },
        },
    }
    _, writes = await reconcile(scaler(), pool(), agent, *pods("vm-sized", 1, memory="90Gi"))
    assert scale_targets(writes) == []
    assert "after DaemonSets" in status(writes)["lastDecision"]
    [note] = [note for who, _, note in events(writes) if who == "Pod/vm-sized-0"]
    assert "TooBig: memory 90Gi > 88Gi after DaemonSets" in note
    _, writes = await reconcile(scaler(), pool(), agent, *pods("fits", 1, memory="80Gi"))
    assert scale_targets(writes) == [1]


async def test_hostname_anti_affinity_needing_five_nodes_gets_five_in_one_decision() -> None:
    spread = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    apart = [
        pending(f"s-{i}", memory="1Gi", labels={"app": "spread"}, affinity=spread) for i in range(5)
    ]
    _, writes = await reconcile(scaler(), pool(), *apart)
    assert scale_targets(writes) == [5]


async def test_a_missing_pool_makes_the_autoscaler_unready_without_a_retry() -> None:
    result, writes = await reconcile(scaler(), *pods("w", 3))
    assert [str(w) for w in writes] == ["update Autoscaler/status as"]
    assert status(writes)["conditions"] == {"Ready": ("False", "NodePoolNotFound")}
    assert "big" in writes[0].body["status"]["conditions"][0]["message"]
    # the pool's watch brings the Autoscaler back; nothing to retry meanwhile
    assert result == Result()
