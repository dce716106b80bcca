"""The demo's second act, on what its watches hold."""

from __future__ import annotations

from typing import Any

from nodepool_operator.demo import _scaledown as act
from nodepool_operator.demo._clusterview import evicted_by_api
from nodepool_operator.demo._workload import DEMO_LABEL, Role
from tests import factories


def _node(name: str, *, cordoned: bool = False) -> dict[str, Any]:
    return factories.node(name, unschedulable=cordoned)


def _pod(name: str, node: str, ns: str = "prod", phase: str = "Running") -> dict[str, Any]:
    return factories.pod(
        name,
        namespace=ns,
        labels={DEMO_LABEL: str(Role.FITS)},
        node=node,
        phase=phase,
        status={"podIP": "10.244.0.1" if phase == "Running" else None},
    )


def test_the_victim_is_the_node_with_the_fewest_demo_pods() -> None:
    nodes = [_node("a"), _node("b"), _node("c")]
    pods = [_pod("p1", "a"), _pod("p2", "a"), _pod("p3", "b"), _pod("p4", "c"), _pod("p5", "c")]
    assert act.victim_node(nodes, pods) == "b"
    assert act.pods_on("b", pods) == [("prod", "p3")]
    assert act.victim_node([], pods) is None


def test_running_counts_fitting_pods_with_an_ip() -> None:
    assert act.running([_pod("a", "n"), _pod("b", "n", phase="Pending")]) == 1


def _replica(name: str, node: str, *, deleting: bool = False) -> dict[str, Any]:
    pod = _pod(name, node)
    pod["metadata"]["labels"] = {DEMO_LABEL: act.REPLICATED, "app": act.DEPLOYMENT_NAME}
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "controller": True}]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


def _tainted(name: str) -> dict[str, Any]:
    taint = {"key": act.DISRUPTING_TAINT_KEY, "effect": "NoSchedule"}
    return {"metadata": {"name": name}, "spec": {"taints": [taint]}}


def _sized(name: str, node: str, memory: str, role: Role = Role.FITS) -> dict[str, Any]:
    pod = _pod(name, node)
    pod["metadata"]["labels"][DEMO_LABEL] = str(role)
    pod["spec"]["containers"] = [{"name": "app", "resources": {"requests": {"memory": memory}}}]
    return pod


def test_making_room_deletes_the_victims_bare_pods_the_extras_and_one_per_other_node() -> None:
    pods = [
        _sized("v1", "c", "12Gi"),
        _sized("a28", "a", "28Gi"),
        _sized("a4", "a", "4Gi"),
        _sized("b28", "b", "28Gi"),  # b's only fitting pod stays: b keeps a bare pod
        _sized("dev", "b", "4Gi", Role.UNWATCHED),
        _sized("big", "", "120Gi", Role.TOO_BIG),
        _replica("r1", "c"),  # owned by a ReplicaSet: never deleted
    ]
    assert act.making_room("c", pods) == [
        ("prod", "a4"),
        ("prod", "big"),
        ("prod", "dev"),
        ("prod", "v1"),
    ]


def test_the_deployment_prefers_the_victim_and_the_budget_covers_its_pods() -> None:
    deployment = act.deployment("node-7")
    spec = deployment["spec"]
    assert spec["replicas"] == act.REPLICAS == 2
    affinity = spec["template"]["spec"]["affinity"]["nodeAffinity"]
    # preferred, not required: replacements must be able to land on another node
    assert list(affinity) == ["preferredDuringSchedulingIgnoredDuringExecution"]
    (term,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["preference"]["matchFields"][0]["values"] == ["node-7"]
    budget = act.budget()
    # every replica needed: the drain is refused until a spare replica runs
    assert budget["spec"]["minAvailable"] == act.REPLICAS
    assert act.surge_patch() == {"spec": {"replicas": act.REPLICAS + 1}}
    assert (
        budget["spec"]["selector"]["matchLabels"].items()
        <= spec["template"]["metadata"]["labels"].items()
    )


def test_replicas_on_counts_running_replicas_not_bare_pods() -> None:
    pods = [_replica("r1", "n"), _replica("r2", "n", deleting=True), _pod("bare", "n")]
    assert act.replicas_on("n", pods) == 1


def test_a_drain_is_pdb_blocked_while_a_covered_pod_stays_and_the_budget_allows_none() -> None:
    pods = [_replica("r1", "n1")]
    none_allowed = {"status": {"disruptionsAllowed": 0}}
    assert act.pdb_blocked([_tainted("n1")], pods, none_allowed)
    assert act.pdb_blocked([_node("n1", cordoned=True)], pods, none_allowed)
    assert not act.pdb_blocked([_tainted("n1")], pods, {"status": {"disruptionsAllowed": 1}})
    assert not act.pdb_blocked([_node("n1")], pods, none_allowed)
    assert not act.pdb_blocked([_tainted("n1")], [_pod("bare", "n1")], none_allowed)
    assert not act.pdb_blocked([_tainted("n1")], [_replica("r", "n1", deleting=True)], none_allowed)
    assert not act.pdb_blocked([_tainted("n1")], pods, None)


def test_refused_evictions_are_counted_from_the_drains_events() -> None:
    events: list[dict[str, Any]] = [
        {"reason": "EvictionBlocked", "series": {"count": 3}},
        {"reason": "EvictionBlocked"},
        {"reason": "EvictionBlocked", "deprecatedCount": 0},
        {"reason": "ScaleDownBlocked", "series": {"count": 9}},
    ]
    assert act.refused_evictions(events) == 5


def test_blockers_read_the_autoscalers_unremovable_nodes() -> None:
    autoscaler = {
        "status": {
            "unremovableNodes": [
                {"node": "a", "reason": "NotReplicated", "pod": "prod/web-28gi-0"},
                {"node": "b", "reason": "NodeDoNotDisrupt"},
            ]
        }
    }
    assert act.blockers(autoscaler) == [
        "a: NotReplicated (pod prod/web-28gi-0)",
        "b: NodeDoNotDisrupt",
    ]
    assert act.blockers(None) == []


def test_evictions_are_the_pods_the_api_server_marked_evicted() -> None:
    def pod(reason: str, status: str = "True") -> dict[str, Any]:
        condition = {"type": "DisruptionTarget", "status": status, "reason": reason}
        return {"status": {"conditions": [{"type": "Ready", "status": "True"}, condition]}}

    assert evicted_by_api(pod("EvictionByEvictionAPI"))
    assert not evicted_by_api(pod("EvictionByEvictionAPI", status="False"))
    assert not evicted_by_api(pod("PreemptionByScheduler"))
    assert not evicted_by_api({"status": {}})
