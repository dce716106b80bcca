"""The NodePool controller's plan as a pure function: one observation in, the plan out
(scale up and down, what leaves, repair, budgets, rests, the create gate, a blocked choice)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodepool_operator.cloud import Instance, QuotaExceeded
from nodepool_operator.controllers.nodepool import decide
from nodepool_operator.controllers.nodepool._pool_status import CloudFailure, cloud_failure
from nodepool_operator.controllers.nodepool.records import NodePods, PoolNode
from nodepool_operator.scheduling import PdbView, ScaleDownNode, pdb_view, pod_view
from tests.unit.nodepool_operator.controllers.nodepool.tables import (
    NOW,
    ROOM,
    SETTINGS,
    node,
    observed,
    pool,
    rec,
    states,
    vm,
)


def reasons(decision: decide.Decision) -> list[str]:
    return [e.reason for e in decision.events]


# -- scale up and down ------------------------------------------------------------------------


def test_scale_up_records_one_intent_per_missing_vm_before_any_create() -> None:
    records = [rec("a")]
    decision = decide.decide(observed(pool(3, records), [node("a")], [vm("a")]), NOW, SETTINGS)
    assert decision.record
    assert decision.add == 2
    assert sorted(s for s in states(decision).values()) == ["creating", "creating", "running"]
    assert reasons(decision) == ["ScalingUp"]
    assert decision.taint == ()


def test_nothing_to_do_writes_nothing_first() -> None:
    records = [rec("a"), rec("b")]
    seen = observed(pool(2, records), [node("a"), node("b")], [vm("a"), vm("b")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert not decision.record
    assert decision.events == ()
    assert decision.records == tuple(records)


def test_scale_down_retires_a_vm_without_a_node_first_and_taints_nothing() -> None:
    records = [rec("a"), rec("b", "pending")]
    seen = observed(pool(1, records), [node("a")], [vm("a"), vm("b", "pending")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running", "b": "deleting"}
    assert decision.taint == ()
    assert reasons(decision) == ["ScalingDown"]


def test_scale_down_taints_the_chosen_node_and_marks_its_record() -> None:
    records = [rec("a"), rec("b")]
    seen = observed(pool(1, records), [node("a"), node("b")], [vm("a"), vm("b")])
    decision = decide.decide(seen, NOW, SETTINGS)
    retired = [name for name, state in states(decision).items() if state == "deleting"]
    assert len(retired) == 1
    assert decision.taint == (f"n-{retired[0]}",)
    assert decision.retire == tuple(retired)


def test_a_resting_node_is_not_chosen_and_its_rest_is_a_wait() -> None:
    records = [rec("a"), rec("b")]
    resting = node("a", timed_out_at=NOW - 100)
    seen = observed(pool(1, records), [resting, node("b")], [vm("a"), vm("b")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running", "b": "deleting"}
    assert decision.resting == {"a"}
    assert 200.0 in decision.waits  # RECHECK_SECONDS (300) after it timed out


def test_while_a_node_rests_the_next_candidate_is_one_that_can_go_or_none() -> None:
    records = [rec("a"), rec("b")]
    resting = node("a", timed_out_at=NOW - 100)
    # b's pod takes its whole node: it has no place elsewhere, so b cannot go now
    pods = {"n-a": loaded("a", "100m"), "n-b": loaded("b", "2")}
    seen = observed(pool(1, records), [resting, node("b")], [vm("a"), vm("b")], pods=pods)
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running", "b": "running"}
    assert decision.taint == ()
    assert 200.0 in decision.waits  # the surplus waits for a's rest to end
    # with no node resting the target is met anyway: the least used goes, though neither
    # node's pods have a place elsewhere
    seen = observed(pool(1, records), [node("a"), node("b")], [vm("a"), vm("b")], pods=pods)
    assert decide.decide(seen, NOW, SETTINGS).retire == ("a",)


def test_adopts_an_unknown_vm_tagged_for_the_pool_up_to_the_desired_count() -> None:
    seen = observed(pool(1), [], [vm("x"), vm("y")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"x": "running"}
    assert reasons(decision) == ["Adopted"]
    assert decision.record
    assert decision.add == 0


def test_a_tainted_node_whose_record_stays_is_untainted() -> None:
    records = [rec("a")]
    seen = observed(pool(1, records), [node("a", tainted=True)], [vm("a")])
    assert decide.decide(seen, NOW, SETTINGS).untaint == ("n-a",)


# -- what leaves ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "vms", "reason"),
    [
        ([], [], "VMGone"),
        ([node("a", deleting=True)], [vm("a")], "NodeDeleted"),
        ([], [vm("a", age=SETTINGS.registration_timeout_seconds + 1)], "RegistrationTimeout"),
    ],
    ids=["vm-gone", "node-deleted", "never-registered"],
)
def test_a_record_that_must_go_is_retired_and_replaced(
    nodes: list[PoolNode], vms: list[Instance], reason: str
) -> None:
    decision = decide.decide(observed(pool(1, [rec("a")]), nodes, vms), NOW, SETTINGS)
    assert decision.add == 1
    assert states(decision)["a"] == "deleting"
    leaving = [e for e in decision.events if e.reason == reason]
    assert len(leaving) == 1
    assert leaving[0].about == "a"
    assert leaving[0].type == "Warning"
    assert decision.taint == ()  # leaving anyway: not tainted as a scale-down choice


def test_registration_not_yet_due_is_a_wait() -> None:
    seen = observed(pool(1, [rec("a")]), [], [vm("a", age=100)])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running"}
    assert SETTINGS.registration_timeout_seconds - 100 in decision.waits


# -- repair -----------------------------------------------------------------------------------


def sick(name: str, since: float) -> PoolNode:
    return node(name, ready=False, unhealthy=(since, "Ready=Unknown"))


@pytest.mark.parametrize(
    ("unhealthy", "total", "percent", "replaced", "blocked"),
    [
        (["a"], 5, 20, ["a"], False),  # 1 of 5: within 20%
        (["a", "b"], 5, 20, [], True),  # 2 of 5 (40%) > 20%: none, RepairBlocked
        (["a", "b"], 5, 50, ["a"], False),  # raised to 50%: one at a time, the oldest
    ],
)
def test_repair_replaces_one_at_a_time_within_the_threshold(
    unhealthy: list[str], total: int, percent: int, replaced: list[str], blocked: bool
) -> None:
    names = [chr(ord("a") + i) for i in range(total)]
    records = [rec(n) for n in names]
    nodes = [
        sick(n, NOW - 3600 - i) if n in unhealthy else node(n)
        for i, n in enumerate(reversed(names))
    ]
    repair = {"repair": {"maxUnhealthyPercent": percent}}
    seen = observed(pool(total, records, disruption=repair), nodes, [vm(n) for n in names])
    decision = decide.decide(seen, NOW, SETTINGS)
    retired = sorted(n for n, s in states(decision).items() if s == "deleting")
    assert retired == replaced
    assert reasons(decision).count("NodeRepair") == len(replaced)
    assert bool(decision.repair_blocked) is blocked
    assert decision.add == len(replaced)


def test_repair_waits_for_the_one_being_repaired() -> None:
    records = [rec("a", "deleting"), rec("b"), rec("c"), rec("d"), rec("e")]
    nodes = [sick("a", NOW - 7200), sick("b", NOW - 3600), node("c"), node("d"), node("e")]
    repair = {"repair": {"maxUnhealthyPercent": 50}}
    vms = [vm(n) for n in "abcde"]
    decision = decide.decide(
        observed(pool(4, records, disruption=repair), nodes, vms), NOW, SETTINGS
    )
    assert states(decision)["b"] == "running"
    assert "NodeRepair" not in reasons(decision)


def test_an_unhealthy_node_within_its_toleration_is_a_wait() -> None:
    seen = observed(pool(1, [rec("a")]), [sick("a", NOW - 60)], [vm("a")])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running"}
    assert SETTINGS.node_repair_seconds - 60 in decision.waits


# -- budgets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "already", "retired"),
    [
        ("0", 0, 0),  # none may be disrupted
        ("1", 0, 1),  # one at a time
        ("1", 1, 0),  # one already tainted: the next waits
        ("100%", 0, 2),  # all the surplus at once
    ],
)
def test_scale_down_within_the_budgets_counted_from_the_cluster(
    budget: str, already: int, retired: int
) -> None:
    names = ["a", "b", "c", "d"]
    records = [rec(n) for n in names]
    nodes = [node(n, tainted=i < already) for i, n in enumerate(names)]
    spec = {"disruption": {"budgets": [{"nodes": budget}]}}
    seen = observed(pool(2, records, **spec), nodes, [vm(n) for n in names])
    decision = decide.decide(seen, NOW, SETTINGS)
    assert len(decision.retire) == retired
    assert len(decision.budget_held) == 2 - retired
    assert len(decision.taint) == retired


# -- the create gate ----------------------------------------------------------------------------

REFUSED = cloud_failure(QuotaExceeded("vCPU quota", retry_after=60.0))


@pytest.mark.parametrize(
    ("target", "holding", "held", "creates"),
    [
        (2, None, False, 1),  # an intent, nothing refused: created
        (2, REFUSED, True, 0),  # refused recently for this spec: reported, not asked again
        (1, REFUSED, False, 0),  # nothing to create: an old refusal degrades nothing
    ],
)
def test_create_gate(target: int, holding: CloudFailure | None, held: bool, creates: int) -> None:
    seen = observed(pool(target, [rec("a")]), [node("a")], [vm("a")])
    decision = decide.decide(seen, NOW, SETTINGS, holding)
    assert (decision.held is not None) is held
    assert len(decision.creates) == creates
    assert decision.add == target - 1  # the intent is recorded either way


# -- a blocked scale-down choice ------------------------------------------------------------------


def pods_on(name: str, *, bare: bool) -> NodePods:
    """A Node with one pod: ``bare`` (no controller: a default blocker) or a ReplicaSet's."""
    meta: dict[str, Any] = {"name": f"pod-{name}", "namespace": "default", "uid": f"u-{name}"}
    if not bare:
        meta["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": True}
        ]
    pod = {
        "metadata": meta,
        "spec": {"nodeName": f"n-{name}", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    return NodePods(ScaleDownNode(f"n-{name}", ROOM, pods=(pod_view(pod),)), empty=False)


@pytest.mark.parametrize(
    ("budget", "b"),
    [
        ("100%", "deleting"),
        # the default (10% of 2: one) still counts a's taint, lifted only after this plan:
        # b waits for the next pass
        ("10%", "running"),
    ],
)
def test_a_chosen_node_a_blocker_now_holds_is_kept_and_another_goes_instead(
    budget: str, b: str
) -> None:
    records = [rec("a", "deleting"), rec("b")]
    nodes = [node("a", tainted=True), node("b")]
    pods = {"n-a": pods_on("a", bare=True), "n-b": pods_on("b", bare=False)}
    spec = {"disruption": {"budgets": [{"nodes": budget}]}}
    seen = observed(pool(1, records, **spec), nodes, [vm("a"), vm("b")], pods=pods)
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "running", "b": b}
    [kept] = [e for e in decision.events if e.reason == "ScaleDownBlocked"]
    assert kept.node == "n-a"  # said on the Node too
    assert decision.taint == (("n-b",) if b == "deleting" else ())
    assert decision.budget_held == (() if b == "deleting" else ("b",))
    assert decision.untaint == ("n-a",)


def test_a_blocked_choice_stays_when_no_other_node_can_go() -> None:
    records = [rec("a", "deleting"), rec("b")]
    nodes = [node("a", tainted=True), node("b")]
    pods = {"n-a": pods_on("a", bare=True), "n-b": pods_on("b", bare=True)}
    seen = observed(pool(1, records), nodes, [vm("a"), vm("b")], pods=pods)
    decision = decide.decide(seen, NOW, SETTINGS)
    assert states(decision) == {"a": "deleting", "b": "running"}
    assert "ScaleDownBlocked" not in reasons(decision)
    assert decision.untaint == ()


# -- which node a scale-down takes: the Autoscaler's names first ------------------------------


def loaded(name: str, cpu: str, *, bare: bool = False) -> NodePods:
    """``n-<name>`` with one pod of ``cpu`` (a ReplicaSet's, or ``bare``)."""
    meta: dict[str, Any] = {"name": f"pod-{name}", "namespace": "default", "uid": f"u-{name}"}
    meta["labels"] = {"app": name}
    if not bare:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-1"}]
        meta["ownerReferences"][0]["controller"] = True
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    pod = {
        "metadata": meta,
        "spec": {"nodeName": f"n-{name}", "containers": [container]},
        "status": {"phase": "Running"},
    }
    return NodePods(ScaleDownNode(f"n-{name}", ROOM, pods=(pod_view(pod),)), empty=False)


def empty(name: str) -> NodePods:
    return NodePods(ScaleDownNode(f"n-{name}", ROOM), empty=True)


def pdb(app: str, allowed: int) -> PdbView:
    """A budget over the pods labelled ``app=<app>`` allowing ``allowed`` disruptions now."""
    return pdb_view(
        {
            "metadata": {"namespace": "default", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed, "observedGeneration": 1},
        }
    )


LOADED = {n: loaded(n, "100m") for n in "abc"}


@pytest.mark.parametrize(
    ("named", "pods", "budgets", "goes"),
    [
        pytest.param("", {}, [], "a", id="none-named-own-order-by-name"),
        pytest.param("b", {}, [], "b", id="named-first"),
        pytest.param("c", {"c": loaded("c", "500m")}, [], "c", id="named-before-emptier"),
        # c's pod takes its whole node: no other node has room for it, so c cannot go now
        pytest.param("c", {"c": loaded("c", "2")}, [], "a", id="named-but-busy-keeps-its-rank"),
        pytest.param("b", {"b": loaded("b", "100m", bare=True)}, [], "a", id="named-but-blocked"),
        # a's pod may not be evicted now (its budget allows none), b's may
        pytest.param("", LOADED, [pdb("a", 0), pdb("b", 1)], "b", id="evictable-now-first"),
        pytest.param("ac", LOADED, [pdb("a", 0)], "c", id="named-evictable-now-first"),
        pytest.param("a", LOADED, [pdb("a", 0)], "a", id="named-even-if-held"),
    ],
)
def test_a_scale_down_removes_the_nodes_the_autoscaler_named(
    named: str, pods: dict[str, NodePods], budgets: list[PdbView], goes: str
) -> None:
    records = [rec("a"), rec("b"), rec("c")]
    nodes = [node(n, unneeded=n in named) for n in "abc"]
    on = {f"n-{n}": pods.get(n) or empty(n) for n in "abc"}
    seen = observed(pool(2, records), nodes, [vm(n) for n in "abc"], pods=on)
    seen = replace(seen, budgets=tuple(budgets))
    decision = decide.decide(seen, NOW, SETTINGS)
    assert decision.retire == (goes,)
    assert decision.taint == (f"n-{goes}",)
