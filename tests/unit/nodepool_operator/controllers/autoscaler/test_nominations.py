"""Which planned pods get which nomination (``_nominations``): a table over the pod's and the
planned node's states. The pods are read at the boundary, as observe reads them
(``read_pending``: their views and verdicts); the Nodes are how long each has been Ready."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.controllers.autoscaler._nominations import nominations
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
