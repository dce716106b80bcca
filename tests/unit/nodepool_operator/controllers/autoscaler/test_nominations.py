"""Which planned pods get which nomination (``_nominations``): a table over the pod's and the
planned node's states. The pods are read at the boundary, as observe reads them
(``read_pending``: their views and verdicts); the Nodes are how long each has been Ready."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.controllers.autoscaler._nominations import (
    Nominations,
    in_queue_order,
    lead_kind,
    nominations,
)
from nodepool_operator.scheduling import PodView, pod_view, read_pending
from tests import factories

GRACE = 30.0


def pending(name: str, nominated: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"nominatedNodeName": nominated} if nominated else {}
    obj = factories.pod(name, namespace="prod", memory="28Gi", unschedulable=True)
    obj["status"].update(status)
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def views(pods: dict[str, dict[str, Any]]) -> dict[str, PodView]:
    return {key: pod_view(pod) for key, pod in pods.items()}


# (case, the pod as read (None: bound or gone), node vm-a: "absent" (not registered, VM
# recorded) / "gone" (no Node, no VM) / seconds Ready (None: not Ready)) -> the nomination
# written (None: nothing; "-": ours withdrawn), and whether the slot is done.
CASES: list[tuple[str, dict[str, Any] | None, str | float | None, str | None, bool]] = [
    ("pending, node booting (registered, not Ready)", pending("p"), None, "vm-a", False),
    ("pending, node Ready within the grace", pending("p"), 5.0, "vm-a", False),
    ("pending, already nominated so", pending("p", "vm-a"), None, None, False),
    ("pending, nominated elsewhere (the scheduler's)", pending("p", "n-9"), None, None, False),
    ("pending, node not registered yet", pending("p"), "absent", None, False),
    ("bound or gone", None, None, None, True),
    ("bound or gone, node not registered", None, "absent", None, True),
    ("ours standing, node Ready for the grace", pending("p", "vm-a"), GRACE, "-", True),
    ("unnominated, node Ready for the grace", pending("p"), GRACE + 1, None, True),
    ("elsewhere, node Ready for the grace", pending("p", "n-9"), GRACE, None, True),
    ("ours standing, node and VM gone", pending("p", "vm-a"), "gone", "-", True),
    ("unnominated, node and VM gone", pending("p"), "gone", None, True),
]


@pytest.mark.parametrize(
    ("pod", "state", "wrote", "done"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_nomination_of_a_planned_pod(
    pod: dict[str, Any] | None, state: str | float | None, wrote: str | None, done: bool
) -> None:
    nodes = {} if isinstance(state, str) else {"vm-a": state}  # name -> seconds Ready
    vms = [] if state == "gone" else ["vm-a"]
    pods = {} if pod is None else {"prod/p": pod}
    out = nominations(
        {"vm-a": ("prod/p",)},
        vms=vms,
        nodes=nodes,
        pods=views(pods),
        ready_for=nodes.get,
        grace=GRACE,
    )
    assert out.done == (("vm-a",) if done else ())
    if wrote is None:
        assert out.writes == ()
        return
    [write] = out.writes
    assert write.pod == "prod/p"
    want = None if wrote == "-" else wrote
    assert write.node == want
    assert write.patch == {
        "status": {"nominatedNodeName": want},
        "metadata": {"resourceVersion": "7"},
    }


def test_a_pod_planned_twice_belongs_to_its_first_slot_and_the_grace_is_counted_down() -> None:
    slots = {"vm-a": ("prod/p", "prod/q"), "vm-b": ("prod/q", "prod/r")}
    nodes = {"vm-a": 10.0, "vm-b": None}
    pods = {k: pending(k.split("/")[1]) for k in ("prod/p", "prod/q", "prod/r")}
    out = nominations(
        slots,
        vms=["vm-a", "vm-b"],
        nodes=nodes,
        pods=views(pods),
        ready_for=nodes.get,
        grace=GRACE,
    )
    assert [(w.pod, w.node) for w in out.writes] == [
        ("prod/p", "vm-a"),
        ("prod/q", "vm-a"),
        ("prod/r", "vm-b"),
    ]
    assert out.done == ()
    assert out.next_due == GRACE - 10.0


def test_a_pod_nominated_to_a_pool_node_is_still_a_candidate() -> None:
    """classify leaves nominated pods out (preemption's); one nominated to a Node of the pool
    and still Unschedulable under it waits for the plan's capacity."""
    pool = {"vm-a"}
    assert read_pending(pending("p")).candidate_on(pool)
    assert read_pending(pending("p", "vm-a")).candidate_on(pool)
    assert not read_pending(pending("p", "elsewhere")).candidate_on(pool)  # preemption's
    assert read_pending(pending("p", "elsewhere")).candidate_on()  # any node: first-seen time
    scheduling = factories.pod("q", namespace="prod", memory="28Gi")
    scheduling["status"] = {"nominatedNodeName": "vm-a"}
    assert not read_pending(scheduling).candidate_on(pool)  # not (yet) Unschedulable


# --- gated nodes: nominated when Ready, opened together -------------------------------------


def _two_gated(
    ready: dict[str, float | None], queued_at: dict[str, float] | None = None
) -> Nominations:
    """Two slots (vm-a: p, vm-b: q), both nodes gated, a hold of 5 s; ``ready``: seconds
    Ready by name for the registered ones (absent: not registered yet)."""
    pods = {k: pending(k.split("/")[1]) for k in ("prod/p", "prod/q")}
    return nominations(
        {"vm-a": ("prod/p",), "vm-b": ("prod/q",)},
        vms=["vm-a", "vm-b"],
        nodes=ready,
        pods=views(pods),
        ready_for=ready.get,
        grace=GRACE,
        gated={"vm-a", "vm-b"},
        hold=5.0,
        queued_at=queued_at,
    )


def _gated(
    ready: dict[str, float | None],
) -> tuple[list[tuple[str | None, str]], tuple[str, ...], float | None]:
    out = _two_gated(ready)
    return [(w.node, w.pod) for w in out.writes], out.opens, out.next_due


def test_a_gated_node_is_nominated_once_registered_and_stays_closed_until_ready() -> None:
    """Behind its gate a nomination is safe: it is written as soon as the Node registers."""
    writes, opens, _ = _gated({"vm-a": None, "vm-b": None})
    assert (writes, opens) == ([("vm-a", "prod/p"), ("vm-b", "prod/q")], ())


def test_a_ready_gated_node_waits_for_the_others_within_the_hold() -> None:
    """vm-b registered but not Ready: vm-a (Ready 1 s) stays closed, and the pass is due
    when the hold ends."""
    _, opens, due = _gated({"vm-a": 1.0, "vm-b": None})
    assert opens == ()
    assert due == pytest.approx(4.0)


def test_a_node_not_registered_yet_holds_the_gates_too() -> None:
    writes, opens, due = _gated({"vm-a": 1.0})
    assert (writes, opens) == ([("vm-a", "prod/p")], ())
    assert due == pytest.approx(4.0)


def test_the_gates_fall_together_once_all_are_ready() -> None:
    writes, opens, _ = _gated({"vm-a": 1.0, "vm-b": 0.1})
    assert writes == [("vm-a", "prod/p"), ("vm-b", "prod/q")]
    assert opens == ("vm-a", "vm-b")


def test_after_the_hold_the_ready_gates_fall_without_the_late_ones() -> None:
    _, opens, _ = _gated({"vm-a": 5.0, "vm-b": None})
    assert opens == ("vm-a",)


def test_a_gated_slot_whose_pods_are_gone_is_done_not_opened_here() -> None:
    """The decide step lifts a gate with no slot once its node is Ready (``lift_due``)."""
    nodes = {"vm-a": 2.0}
    out = nominations(
        {"vm-a": ("prod/p",)},
        vms=["vm-a"],
        nodes=nodes,
        pods={},
        ready_for=nodes.get,
        grace=GRACE,
        gated={"vm-a"},
    )
    assert (out.writes, out.opens, out.done) == ((), (), ("vm-a",))


# --- open nodes: nominated again only where the pod still fits -------------------------------


def test_a_pod_crowded_out_of_its_open_node_is_not_nominated_there_again() -> None:
    """vm-a has room for one 28Gi pod: p still holds its nomination there, so q (dropped by
    the scheduler) is not written again; with room for both, it is."""
    pods = {"prod/p": pending("p", "vm-a"), "prod/q": pending("q")}
    nodes = {"vm-a": 1.0}
    common: dict[str, Any] = {
        "vms": ["vm-a"],
        "nodes": nodes,
        "pods": views(pods),
        "ready_for": nodes.get,
        "grace": GRACE,
    }
    slots = {"vm-a": ("prod/p", "prod/q")}
    one = pod_view(pending("x")).requests
    tight = nominations(slots, free={"vm-a": one}, **common)
    assert tight.writes == ()
    assert tight.held == (("prod/p", "vm-a"), ("prod/q", "vm-a"))
    roomy = nominations(slots, free={"vm-a": one + one}, **common)
    assert [(w.pod, w.node) for w in roomy.writes] == [("prod/q", "vm-a")]


# --- the order the gates fall in -------------------------------------------------------------


def _kind(name: str, memory: str, **spec: Any) -> PodView:
    obj = factories.pod(name, namespace="prod", memory=memory, unschedulable=True, **spec)
    obj["metadata"]["uid"] = name
    obj["metadata"]["resourceVersion"] = "1"
    return pod_view(obj)


def _spread(name: str, memory: str) -> PodView:
    """A pod spread over hostnames by its own label: it refers to other pods' labels."""
    obj = factories.pod(name, namespace="prod", memory=memory, unschedulable=True)
    obj["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}},
        }
    ]
    return pod_view(obj)


def test_interchangeable_pods_are_dealt_out_in_the_order_the_scheduler_tries_them() -> None:
    """Two nodes of one big and one small pod each: the earliest big and the earliest small
    go to the first node, whatever the plan's own order; counts per node are kept."""
    pods = {
        k: _kind(k, m) for k, m in [("b1", "28Gi"), ("b2", "28Gi"), ("s1", "3Gi"), ("s2", "3Gi")]
    }
    seen = {"b2": 1.0, "s2": 2.0, "b1": 3.0, "s1": 4.0}
    assert in_queue_order([("b1", "s1"), ("b2", "s2")], pods, seen) == [
        ("b2", "s2"),
        ("b1", "s1"),
    ]


def test_pods_told_apart_by_a_node_or_by_their_labels_keep_their_slots() -> None:
    pods = {"a": _kind("a", "28Gi"), "b": _kind("b", "28Gi", node_selector={"disk": "ssd"})}
    assert in_queue_order([("a",), ("b",)], pods, {"b": 1.0, "a": 2.0}) == [("a",), ("b",)]
    with_spread = {**pods, "c": _spread("c", "28Gi"), "d": _kind("d", "28Gi")}
    slots = [("a", "c"), ("d",)]
    assert in_queue_order(slots, with_spread, {"d": 0.0}) == slots


def test_ready_gates_are_opened_earliest_pod_first() -> None:
    out = _two_gated({"vm-a": 1.0, "vm-b": 1.0}, queued_at={"prod/q": 1.0, "prod/p": 2.0})
    assert out.opens == ("vm-b", "vm-a")


# --- the lead kind: the pods kube-scheduler tries first get no nomination ---------------------


def test_the_kind_first_in_the_queue_is_left_unheld() -> None:
    """The smalls were seen first: kube-scheduler tries them while the gates are still
    falling, so they get no nomination (nothing to lose); the bigs behind them are held."""
    pods = {
        k: _kind(k, m) for k, m in [("b1", "28Gi"), ("b2", "28Gi"), ("s1", "3Gi"), ("s2", "3Gi")]
    }
    seen = {"s1": 1.0, "s2": 2.0, "b1": 3.0, "b2": 4.0}
    assert lead_kind([("b1", "s1"), ("b2", "s2")], pods, seen) == {"s1", "s2"}
    assert lead_kind([("b1", "s1"), ("b2", "s2")], pods, {**seen, "b2": 0.5}) == {"b1", "b2"}


def test_one_kind_is_left_unheld_whole() -> None:
    pods = {k: _kind(k, "28Gi") for k in ("x", "y", "z")}
    assert lead_kind([("x", "y"), ("z",)], pods, {}) == {"x", "y", "z"}


def test_no_pod_is_left_unheld_when_kinds_cannot_stand_in_or_priorities_differ() -> None:
    """Pods that refer to others' labels are not interchangeable; a lead kind of a higher
    priority than some nominee would not be held off that nominee's room (the nominator
    holds room against the same or lower priority only)."""
    pods = {"e": _kind("e", "28Gi"), "c": _spread("c2", "3Gi")}
    assert lead_kind([("e", "c")], pods, {"c": 1.0}) == frozenset()
    urgent = factories.pod("u", namespace="prod", memory="3Gi", unschedulable=True)
    urgent["spec"]["priority"] = 1000
    pods = {"f": _kind("f", "28Gi"), "u": pod_view(urgent)}
    assert lead_kind([("f", "u")], pods, {"u": 1.0}) == frozenset()


def test_an_unheld_pod_is_not_nominated_and_its_gate_still_opens() -> None:
    """The slot of vm-b holds only an unheld pod: nothing is written for it, and it is not
    done: its gate falls with the others."""
    pods = {k: pending(k.split("/")[1]) for k in ("prod/p", "prod/q")}
    out = nominations(
        {"vm-a": ("prod/p",), "vm-b": ("prod/q",)},
        vms=["vm-a", "vm-b"],
        nodes={"vm-a": 1.0, "vm-b": 1.0},
        pods=views(pods),
        ready_for={"vm-a": 1.0, "vm-b": 1.0}.get,
        grace=GRACE,
        gated={"vm-a", "vm-b"},
        hold=5.0,
        unheld={"prod/q"},
    )
    assert [(w.node, w.pod) for w in out.writes] == [("vm-a", "prod/p")]
    assert out.opens == ("vm-a", "vm-b")
    assert out.done == ()
    assert ("prod/q", "vm-b") not in out.held


def test_with_no_nomination_to_keep_a_gate_falls_as_soon_as_its_node_is_ready() -> None:
    """A plan of one kind holds nothing (all unheld): vm-a, Ready, does not wait for vm-b
    (registered, not Ready) within the hold; with a held pod on vm-b it would."""
    pods = {k: pending(k.split("/")[1]) for k in ("prod/p", "prod/q")}

    def opens(unheld: set[str]) -> tuple[str, ...]:
        return nominations(
            {"vm-a": ("prod/p",), "vm-b": ("prod/q",)},
            vms=["vm-a", "vm-b"],
            nodes={"vm-a": 1.0, "vm-b": None},
            pods=views(pods),
            ready_for={"vm-a": 1.0, "vm-b": None}.get,
            grace=GRACE,
            gated={"vm-a", "vm-b"},
            hold=5.0,
            unheld=unheld,
        ).opens

    assert opens({"prod/p", "prod/q"}) == ("vm-a",)
    assert opens({"prod/p"}) == ()
