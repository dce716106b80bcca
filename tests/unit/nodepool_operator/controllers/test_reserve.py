"""Reserved new nodes (``controllers/_reserve``): which pod goes where, and when a node opens."""

from __future__ import annotations

from typing import Any

from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._reserve import (
    RESERVED_KEY,
    Reservation,
    lets_on,
    lift_due,
    lift_patch,
    reservation_taint,
    reserved_for,
    toleration_patch,
)
from nodepool_operator.scheduling import PodView, pod_view

DEFAULTS = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]


def pod(tolerations: list[dict[str, Any]] | None) -> PodView:
    spec: dict[str, Any] = {"containers": []}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return pod_view({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


def test_a_planned_pod_gets_the_toleration_of_its_node_appended_once() -> None:
    wanted = {"key": RESERVED_KEY, "operator": "Equal", "value": "pool-a1", "effect": "NoSchedule"}
    assert toleration_patch(pod(DEFAULTS), "pool-a1") == [
        {"op": "add", "path": "/spec/tolerations/-", "value": wanted}
    ]
    assert toleration_patch(pod(None), "pool-a1") == [
        {"op": "add", "path": "/spec/tolerations", "value": [wanted]}
    ]
    assert toleration_patch(pod([]), "pool-a1") == toleration_patch(pod(None), "pool-a1")
    assert not lets_on(pod(DEFAULTS), "pool-a1")
    assert lets_on(pod([*DEFAULTS, wanted]), "pool-a1")  # no grant: it may already
    # a toleration for another reserved node does not let it onto this one
    assert not lets_on(pod([{**wanted, "value": "pool-b2"}]), "pool-a1")
    # one of every NoSchedule taint, or of the reservation key whatever the node, does
    assert lets_on(pod([{"operator": "Exists", "effect": "NoSchedule"}]), "pool-a1")
    assert lets_on(pod([{"key": RESERVED_KEY, "operator": "Exists"}]), "pool-a1")


def test_a_node_names_its_reservation_and_the_lift_keeps_every_other_taint() -> None:
    other = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    node = {
        "metadata": {"name": "pool-a1", "resourceVersion": "42"},
        "spec": {"taints": [other, reservation_taint("pool-a1")]},
    }
    assert reserved_for(node_fields(node)) == "pool-a1"
    assert reserved_for(node_fields({"metadata": {}, "spec": {"taints": [other]}})) is None
    assert lift_patch(node_fields(node)) == [
        {"op": "test", "path": "/spec/taints/1", "value": reservation_taint("pool-a1")},
        {"op": "remove", "path": "/spec/taints/1"},
    ]


def test_slots_take_the_new_vm_names_in_record_order_and_never_an_old_one() -> None:
    r = Reservation()
    r.planned([("u1", "u2"), ("u3",), ()], known=["pool-old"])  # an empty slot is no slot
    assert r.assign(["pool-old"]) == {}
    assert r.assign(["pool-old", "pool-n1"]) == {"pool-n1": ("u1", "u2")}
    assert r.assign(["pool-old", "pool-n1", "pool-n2", "pool-n3"]) == {
        "pool-n1": ("u1", "u2"),
        "pool-n2": ("u3",),
    }
    r.forget(["pool-n1"])
    assert r.assign(["pool-old", "pool-n2", "pool-n3"]) == {"pool-n2": ("u3",)}
    # a second scale-up while pool-n3 was known: its slot gets the next new name
    r.planned([("u4",)], known=["pool-old", "pool-n2", "pool-n3"])
    assert r.assign(["pool-old", "pool-n2", "pool-n3", "pool-n4"]) == {
        "pool-n2": ("u3",),
        "pool-n4": ("u4",),
    }


def test_vms_recorded_before_a_second_scale_up_name_the_first_ones_slots() -> None:
    """A burst planned in two raises: the first raise's VMs are recorded by the time the
    second is planned, before any look named its slots; they are not old VMs."""
    r = Reservation()
    r.planned([("u1",), ("u2",)], known=["pool-old"])
    r.planned([("u3",)], known=["pool-old", "pool-n1", "pool-n2"])
    assert r.assign(["pool-old", "pool-n1", "pool-n2", "pool-n3"]) == {
        "pool-n1": ("u1",),
        "pool-n2": ("u2",),
        "pool-n3": ("u3",),
    }


def test_a_later_plan_replaces_what_the_booting_nodes_slots_hold() -> None:
    """The first raise planned u1 onto pool-n1; the second, made while pool-n1 boots, packs
    u1 and u2 onto it (its booting node 0) and u3 onto a new node, and a VM nobody planned
    (pool-x, booting) takes its booting node 1. A registered node's slot is kept."""
    r = Reservation()
    r.planned([("u0",)], known=["pool-old"])
    assert r.assign(["pool-old", "pool-n0"]) == {"pool-n0": ("u0",)}
    r.planned([("u1",)], known=["pool-old", "pool-n0"])
    r.planned(
        [("u3",)],
        known=["pool-old", "pool-n0", "pool-n1", "pool-x"],
        booting=[("u1", "u2"), ("u4",)],
        settled={"pool-old", "pool-n0"},
    )
    assert r.assign(["pool-old", "pool-n0", "pool-n1", "pool-x", "pool-n3"]) == {
        "pool-n0": ("u0",),
        "pool-n1": ("u1", "u2"),
        "pool-x": ("u4",),
        "pool-n3": ("u3",),
    }


def test_the_unheld_pods_follow_the_latest_plan_and_go_with_their_slots() -> None:
    """The unheld of a slot forgotten are forgotten too; a pod left unheld by one plan and
    held by the next (planned again, onto a booting node) is held."""
    r = Reservation()
    r.planned([("u1", "u2"), ("u3",)], known=["pool-old"], unheld=["u1", "u3"])
    assert r.unheld == {"u1", "u3"}
    assert r.assign(["pool-old", "pool-n1", "pool-n2"]) == {
        "pool-n1": ("u1", "u2"),
        "pool-n2": ("u3",),
    }
    r.forget(["pool-n2"])
    assert r.unheld == {"u1"}
    r.planned(
        [("u4",)],
        known=["pool-old", "pool-n1", "pool-n2"],
        booting=[("u1", "u2")],
        settled={"pool-old"},
        unheld=["u4"],
    )
    assert r.unheld == {"u4"}


def test_slots_of_a_timed_out_scale_up_do_not_take_the_next_ones_names() -> None:
    r = Reservation()
    r.planned([("u1",), ("u2",)], known=["pool-old"])
    assert r.assign(["pool-old", "pool-n1"]) == {"pool-n1": ("u1",)}
    r.drop_unnamed()  # the second VM never came: provisioning timed out
    r.planned([("u9",)], known=["pool-old", "pool-n1"])
    assert r.assign(["pool-old", "pool-n1", "pool-n5"]) == {
        "pool-n1": ("u1",),
        "pool-n5": ("u9",),  # not u2's, planned for a VM that was never made
    }


def test_a_reserved_node_opens_when_its_pods_are_bound_or_after_the_grace() -> None:
    slot = ("u1", "u2")
    assert not lift_due(slot=slot, waiting={"u1"}, ready_for=None, grace=30)  # not Ready
    assert not lift_due(slot=slot, waiting={"u1", "x"}, ready_for=5, grace=30)
    assert lift_due(slot=slot, waiting={"x"}, ready_for=5, grace=30)  # both bound (or gone)
    assert lift_due(slot=slot, waiting={"u1"}, ready_for=30, grace=30)  # waited long enough
    assert lift_due(slot=None, waiting={"u1"}, ready_for=0, grace=30)  # no slot: open at Ready
    assert not lift_due(slot=None, waiting=set(), ready_for=None, grace=30)
