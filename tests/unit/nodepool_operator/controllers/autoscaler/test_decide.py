"""The Autoscaler's decisions as a pure function: a fixed snapshot (what observe would read),
the memory and the time in, the Decision out. One row per scale decision the e2e tests check:
batching, scale-up with booting nodes counted, max nodes, pods set aside (missing references,
not taken, crowded out), provisioning timeouts and backoff, scale-down timers and blockers, and
reserved nodes. No apiserver, no clock: the tests read what ``decide`` returns."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonpatch
import pytest

from kubeloop import Conflict
from nodepool_operator.api import parse_autoscaler
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._reserve import RESERVED_KEY, Reservation
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers._unneeded import CANDIDATE_TAINT, DRAIN_TIMED_OUT_AT
from nodepool_operator.controllers._unneeded import UNNEEDED_ANNOTATION as UNNEEDED
from nodepool_operator.controllers.autoscaler._landing import Awaiting, Landing
from nodepool_operator.controllers.autoscaler._provision import Provisioning
from nodepool_operator.controllers.autoscaler._replacing import Replacing
from nodepool_operator.controllers.autoscaler._report import Subject
from nodepool_operator.controllers.autoscaler.controller import decide_and_write
from nodepool_operator.controllers.autoscaler.decide import (
    Clock,
    Decision,
    Knobs,
    Memory,
    TargetWrite,
    Why,
    decide,
    settle,
)
from nodepool_operator.controllers.autoscaler.observe import Observation, Unready, snapshot
from nodepool_operator.scheduling import DO_NOT_DISRUPT, pdb_view

KNOBS = Knobs(
    batch_window=1.0,
    landing_grace=30.0,
    max_node_provision=900.0,
    scale_up_backoff=300.0,
    utilization_threshold=0.5,
)
CANDIDATE = CANDIDATE_TAINT.key
NOW = 10_000.0
WALL = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CLOCK = Clock(NOW, WALL)


# --- a snapshot, as the cache would hold it -----------------------------------------------


def scaler(*, max_nodes: int | None = None, scale_down: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodePoolRef": {"name": "big"},
        "namespaces": ["prod"],
        "frequency": "30s",
        "scaleDownEnabled": scale_down,
        "scaleDownUnneededTime": "10m",
    }
    if max_nodes is not None:
        spec["maxNodes"] = max_nodes
    return {"metadata": {"name": "as", "generation": 3}, "spec": spec}


def pool(
    *,
    target: int = 0,
    min_nodes: int = 0,
    max_nodes: int = 10,
    reserve: bool = False,
    instances: Sequence[str] = (),
) -> dict[str, Any]:
    return {
        "metadata": {"name": "big", "generation": 1},
        "spec": {
            "instanceType": "mem96.large",
            "targetNodes": target,
            "minNodes": min_nodes,
            "maxNodes": max_nodes,
            "reserveNewNodes": reserve,
        },
        "status": {"instances": [{"name": n, "state": "running"} for n in instances]},
    }


def refused(obj: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    """``obj`` with the Degraded condition the NodePool controller writes when no type of
    the pool can be launched, for spec ``generation``."""
    obj["status"]["conditions"] = [
        {
            "type": "Degraded",
            "status": "True",
            "reason": "CapacityUnavailable",
            "message": "no capacity for mem96.large",
            "observedGeneration": generation,
            "lastTransitionTime": "2026-01-01T11:59:00Z",
        }
    ]
    return obj


def pending(name: str, memory: str = "28Gi", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"memory": memory}}}],
            **spec,
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def running(name: str, node: str, memory: str = "28Gi") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "prod",
            "uid": f"uid-{name}",
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"memory": memory}}}],
        },
        "status": {"phase": "Running"},
    }


def node(
    name: str,
    *,
    ready: bool = True,
    ready_since: datetime = WALL - timedelta(minutes=5),
    annotations: dict[str, str] | None = None,
    reserved: bool = False,
    draining: bool = False,
) -> dict[str, Any]:
    taints = [{"key": RESERVED_KEY, "value": name, "effect": "NoSchedule"}] if reserved else []
    if draining:  # chosen for removal by the NodePool controller
        taints.append({"key": "kubeloop.dev/disrupting", "effect": "NoSchedule"})
    return {
        "metadata": {
            "name": name,
            "labels": {POOL_LABEL: "big"},
            "annotations": annotations or {},
        },
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"cpu": "12", "memory": "96Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": ready_since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ],
        },
    }


def observe(
    scaler_obj: dict[str, Any],
    pool_obj: dict[str, Any],
    pods: Sequence[dict[str, Any]] = (),
    nodes: Sequence[dict[str, Any]] = (),
    *,
    first_seen: float = NOW - 60,
) -> Observation:
    obs = snapshot(
        scaler_obj,
        parse_autoscaler(scaler_obj),
        pool_obj,
        pods=pods,
        nodes=nodes,
        pods_on=lambda name: [p for p in pods if p["spec"].get("nodeName") == name],
        first_seen=lambda _: first_seen,
    )
    assert isinstance(obs, Observation)
    return obs


def pods(prefix: str, count: int, memory: str = "28Gi") -> list[dict[str, Any]]:
    return [pending(f"{prefix}-{i}", memory) for i in range(count)]


def reasons(decision: Decision, subject: Subject = Subject.AUTOSCALER) -> list[str]:
    return [n.reason for n in decision.events if n.subject is subject]


# --- the table ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One pass: the snapshot, what was remembered, and what the decision must say: the
    target write, ``status.lastDecision`` and the Events on the Autoscaler and its pool."""

    obs: Observation
    target: TargetWrite | None
    decision: str
    events: tuple[str, ...] = ()
    memory: Memory = field(default_factory=Memory)


CAPPED_AT_2 = (
    "scale up 0 -> 2: 6 pods need 2 new mem96.large nodes; 3 pods waiting: pool at max 2 nodes"
)
CAPPED_AT_1 = (
    "scale up 0 -> 1: 3 pods need 1 new mem96.large node; 3 pods waiting: pool at max 1 nodes"
)
#: The pool's node template: a verdict about a pod landing holds only for the template it was
#: made with.
TEMPLATE = observe(scaler(), pool()).template


def landing(ready_at: float) -> Landing:
    """Pod w-0 planned onto the pool's first node, which became Ready at ``ready_at``."""
    return Landing(awaiting={"uid-w-0": Awaiting(1, ready_at)}, template=TEMPLATE)


ROWS = {
    "scale up: 6 pods of 28Gi need two 96Gi nodes": Row(
        observe(scaler(), pool(), pods("w", 6)),
        TargetWrite(0, 2, Why.SCALE_UP, "scale up 0 -> 2: 6 pods need 2 new mem96.large nodes"),
        "scale up 0 -> 2: 6 pods need 2 new mem96.large nodes",
        ("TriggeredScaleUp", "TriggeredScaleUp"),
    ),
    "booting nodes are counted: the target already holds the pods": Row(
        observe(scaler(), pool(target=2), pods("w", 6)),
        None,
        "no scale up (target 2): 6 pods fit existing or booting nodes",
    ),
    "a second wave asks only for what the booting nodes cannot hold": Row(
        observe(scaler(), pool(target=2), pods("w", 9)),
        TargetWrite(
            2,
            3,
            Why.SCALE_UP,
            "scale up 2 -> 3: 3 pods need 1 new mem96.large node, 6 fit existing or booting nodes",
        ),
        "scale up 2 -> 3: 3 pods need 1 new mem96.large node, 6 fit existing or booting nodes",
        ("TriggeredScaleUp", "TriggeredScaleUp"),
    ),
    "room on a Ready node first": Row(
        observe(scaler(), pool(target=1), [pending("w-0")], [node("n-0")]),
        None,
        "no scale up (target 1): 1 pod fit existing or booting nodes",
    ),
    "the pool's maxNodes caps the raise and reports the rest": Row(
        observe(scaler(), pool(max_nodes=2), pods("w", 9)),
        TargetWrite(0, 2, Why.SCALE_UP, CAPPED_AT_2),
        CAPPED_AT_2,
        ("TriggeredScaleUp", "TriggeredScaleUp", "NotTriggerScaleUp"),
    ),
    "the Autoscaler's maxNodes caps below the pool's": Row(
        observe(scaler(max_nodes=1), pool(max_nodes=5), pods("w", 6)),
        TargetWrite(0, 1, Why.SCALE_UP, CAPPED_AT_1),
        CAPPED_AT_1,
        ("TriggeredScaleUp", "TriggeredScaleUp", "NotTriggerScaleUp"),
    ),
    "at maxNodes nothing is written": Row(
        observe(scaler(), pool(target=2, max_nodes=2), pods("w", 9), [node("n-0"), node("n-1")]),
        None,
        "no scale up (target 2): 6 pods fit existing or booting nodes; "
        "3 pods waiting: pool at max 2 nodes",
        ("NotTriggerScaleUp",),
    ),
    "a pod too big for the template never scales": Row(
        observe(scaler(), pool(), [pending("huge", "120Gi")]),
        None,
        "no scale up (target 0); 1 pod too big (memory 120Gi > 96Gi)",
        ("NotTriggerScaleUp",),
    ),
    "a pod waiting on a missing Secret is set aside": Row(
        observe(
            scaler(),
            pool(),
            [
                pending(
                    "db",
                    volumes=[{"name": "s", "secret": {"secretName": "db-password"}}],
                )
            ],
        ),
        None,
        'no scale up (target 0); 1 pod MissingSecret (secret "db-password" not found)',
        ("NotTriggerScaleUp",),
    ),
    "a pod its Ready node did not take is set aside after the grace, not scaled for again": Row(
        observe(scaler(), pool(target=1), [pending("w-0")], [node("n-0")]),
        None,
        "no scale up (target 1); 1 pod NotTakenByNewNode "
        "(a new node planned for it became Ready and did not take it)",
        ("NotTriggerScaleUp",),
        Memory(landing=landing(NOW - 31)),
    ),
    "a pod still in the scheduler's grace on its new Ready node drives nothing": Row(
        observe(scaler(), pool(target=1), [pending("w-0")], [node("n-0")]),
        None,
        "no scale up (target 1); 1 pod waiting for the scheduler on new Ready nodes",
        (),
        Memory(landing=landing(NOW - 5)),
    ),
    "a pod crowded out of its new node by others is planned again": Row(
        observe(
            scaler(),
            pool(target=1),
            [pending("w-0"), *(running(f"r-{i}", "n-0", "30Gi") for i in range(3))],
            [node("n-0")],
        ),
        TargetWrite(1, 2, Why.SCALE_UP, "scale up 1 -> 2: 1 pod needs 1 new mem96.large node"),
        "scale up 1 -> 2: 1 pod needs 1 new mem96.large node",
        ("TriggeredScaleUp", "TriggeredScaleUp"),
        Memory(landing=landing(NOW - 31)),
    ),
    "nodes that did not register in time: back to the registered ones, no raise": Row(
        observe(scaler(), pool(target=3), pods("w", 12), [node("n-0")]),
        TargetWrite(
            3,
            1,
            Why.PROVISION_TIMEOUT,
            "NodePool big: 2 requested node(s) did not register within 900s; no longer counted "
            "as in flight, target 3 -> 1, scale-up backed off for 300s",
        ),
        "provisioning timed out: target 3 -> 1, scale-up backed off",
        ("ProvisionTimedOut", "ProvisionTimedOut"),
        Memory(provisioning=Provisioning(since=NOW - 901, registered=1)),
    ),
    "nodes the pool says the cloud refuses fail at once, not after 900s": Row(
        observe(scaler(), refused(pool(target=3)), pods("w", 12), [node("n-0")]),
        TargetWrite(
            3,
            1,
            Why.PROVISION_TIMEOUT,
            "NodePool big: 2 requested node(s) are refused by the cloud (CapacityUnavailable: "
            "no capacity for mem96.large); no longer counted as in flight, target 3 -> 1, "
            "scale-up backed off for 300s",
        ),
        "provisioning timed out: target 3 -> 1, scale-up backed off",
        ("ProvisionTimedOut", "ProvisionTimedOut"),
        Memory(provisioning=Provisioning(since=NOW - 10, registered=1)),
    ),
    "while backing off, pods that need nodes wait": Row(
        observe(scaler(), pool(target=1), pods("w", 6), [node("n-0")]),
        None,
        "no scale up (target 1): provisioning timed out, scale-up backed off",
        (),
        Memory(provisioning=Provisioning(registered=1, backoff_until=NOW + 100, failures=1)),
    ),
    "empty nodes not yet unneeded long enough stay": Row(
        observe(scaler(scale_down=True), pool(target=2), (), [node("n-0"), node("n-1")]),
        None,
        "no scale up (target 2): no pending pods",
    ),
    "empty nodes unneeded for scaleDownUnneededTime go": Row(
        observe(scaler(scale_down=True), pool(target=2), (), [node("n-0"), node("n-1")]),
        TargetWrite(2, 0, Why.SCALE_DOWN, "scale down 2 -> 0: nodes unneeded for 10m"),
        "scale down 2 -> 0: nodes unneeded for 10m",
        ("ScaleDown", "ScaleDown"),
        Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601}),
    ),
    "not below minNodes": Row(
        observe(
            scaler(scale_down=True), pool(target=2, min_nodes=1), (), [node("n-0"), node("n-1")]
        ),
        TargetWrite(2, 1, Why.SCALE_DOWN, "scale down 2 -> 1: nodes unneeded for 10m"),
        "scale down 2 -> 1: nodes unneeded for 10m",
        ("ScaleDown", "ScaleDown"),
        Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601}),
    ),
    "scale-down off: unneeded nodes stay": Row(
        observe(scaler(), pool(target=2), (), [node("n-0"), node("n-1")]),
        None,
        "no scale up (target 2): no pending pods",
        (),
        Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601}),
    ),
    "a node annotated do-not-disrupt is never unneeded": Row(
        observe(
            scaler(scale_down=True),
            pool(target=2),
            (),
            [node("n-0", annotations={DO_NOT_DISRUPT: "true"}), node("n-1")],
        ),
        TargetWrite(2, 1, Why.SCALE_DOWN, "scale down 2 -> 1: nodes unneeded for 10m"),
        "scale down 2 -> 1: nodes unneeded for 10m",
        ("ScaleDownBlocked", "ScaleDown", "ScaleDown"),
        Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601}),
    ),
    "a node being drained is leaving: its replacement holds the pods evicted from it": Row(
        # n-1 is being repaired (drained, tainted), its replacement is booting: the two pods
        # evicted from it wait for that node rather than raising the target a second time
        observe(
            scaler(),
            pool(target=2),
            [*pods("w", 2), *(running(f"r-{i}", "n-0", "30Gi") for i in range(3))],
            [node("n-0"), node("n-1", draining=True)],
        ),
        None,
        "no scale up (target 2): 2 pods fit existing or booting nodes",
    ),
    "no scale-down while a node is being drained": Row(
        # the pool's target already went 3 -> 2; n-2 drains: n-1, also empty, waits
        observe(
            scaler(scale_down=True),
            pool(target=2),
            (),
            [node("n-0"), node("n-1"), node("n-2", draining=True)],
        ),
        None,
        "no scale up (target 2): no pending pods",
        (),
        Memory(unneeded_since={"n-1": NOW - 601}),
    ),
    "no scale-down while nodes are booting": Row(
        observe(scaler(scale_down=True), pool(target=3), (), [node("n-0"), node("n-1")]),
        None,
        "no scale up (target 3): no pending pods",
        (),
        Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601}),
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_decide(row: Row) -> None:
    before = copy.deepcopy(row.memory)
    decision = decide(row.obs, row.memory, CLOCK, KNOBS)
    assert decision.target == row.target
    assert decision.status.last_decision == row.decision
    # the Events on the Autoscaler, the pool and its Nodes, in order (not each pod's own)
    told = tuple(n.reason for n in decision.events if n.subject is not Subject.POD)
    assert told == row.events
    assert row.memory == before  # pure: what was remembered is not touched
    if row.target is not None:
        assert decision.status.last_scale_time == WALL
    elif not any(e == "ProvisionTimedOut" for e in row.events):
        assert decision.status.last_scale_time is None


# --- sequences: what a decision remembers shapes the next one ------------------------------


def test_a_raise_starts_the_provision_clock_and_waits_for_its_pods() -> None:
    obs = observe(scaler(), pool(), pods("w", 6))
    decision = decide(obs, Memory(), CLOCK, KNOBS)
    memory = decision.memory
    assert memory.provisioning.since == NOW
    assert memory.planned_at == NOW
    assert {uid: a.target for uid, a in memory.landing.awaiting.items()} == {
        f"uid-w-{i}": 2 for i in range(6)
    }
    # the next pass sees the raised target: nothing more to write
    again = decide(replace(obs, target=2), memory, Clock(NOW + 1, WALL), KNOBS)
    assert again.target is None
    # requeued for when the in-flight nodes would time out, or the Autoscaler's frequency
    assert again.requeue_after == pytest.approx(30.0)


def test_one_pass_writes_one_target_even_with_no_backoff() -> None:
    # Provisioning timed out, and the pods still need nodes: with a zero backoff the old
    # pass lowered the target and then raised it again; one decision now writes the lowering
    # only, and the next pass plans against it.
    obs = observe(scaler(), pool(target=3), pods("w", 12), [node("n-0")])
    knobs = replace(KNOBS, scale_up_backoff=0.0)
    memory = Memory(provisioning=Provisioning(since=NOW - 901, registered=1))
    decision = decide(obs, memory, CLOCK, knobs)
    assert decision.target is not None
    assert (decision.target.why, decision.target.expected, decision.target.desired) == (
        Why.PROVISION_TIMEOUT,
        3,
        1,
    )
    assert "TriggeredScaleUp" not in reasons(decision)
    after = decide(replace(obs, target=1), decision.memory, Clock(NOW + 1, WALL), knobs)
    assert after.target is not None
    assert after.target.why is Why.SCALE_UP
    assert after.target.expected == 1


def test_a_timeout_on_a_target_someone_else_moved_writes_nothing() -> None:
    obs = observe(scaler(), pool(target=3), pods("w", 3), [node("n-0")])
    memory = Memory(provisioning=Provisioning(since=NOW - 901, registered=1))
    decision = decide(replace(obs, target=5, moved=True), memory, CLOCK, KNOBS)
    assert decision.target is None
    assert reasons(decision) == ["ProvisionTimedOut"]
    assert "target 5 -> 5" in decision.events[0].note
    assert decision.memory.provisioning.backing_off(NOW)


def test_the_backoff_shows_in_the_provisioning_condition() -> None:
    obs = observe(scaler(), pool(target=3), pods("w", 3), [node("n-0")])
    memory = Memory(provisioning=Provisioning(since=NOW - 901, registered=1))
    conditions = {c.type: c for c in decide(obs, memory, CLOCK, KNOBS).status.conditions}
    assert (conditions["Ready"].status, conditions["Ready"].reason) == ("True", "Watching")
    assert (conditions["Provisioning"].status, conditions["Provisioning"].reason) == (
        "False",
        "ProvisionTimedOut",
    )
    fine = {c.type: c for c in decide(obs, Memory(), CLOCK, KNOBS).status.conditions}
    assert fine["Provisioning"].if_present  # "ScaleUpAllowed" only once it was ever False


def test_unneeded_time_starts_when_a_node_is_first_empty_and_sets_the_requeue() -> None:
    obs = observe(scaler(scale_down=True), pool(target=2), (), [node("n-0"), node("n-1")])
    decision = decide(obs, Memory(), CLOCK, KNOBS)
    assert decision.memory.unneeded_since == {"n-0": NOW, "n-1": NOW}
    assert decision.requeue_after == pytest.approx(30.0)  # frequency < 10m
    later = decide(obs, decision.memory, Clock(NOW + 590, WALL), KNOBS)
    assert later.target is None
    assert later.requeue_after == pytest.approx(10.0)  # the unneeded time ends first
    due = decide(obs, later.memory, Clock(NOW + 600, WALL), KNOBS)
    assert due.target == TargetWrite(
        2, 0, Why.SCALE_DOWN, "scale down 2 -> 0: nodes unneeded for 10m"
    )
    # both named on their Node, unneeded since the first look, for the NodePool controller
    assert [(m.node, m.on) for m in due.marks] == [("n-0", True), ("n-1", True)]
    stamp = (WALL - timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%SZ")
    named = jsonpatch.apply_patch(obs.raw.nodes["n-0"], due.marks[0].patch())
    assert named["metadata"]["annotations"][UNNEEDED] == stamp
    # and steered away from by kube-scheduler meanwhile (a soft taint beside the others)
    soft = {"key": CANDIDATE, "effect": "PreferNoSchedule"}
    assert named["spec"]["taints"] == [*(obs.raw.nodes["n-0"]["spec"].get("taints") or []), soft]
    # taken off again, both, by a patch tested against the list as read
    unnamed = jsonpatch.apply_patch(
        named, replace(due.marks[0], on=False).patch(node_fields(named))
    )
    assert UNNEEDED not in unnamed["metadata"]["annotations"]
    assert soft not in (unnamed["spec"].get("taints") or [])
    # the times are kept (they name the nodes to go) and not counted twice: the pool, two
    # nodes for a target of 0 now, is not settled
    assert due.memory.unneeded_since == {"n-0": NOW, "n-1": NOW}
    after = decide(replace(obs, target=0), due.memory, Clock(NOW + 601, WALL), KNOBS)
    assert after.target is None


def test_a_node_whose_pods_a_budget_holds_is_not_the_one_named_unneeded() -> None:
    # one 28Gi pod on each node: either can go (its pod fits on the other), not both
    world = [running("r-0", "n-0"), running("r-1", "n-1")]
    world[0]["metadata"]["labels"] = {"app": "held"}
    obs = observe(scaler(scale_down=True), pool(target=2), world, [node("n-0"), node("n-1")])
    later = Clock(NOW + 600, WALL)
    plain = decide(obs, Memory(), CLOCK, KNOBS)
    assert plain.memory.unneeded_since == {"n-0": NOW}  # by name
    budget = pdb_view(
        {
            "metadata": {"namespace": "prod", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "held"}}},
            "status": {"disruptionsAllowed": 0, "observedGeneration": 1},
        }
    )
    held = replace(obs, budgets=(budget,))
    first = decide(held, Memory(), CLOCK, KNOBS)
    assert first.memory.unneeded_since == {"n-1": NOW}
    due = decide(held, first.memory, later, KNOBS)
    assert [(m.node, m.on) for m in due.marks] == [("n-1", True)]
    assert due.target == TargetWrite(
        2, 1, Why.SCALE_DOWN, "scale down 2 -> 1: nodes unneeded for 10m"
    )


def test_a_node_whose_drain_timed_out_rests_out_of_the_unneeded_ones() -> None:
    # the NodePool controller gave up draining n-0 a minute ago: it would not take it now
    stamp = (WALL - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = [node("n-0", annotations={DRAIN_TIMED_OUT_AT: stamp}), node("n-1")]
    obs = observe(scaler(scale_down=True), pool(target=2), (), nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    assert first.memory.unneeded_since == {"n-1": NOW}
    due = decide(obs, first.memory, Clock(NOW + 600, WALL + timedelta(minutes=10)), KNOBS)
    # ten minutes on, its rest (five) is over: unneeded from then, not named yet
    assert due.memory.unneeded_since == {"n-0": NOW + 600, "n-1": NOW}
    assert [(m.node, m.on) for m in due.marks] == [("n-1", True)]
    assert due.target == TargetWrite(
        2, 1, Why.SCALE_DOWN, "scale down 2 -> 1: nodes unneeded for 10m"
    )


def spread_pool(count: int, *sizes: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` Nodes of the pool, each running one pod of each of ``sizes`` (as the
    scheduler's LeastAllocated lays a mixed burst over nodes that were there): pods, Nodes."""
    pods = [
        running(f"r-{i}-{j}", f"n-{i}", memory)
        for i in range(count)
        for j, memory in enumerate(sizes)
    ]
    return pods, [node(f"n-{i}") for i in range(count)]


def test_a_pool_spread_over_too_many_nodes_is_consolidated_when_none_is_unneeded() -> None:
    # 4 nodes of 96Gi at 54Gi each (36Gi + 18Gi: above the 50 % threshold, so the
    # threshold rule finds none); the pods fit on 3: n-0's pods go on the others
    world, nodes = spread_pool(4, "36Gi", "18Gi")
    obs = observe(scaler(scale_down=True), pool(target=4), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    assert first.memory.unneeded_since == {"n-0": NOW}
    assert first.target is None
    due = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    summary = "scale down 4 -> 3: nodes unneeded for 10m (consolidation: the pods fit on 3 nodes)"
    assert due.target == TargetWrite(4, 3, Why.SCALE_DOWN, summary)
    assert [(m.node, m.on) for m in due.marks] == [("n-0", True)]
    assert due.status.last_decision == summary
    # turned off: the threshold rule alone, which finds nothing
    off = scaler(scale_down=True)
    off["spec"]["scaleDownConsolidation"] = False
    quiet = decide(observe(off, pool(target=4), world, nodes), Memory(), CLOCK, KNOBS)
    assert quiet.memory.unneeded_since == {}
    # at minNodes: nothing to name, the target would not go down
    floor = decide(
        observe(scaler(scale_down=True), pool(target=4, min_nodes=4), world, nodes),
        Memory(),
        CLOCK,
        KNOBS,
    )
    assert floor.memory.unneeded_since == {}
    # at the optimum (3 nodes, the same pods packed): nothing either
    packed = [running(f"r-{i}", f"n-{i % 3}", m) for i, m in enumerate(["36Gi"] * 4 + ["18Gi"] * 4)]
    at = decide(
        observe(scaler(scale_down=True), pool(target=3), packed, nodes[:3]), Memory(), CLOCK, KNOBS
    )
    assert at.memory.unneeded_since == {}


def test_a_consolidation_names_no_more_nodes_than_the_disruption_budget_allows() -> None:
    # 6 nodes at 48Gi (two 24Gi pods: at the threshold, so busy); the pods fit on 3
    world, nodes = spread_pool(6, "24Gi", "24Gi")
    obs = observe(scaler(scale_down=True), pool(target=6), world, nodes)
    # the default budget: 10 % of 6 nodes, rounded up: one at a time
    one = decide(obs, Memory(), CLOCK, KNOBS)
    assert one.memory.unneeded_since == {"n-0": NOW}
    wide = pool(target=6)
    wide["spec"]["disruption"] = {"budgets": [{"nodes": "50%"}]}
    three = decide(observe(scaler(scale_down=True), wide, world, nodes), Memory(), CLOCK, KNOBS)
    assert three.memory.unneeded_since == {"n-0": NOW, "n-1": NOW, "n-2": NOW}
    due = decide(
        observe(scaler(scale_down=True), wide, world, nodes),
        three.memory,
        Clock(NOW + 600, WALL),
        KNOBS,
    )
    assert due.target is not None
    assert (due.target.expected, due.target.desired) == (6, 3)
    # a node being drained takes the budget's one: none is named meanwhile
    draining = [*nodes[:5], node("n-5", draining=True)]
    busy = decide(
        observe(scaler(scale_down=True), pool(target=5), world, draining), Memory(), CLOCK, KNOBS
    )
    assert busy.memory.unneeded_since == {}


def test_a_pod_that_cannot_move_keeps_its_node_out_of_a_consolidation() -> None:
    world, nodes = spread_pool(4, "36Gi", "18Gi")
    del world[0]["metadata"]["ownerReferences"]  # n-0's 36Gi pod: no controller brings it back
    obs = observe(scaler(scale_down=True), pool(target=4), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    assert first.memory.unneeded_since == {"n-1": NOW}
    assert [u.node for u in first.status.unremovable_nodes or ()] == ["n-0"]


def test_a_spread_no_drain_can_fix_is_replaced_two_nodes_for_one_new_one() -> None:
    # 3 nodes of 96Gi, each a 44Gi and a 9Gi pod (55 %): no node's 44Gi fits another's 43Gi
    # free, but the pods fit on 2 (two 44Gi on one): n-0 and n-1 are traded for a new node
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    assert first.target is None
    assert first.memory.unneeded_since == {"n-0": NOW, "n-1": NOW}
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    summary = (
        "scale up 3 -> 4 to replace 2 nodes unneeded for 10m (n-0, n-1) with 1 new node "
        "(consolidation: the pods fit on 2 nodes)"
    )
    assert raised.target == TargetWrite(3, 4, Why.REPLACE, summary)
    assert [(m.node, m.on) for m in raised.marks] == [("n-0", True), ("n-1", True)]
    assert "TriggeredScaleUp" in reasons(raised)
    assert raised.memory.replacing == Replacing(("n-0", "n-1"), 4, start=3, since=NOW + 600)
    # the new node boots: nothing lowered, the unneeded times kept
    booting = observe(scaler(scale_down=True), pool(target=4), world, nodes)
    wait = decide(booting, raised.memory, Clock(NOW + 630, WALL), KNOBS)
    assert wait.target is None
    assert wait.memory.unneeded_since == {"n-0": NOW, "n-1": NOW}
    # Ready and empty (not unneeded: the pods go there): n-0 goes first, a budget of one node
    up = observe(scaler(scale_down=True), pool(target=4), world, [*nodes, node("n-3")])
    down = decide(up, wait.memory, Clock(NOW + 660, WALL), KNOBS)
    note = "scale down 4 -> 3: nodes unneeded for 10m (consolidation: the pods fit on 2 nodes)"
    assert down.target == TargetWrite(4, 3, Why.SCALE_DOWN, note)
    assert down.memory.replacing == Replacing(
        ("n-0", "n-1"), 3, start=3, since=NOW + 600, wrote=(4,)
    )
    # the cache still shows 4 for a moment: still under way, the names kept
    lag = decide(up, down.memory, Clock(NOW + 661, WALL), KNOBS)
    assert lag.memory.replacing is not None
    assert set(lag.memory.unneeded_since) >= {"n-0", "n-1"}
    assert [m for m in lag.marks if not m.on] == []
    # while n-0 drains nothing more is lowered
    draining = [node("n-0", draining=True), *nodes[1:], node("n-3")]
    busy = observe(scaler(scale_down=True), pool(target=3), world, draining)
    held = decide(busy, down.memory, Clock(NOW + 670, WALL), KNOBS)
    assert held.target is None
    assert held.memory.replacing == Replacing(("n-1",), 3, start=3, since=NOW + 600, wrote=(4,))
    # n-0 gone, its 44Gi on the new node and its 9Gi on n-2, as the scheduler put them: n-1 next
    moved = [
        running("r-0-0", "n-3", "44Gi"),
        running("r-0-1", "n-2", "9Gi"),
        *(p for p in world if p["spec"]["nodeName"] != "n-0"),
    ]
    after = observe(scaler(scale_down=True), pool(target=3), moved, [*nodes[1:], node("n-3")])
    last = decide(after, held.memory, Clock(NOW + 700, WALL), KNOBS)
    assert last.target is not None
    assert (last.target.expected, last.target.desired, last.target.why) == (3, 2, Why.SCALE_DOWN)
    assert last.memory.replacing == Replacing(("n-1",), 2, start=3, since=NOW + 600, wrote=(4, 3))
    # n-1 drains: the replacement is done, and no rest follows it
    gone = [node("n-1", draining=True), nodes[2], node("n-3")]
    done = decide(
        observe(scaler(scale_down=True), pool(target=2), moved, gone),
        last.memory,
        Clock(NOW + 710, WALL),
        KNOBS,
    )
    assert (done.memory.replacing, done.memory.replace_after) == (None, None)


def test_a_replacement_waits_for_its_new_node_to_be_ready_but_not_for_ever() -> None:
    """Registered but not Ready: not in flight, so no provisioning timeout; the replacement
    waits, then, past the max provision time, is dropped and rests."""
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    up = observe(scaler(scale_down=True), pool(target=4), world, [*nodes, node("n-3", ready=False)])
    wait = decide(up, raised.memory, Clock(NOW + 660, WALL), KNOBS)
    assert wait.target is None
    assert wait.memory.replacing == raised.memory.replacing
    assert wait.memory.unneeded_since == {"n-0": NOW, "n-1": NOW}
    late = decide(up, wait.memory, Clock(NOW + 600 + 901, WALL), KNOBS)
    assert late.memory.replacing is None
    assert late.memory.replace_after == NOW + 600 + 901 + 1800


def test_a_replacement_waits_for_its_new_node_to_open_and_says_so() -> None:
    """Ready but still carrying the lifecycle's not-ready taint or the Autoscaler's own
    reservation: no pod lands there yet, and the NodePool controller, which judges a
    scale-down on the Nodes as they are, would find no place for the drained pods and remove
    the empty new node instead. Nothing is lowered until it opens; ``lastDecision`` names the
    replacement meanwhile."""
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    starting = node("n-3")
    starting["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    for new in (starting, node("n-3", reserved=True)):
        up = observe(scaler(scale_down=True), pool(target=4), world, [*nodes, new])
        wait = decide(up, raised.memory, Clock(NOW + 660, WALL), KNOBS)
        assert wait.target is None
        assert wait.memory.replacing == raised.memory.replacing
        assert "replacing 2 nodes (n-0, n-1)" in (wait.status.last_decision or "")
    up = observe(scaler(scale_down=True), pool(target=4), world, [*nodes, node("n-3")])
    down = decide(up, raised.memory, Clock(NOW + 660, WALL), KNOBS)
    assert down.target is not None
    assert (down.target.expected, down.target.desired) == (4, 3)


def test_a_replacement_whose_room_was_taken_is_dropped_and_rests() -> None:
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    assert raised.memory.replacing is not None
    # pods of another workload took the new node's room before the drain
    taken = [*world, running("other", "n-3", "60Gi")]
    up = observe(scaler(scale_down=True), pool(target=4), taken, [*nodes, node("n-3")])
    dropped = decide(up, raised.memory, Clock(NOW + 660, WALL), KNOBS)
    assert dropped.target is None
    assert (dropped.memory.replacing, dropped.memory.replace_after) == (None, NOW + 660 + 1800)
    assert "no replacement for now: the last one was dropped" in (
        dropped.status.last_decision or ""
    )
    # resting: the same spread (the new node gone again) is not traded for half an hour
    again = decide(obs, dropped.memory, Clock(NOW + 1300, WALL), KNOBS)
    due = decide(obs, again.memory, Clock(NOW + 1900, WALL), KNOBS)
    assert due.target is None
    assert due.memory.unneeded_since == {}
    rested = decide(obs, due.memory, Clock(NOW + 2500, WALL), KNOBS)
    assert rested.memory.unneeded_since == {"n-0": NOW + 2500, "n-1": NOW + 2500}
    traded = decide(obs, rested.memory, Clock(NOW + 3100, WALL), KNOBS)
    assert traded.target is not None
    assert traded.target.why is Why.REPLACE


def test_a_replacement_the_scheduler_undid_is_not_tried_again_on_the_same_workload() -> None:
    """Under LeastAllocated n-0's pods both land on the empty new node, so n-1's 44Gi has no
    place: the pool is back at three nodes of 53Gi, its pods moved for nothing. No
    replacement starts again while the workload is the same, long after the rest."""
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    up = observe(scaler(scale_down=True), pool(target=4), world, [*nodes, node("n-3")])
    down = decide(up, raised.memory, Clock(NOW + 660, WALL), KNOBS)
    assert down.target is not None
    assert down.target.desired == 3
    spread_again = [
        running("r-0-0", "n-3", "44Gi"),
        running("r-0-1", "n-3", "9Gi"),
        *(p for p in world if p["spec"]["nodeName"] != "n-0"),
    ]
    three = [*nodes[1:], node("n-3")]
    after = observe(scaler(scale_down=True), pool(target=3), spread_again, three)
    undone = decide(after, down.memory, Clock(NOW + 700, WALL), KNOBS)
    assert (undone.target, undone.memory.replacing) == (None, None)
    assert undone.memory.replace_failed is not None
    assert "the last one was dropped" in (undone.status.last_decision or "")  # resting first
    memory = undone.memory
    for minutes in (40, 50, 60, 120):
        later = decide(after, memory, Clock(NOW + 60 * minutes, WALL), KNOBS)
        assert (later.target, later.memory.unneeded_since) == (None, {})
        # the rest ends 30m after the drop; then why none starts, the same text each pass
        # (the status is written on a change)
        if minutes >= 50:
            assert "one failed for this workload" in (later.status.last_decision or "")
        memory = later.memory
    # the workload changed (n-3's 9Gi pod gone): the pool is looked at again
    changed = observe(
        scaler(scale_down=True), pool(target=3), spread_again[:1] + spread_again[2:], three
    )
    looked = decide(changed, memory, Clock(NOW + 60 * 130, WALL), KNOBS)
    assert looked.memory.unneeded_since != {}
    assert "replacement" not in (looked.status.last_decision or "")


def test_a_replacement_whose_new_node_never_comes_ends_and_rests() -> None:
    world, nodes = spread_pool(3, "44Gi", "9Gi")
    obs = observe(scaler(scale_down=True), pool(target=3), world, nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    raised = decide(obs, first.memory, Clock(NOW + 600, WALL), KNOBS)
    # no new node after the max provision time: the target goes back to the registered nodes
    booting = observe(scaler(scale_down=True), pool(target=4), world, nodes)
    timeout = decide(booting, raised.memory, Clock(NOW + 1600, WALL), KNOBS)
    assert timeout.target is not None
    assert timeout.target.why is Why.PROVISION_TIMEOUT
    # its wait ended in the same pass (past the max provision time since the raise)
    assert timeout.memory.replacing is None
    assert timeout.memory.replace_after == NOW + 1600 + 1800
    back = decide(obs, timeout.memory, Clock(NOW + 1610, WALL), KNOBS)
    assert (back.target, back.memory.replacing) == (None, None)
    assert back.memory.replace_after == NOW + 1600 + 1800


def test_a_blocked_node_is_reported_once_and_listed_unremovable() -> None:
    nodes = [node("n-0", annotations={DO_NOT_DISRUPT: "true"}), node("n-1")]
    obs = observe(scaler(scale_down=True), pool(target=2), (), nodes)
    first = decide(obs, Memory(), CLOCK, KNOBS)
    on_nodes = [(n.key, n.reason) for n in first.events if n.subject is Subject.NODE]
    assert on_nodes == [("n-0", "ScaleDownBlocked")]
    unremovable = first.status.unremovable_nodes
    assert unremovable is not None
    assert [(u.node, u.reason) for u in unremovable] == [("n-0", "NodeDoNotDisrupt")]
    again = decide(obs, first.memory, CLOCK, KNOBS)
    assert [n for n in again.events if n.subject is Subject.NODE] == []


def test_each_reason_is_told_once_and_again_after_it_went_away() -> None:
    obs = observe(scaler(), pool(), [pending("huge", "120Gi")])
    first = decide(obs, Memory(), CLOCK, KNOBS)
    assert [(n.subject, n.reason) for n in first.events] == [
        (Subject.AUTOSCALER, "NotTriggerScaleUp"),
        (Subject.POD, "NotTriggerScaleUp"),
    ]
    assert decide(obs, first.memory, CLOCK, KNOBS).events == ()
    gone = decide(observe(scaler(), pool()), first.memory, CLOCK, KNOBS)
    back = decide(obs, gone.memory, CLOCK, KNOBS)
    assert len(back.events) == 2


def test_status_counts_pending_and_unschedulable_pods() -> None:
    gated = pending("gated", schedulingGates=[{"name": "wait"}])
    gated["status"] = {"phase": "Pending"}
    obs = observe(scaler(), pool(), [*pods("w", 2), gated])
    status = decide(obs, Memory(), CLOCK, KNOBS).status
    assert (status.pending_pods, status.unschedulable_pods, status.generation) == (3, 2, 3)


def test_reserved_nodes_get_their_pods_then_open() -> None:
    obs = observe(scaler(), pool(reserve=True), pods("w", 4))
    raised = decide(obs, Memory(), CLOCK, KNOBS)
    assert raised.target is not None
    assert raised.target.desired == 2
    assert raised.memory.reservation.slots == [
        ("uid-w-0", "uid-w-1", "uid-w-2"),
        ("uid-w-3",),
    ]
    # The VMs are recorded and their Nodes register, reserved and Ready just now.
    nodes = [
        node("vm-a", reserved=True, ready_since=WALL),
        node("vm-b", reserved=True, ready_since=WALL),
    ]
    booted = observe(
        scaler(), pool(target=2, reserve=True, instances=["vm-a", "vm-b"]), pods("w", 4), nodes
    )
    remembered = copy.deepcopy(raised.memory)
    holding = decide(booted, raised.memory, CLOCK, KNOBS)
    assert raised.memory == remembered  # naming the slots changed the decision's copy only
    assert holding.memory.reservation.names == {0: "vm-a", 1: "vm-b"}
    assert [(g.pod, g.node) for g in holding.grants] == [
        ("uid-w-0", "vm-a"),
        ("uid-w-1", "vm-a"),
        ("uid-w-2", "vm-a"),
        ("uid-w-3", "vm-b"),
    ]
    assert holding.lifts == ()  # their pods are not bound yet
    memory = settle(holding.memory, [(g.pod, g.node) for g in holding.grants], [])
    # once a node's pods are bound, it opens to every pod; the tolerations are not written twice
    bound = [running(f"w-{i}", "vm-a") for i in range(3)]
    landed = observe(
        scaler(),
        pool(target=2, reserve=True, instances=["vm-a", "vm-b"]),
        [*bound, pending("w-3")],
        nodes,
    )
    opening = decide(landed, memory, CLOCK, KNOBS)
    assert opening.grants == ()
    assert [(lift.node, lift.name) for lift in opening.lifts] == [("vm-a", "vm-a")]
    assert settle(opening.memory, [], ["vm-a"]).reservation.slots == [("uid-w-3",)]


def test_a_new_node_template_forgets_which_pods_its_nodes_did_not_take() -> None:
    obs = observe(scaler(), pool(target=1), [pending("w-0")], [node("n-0")])
    remembered = Memory(landing=landing(NOW - 31))
    assert decide(obs, remembered, CLOCK, KNOBS).target is None  # not taken: set aside
    bigger = pool(target=1)
    bigger["spec"]["instanceType"] = "m5.4xlarge"
    obs = observe(scaler(), bigger, [pending("w-0")], [node("n-0")])
    decision = decide(obs, remembered, CLOCK, KNOBS)
    assert decision.memory.landing.template == obs.template
    assert "NotTakenByNewNode" not in (decision.status.last_decision or "")


def test_a_pool_the_operator_cannot_read_makes_the_autoscaler_unready() -> None:
    broken = pool()
    broken["spec"]["instanceType"] = "z9.huge"
    got = snapshot(
        scaler(),
        parse_autoscaler(scaler()),
        broken,
        pods=(),
        nodes=(),
        pods_on=lambda _: (),
        first_seen=lambda _: NOW,
    )
    assert isinstance(got, Unready)
    assert got.reason == "InvalidNodePool"
    assert "z9.huge" in got.message


def test_memory_defaults_are_independent() -> None:
    assert Memory().reservation is not Memory().reservation
    assert Reservation() == Memory().reservation


# --- deciding against the server's target ------------------------------------------------


class Scale:
    """The pool's target as the server has it; records what was written."""

    def __init__(self, replicas: int, *, moves: Sequence[int] = ()) -> None:
        self.replicas = replicas
        self.moves = list(moves)  # someone else's writes, one before each of ours
        self.writes: list[tuple[int, int]] = []

    async def write(self, pool_name: str, write: TargetWrite) -> int | None:
        assert pool_name == "big"
        if self.moves:
            self.replicas = self.moves.pop(0)
        if self.replicas != write.expected:
            return self.replicas
        self.writes.append((write.expected, write.desired))
        self.replicas = write.desired
        return None


async def test_a_raise_on_a_cache_behind_the_server_is_planned_again_from_the_server() -> None:
    # The cache says 0, the server already has 2 (booting for these very pods): no raise.
    scale = Scale(2)
    obs = observe(scaler(), pool(target=0), pods("w", 6))
    decision = await decide_and_write(obs, Memory(), CLOCK, KNOBS, scale.write)
    assert decision.target is None
    assert scale.writes == []
    assert decision.status.last_decision == (
        "no scale up (target 2): 6 pods fit existing or booting nodes"
    )
    # The server has 1: the raise is made from 1, for what 1 booting node cannot hold.
    scale = Scale(1)
    decision = await decide_and_write(obs, Memory(), CLOCK, KNOBS, scale.write)
    assert scale.writes == [(1, 2)]
    assert reasons(decision) == ["TriggeredScaleUp"]


async def test_a_lowering_never_undoes_what_someone_else_raised() -> None:
    scale = Scale(2, moves=[4])  # a person scales to 4 between our look and our write
    obs = observe(scaler(scale_down=True), pool(target=2), (), [node("n-0"), node("n-1")])
    memory = Memory(unneeded_since={"n-0": NOW - 601, "n-1": NOW - 601})
    decision = await decide_and_write(obs, memory, CLOCK, KNOBS, scale.write)
    assert decision.target is None
    assert scale.writes == []
    assert scale.replicas == 4
    assert "ScaleDown" not in reasons(decision)


async def test_a_target_that_keeps_moving_ends_in_a_conflict_for_the_workqueue() -> None:
    scale = Scale(0, moves=list(range(1, 20)))
    obs = observe(scaler(), pool(target=0), pods("w", 60))
    with pytest.raises(Conflict):
        await decide_and_write(obs, Memory(), CLOCK, KNOBS, scale.write)
    assert scale.writes == []
