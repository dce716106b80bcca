"""Scheduling simulation, part 4: which nodes a pool can do without, and DaemonSet overhead."""

from __future__ import annotations

from typing import Any

from nodepool_operator.scheduling import (
    RemovalReason,
    Resources,
    ScaleDownNode,
    Taint,
    daemonset_overhead,
    daemonset_view,
    pod_view,
    removal_order,
)
from tests import factories

GI = 2**30
NODE = Resources(cpu=4000, memory=16 * GI, pods=110)


def pod(
    name: str,
    cpu: str = "1",
    *,
    owner: str | None = None,
    annotations: dict[str, str] | None = None,
) -> Any:
    ref = factories.owner_reference(owner) if owner else None
    return pod_view(
        factories.pod(name, namespace="prod", cpu=cpu, owner=ref, annotations=annotations)
    )


def node(name: str, *pods: Any) -> ScaleDownNode:
    return ScaleDownNode(name, NODE, {"kubernetes.io/hostname": name}, (), tuple(pods))


def test_empty_first_then_least_utilised_that_fits_elsewhere_then_busy() -> None:
    order = removal_order(
        [
            node("a", pod("a1", "2")),  # 50 %: at the threshold, busy
            node("b", pod("b1", "1")),  # 25 %: its pod fits on a
            node("c", pod("ds", "1", owner="DaemonSet")),  # only a DaemonSet pod: empty
            node("d", pod("d1", "500m")),  # 12.5 %: least utilised
        ]
    )
    assert [(d.node, d.reason) for d in order] == [
        ("c", RemovalReason.EMPTY),
        ("d", RemovalReason.UNDERUTILIZED),
        ("b", RemovalReason.UNDERUTILIZED),
        ("a", RemovalReason.BUSY),
    ]


def test_picks_can_go_together_room_taken_by_earlier_moves_counts() -> None:
    # x and y each hold 1.5 cpu; z holds 2.5. Moving x onto z leaves z 0 room, so y must stay.
    order = removal_order(
        [
            node("x", pod("x1", "1500m")),
            node("y", pod("y1", "1500m")),
            node("z", pod("z1", "2500m")),
        ],
        threshold=0.7,
    )
    removable = [d.node for d in order if d.removable]
    assert removable == ["x"]  # x's pod went to y; y's two then fit nowhere
    assert {d.node: d.reason for d in order}["y"] is RemovalReason.BUSY


def test_preferred_nodes_are_picked_first_and_held_ones_after_the_others() -> None:
    # x and y each hold 1.5 cpu; z holds 2.5: only one of x and y can go (see above)
    nodes = [
        node("x", pod("x1", "1500m")),
        node("y", pod("y1", "1500m")),
        node("z", pod("z1", "2500m")),
        node("e"),
    ]
    plain = removal_order(nodes, threshold=0.7)
    assert [d.node for d in plain if d.removable] == ["e", "x"]
    # y named: picked first, before the empty e too; x's pod then has no place
    named = removal_order(nodes, threshold=0.7, prefer={"y"})
    assert [(d.node, d.reason) for d in named] == [
        ("y", RemovalReason.UNDERUTILIZED),
        ("e", RemovalReason.EMPTY),
        ("x", RemovalReason.BUSY),
        ("z", RemovalReason.BUSY),
    ]
    # e held (a budget refuses an eviction now): x and y are picked before it, and their
    # pods take its room
    held = removal_order(nodes, threshold=0.7, held={"e"})
    assert [(d.node, d.reason) for d in held][:3] == [
        ("x", RemovalReason.UNDERUTILIZED),
        ("y", RemovalReason.UNDERUTILIZED),
        ("e", RemovalReason.BUSY),
    ]
    # named and held: the named first, the held ones among them last
    both = removal_order(nodes, threshold=0.7, prefer={"e", "x"}, held={"e"})
    assert [d.node for d in both if d.removable] == ["x", "e"]


def test_do_not_disrupt_pod_keeps_its_node_last() -> None:
    keep = pod("k", "100m", annotations={"kubeloop.dev/do-not-disrupt": "true"})
    order = removal_order([node("a", keep), node("b", pod("b1", "2"))], threshold=0.9)
    assert [d.node for d in order] == ["b", "a"]
    assert order[-1].reason is RemovalReason.BLOCKED
    assert not order[-1].removable


def test_mirror_pods_do_not_make_a_node_busy() -> None:
    static = pod("etcd", annotations={"kubernetes.io/config.mirror": "x"})
    assert removal_order([node("a", static)])[0].reason is RemovalReason.EMPTY


def test_daemonset_overhead_counts_only_daemonsets_that_land_there() -> None:
    def ds(uid: str, cpu: str, **spec: Any) -> Any:
        template = {
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                **spec,
            }
        }
        return daemonset_view(
            {
                "metadata": {"name": uid, "namespace": "kube-system", "uid": uid},
                "spec": {"template": template},
            }
        )

    sets = [
        ds("all", "200m"),
        ds("gpu-only", "1", nodeSelector={"gpu": "true"}),
        ds("tolerant", "300m", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
    ]
    labels = {"kubernetes.io/os": "linux"}
    assert daemonset_overhead(sets, labels, ()) == Resources(cpu=500, pods=2)
    tainted = (Taint("dedicated", "NoSchedule", "db"),)
    assert daemonset_overhead(sets, labels, tainted) == Resources(cpu=300, pods=1)
    assert daemonset_overhead(sets, labels, (), present={"all"}) == Resources(cpu=300, pods=1)
