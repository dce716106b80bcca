"""The demo's numbers: API activity from metrics, samples, figures, leaks and the timeline."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from kubeloop import Registry, RuntimeMetrics
from nodepool_operator.cloud import Instance
from nodepool_operator.demo._apiactivity import ApiActivity, api_activity, parse_activity
from nodepool_operator.demo._figures import MEANINGS, Figures, compute_figures, leaked_vms
from nodepool_operator.demo._sample import PodCounts, Sample, not_triggered_notes, take_sample
from nodepool_operator.demo._timeline import milestones
from nodepool_operator.demo._workload import POOL_LABEL, POOL_NAME, Workload
from tests import factories


def vm(name: str, id: str, *, pool: str = POOL_NAME, state: str = "running") -> Instance:
    return Instance(
        id=id,
        name=name,
        instance_type="mem96.large",
        image="kubeloop-node",
        state=state,  # type: ignore[arg-type]
        private_ip="10.0.0.1",
        public_ip=None,
        tags={POOL_LABEL: pool},
        created_at=0.0,
        launched_at=None,
    )


def node(name: str, *, ready: bool = True, provider_id: str = "") -> dict[str, Any]:
    return factories.node(
        name, labels={POOL_LABEL: POOL_NAME}, ready=ready, provider_id=provider_id or None
    )


def event(pod: str, note: str, when: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    namespace, name = pod.split("/")
    return {
        "reason": "NotTriggerScaleUp",
        "note": note,
        "eventTime": when,
        "regarding": {"kind": "Pod", "namespace": namespace, "name": name},
    }


def bound(pods: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    for pod in pods:
        if pod["metadata"]["name"] in names:
            pod["spec"]["nodeName"] = "mem96-abcde"
    return pods


# -- API activity -----------------------------------------------------------------------------


def test_api_activity_sums_writes_and_counts_each_409_once() -> None:
    registry = Registry()
    metrics = RuntimeMetrics(registry)
    metrics.api_writes_total.labels("nodepool", "create", "nodes", "").inc(3)
    metrics.api_writes_total.labels("autoscaler", "update", "nodepools.kubeloop.dev", "scale").inc()
    metrics.api_writes_total.labels("", "create", "customresourcedefinitions", "").inc(2)
    metrics.conflicts_total.labels("nodepool", "nodepools.kubeloop.dev", "retried").inc(2)
    metrics.conflicts_total.labels("nodepool", "nodepools.kubeloop.dev", "resolved").inc(2)
    metrics.conflicts_total.labels("autoscaler", "nodepools.kubeloop.dev", "gave_up").inc()
    activity = api_activity(registry)
    assert activity == ApiActivity(
        writes=6,
        conflicts=3,
        writes_by_controller={"": 2, "autoscaler": 1, "nodepool": 3},
        writes_by_target={
            "- create customresourcedefinitions": 2,
            "autoscaler update nodepools.kubeloop.dev/scale": 1,
            "nodepool create nodes": 3,
        },
        conflicts_by_target={
            "autoscaler nodepools.kubeloop.dev": 1,
            "nodepool nodepools.kubeloop.dev": 2,
        },
    )


def test_api_activity_since_a_baseline() -> None:
    registry = Registry()
    metrics = RuntimeMetrics(registry)
    metrics.api_writes_total.labels("", "create", "customresourcedefinitions", "").inc(2)
    baseline = api_activity(registry)
    metrics.api_writes_total.labels("nodepool", "create", "nodes", "").inc(3)
    metrics.conflicts_total.labels("nodepool", "nodes", "retried").inc()
    assert api_activity(registry).since(baseline) == ApiActivity(
        writes=3,
        conflicts=1,
        writes_by_controller={"nodepool": 3},
        writes_by_target={"nodepool create nodes": 3},
        conflicts_by_target={"nodepool nodes": 1},
    )


def test_parse_activity_reads_escaped_labels_and_skips_comments() -> None:
    text = (
        "# HELP kubeloop_api_writes_total Writes\n"
        "# TYPE kubeloop_api_writes_total counter\n"
        'kubeloop_api_writes_total{controller="a\\"b",verb="create"} 4\n'
        "kubeloop_api_writes_total_other 9\n"
    )
    assert parse_activity(text) == ApiActivity(
        writes=4, writes_by_controller={'a"b': 4}, writes_by_target={'a"b create ': 4}
    )


def test_empty_registry_has_no_activity() -> None:
    assert api_activity(Registry()) == ApiActivity()


# -- samples ------------------------------------------------------------------------------


def test_take_sample_counts_the_demo_pods_only() -> None:
    workload = Workload()
    pods = bound(workload.pods(), "web-28gi-0", "batch-4gi-1", "unwatched-4gi")
    pods.append({"metadata": {"name": "other", "namespace": "prod"}, "spec": {}})
    sample = take_sample(
        1.5,
        pods=pods,
        nodes=[node("mem96-a"), node("mem96-b", ready=False)],
        pool={
            "spec": {"targetNodes": 3},
            "status": {"currentNodes": 2, "scaleOperation": "active"},
        },
        autoscaler={"status": {"lastDecision": "scale up 0 -> 3"}},
        vms=[vm("mem96-a", "i-1"), vm("mem96-b", "i-2", state="pending")],
        api=ApiActivity(writes=7),
        events=[event("prod/too-big-120gi", "pod didn't trigger scale-up: TooBig")],
    )
    assert sample.fitting == PodCounts(pending=11, scheduled=2)
    assert sample.by_namespace["dev"] == PodCounts(pending=0, scheduled=1)
    assert sample.pending == 17 - 3
    assert sample.extras_bound == ("dev/unwatched-4gi",)
    assert sample.not_triggering == ("dev/unwatched-4gi", "prod/too-big-120gi")
    assert (sample.target_nodes, sample.current_nodes, sample.ready_nodes, sample.nodes) == (
        3,
        2,
        1,
        2,
    )
    assert (sample.vms, sample.vms_running, sample.scale_operation) == (2, 1, "active")
    assert sample.last_decision == "scale up 0 -> 3"
    assert not sample.converged


def test_converged_when_every_fitting_pod_is_bound() -> None:
    workload = Workload()
    pods = bound(workload.pods(), *(p["metadata"]["name"] for p in workload.fitting_pods()))
    sample = take_sample(
        9.0, pods=pods, nodes=[], pool=None, autoscaler=None, vms=[], api=ApiActivity()
    )
    assert sample.converged
    assert sample.pending == 4


def test_latest_not_triggered_note_wins() -> None:
    notes = not_triggered_notes(
        [
            event("prod/a", "new", "2026-01-01T00:00:02.000000Z"),
            event("prod/a", "old", "2026-01-01T00:00:01.000000Z"),
            {"reason": "TriggeredScaleUp", "regarding": {"kind": "Pod", "name": "b"}},
            {**event("prod/c", "not a pod"), "regarding": {"kind": "NodePool", "name": "c"}},
        ]
    )
    assert notes == {"prod/a": "new"}


# -- figures ------------------------------------------------------------------------------


def test_figures_and_their_meanings_agree() -> None:
    assert [f.name for f in fields(Figures)] == list(MEANINGS)


def test_compute_figures_of_a_perfect_run() -> None:
    workload = Workload()
    final = Sample(
        t=12.0,
        fitting=PodCounts(0, 13),
        nodes=3,
        not_triggering=("a", "b", "c", "d"),
        api=ApiActivity(writes=40, conflicts=1),
    )
    vms = [vm(f"mem96-{i}", f"i-{i}") for i in range(3)]
    figures = compute_figures(
        workload,
        final,
        vms=vms,
        nodes=[node(f"mem96-{i}") for i in range(3)],
        pool=None,
        duplicates=0,
        seconds=11.96,
        pods_running=13,
        nodes_drained=1,
        evictions=2,
        pdb_blocked_s=1.26,
    )
    assert figures.to_json() == {
        "pods": 17,
        "pods_fitting": 13,
        "pods_scheduled": 13,
        "pods_not_triggering": 4,
        "nodes": 3,
        "nodes_lower_bound": 3,
        "vms": 3,
        "duplicate_vms": 0,
        "leaked_vms": 0,
        "api_writes": 40,
        "conflicts": 1,
        "seconds": 12.0,
        "pods_running": 13,
        "nodes_drained": 1,
        "evictions": 2,
        "pdb_blocked_s": 1.3,
        "evictions_refused": 0,
    }
    assert figures.problems() == []


def test_problems_name_what_went_wrong() -> None:
    figures = Figures(
        pods=17,
        pods_fitting=13,
        pods_scheduled=12,
        pods_not_triggering=4,
        nodes=4,
        nodes_lower_bound=3,
        vms=5,
        duplicate_vms=1,
        leaked_vms=1,
        api_writes=0,
        conflicts=0,
        seconds=1.0,
    )
    assert figures.problems() == [
        "1 fitting pods not scheduled",
        "13 fitting pods not running",
        "no node was drained in the scale-down act",
        "4 nodes where 3 would do",
        "1 duplicate VMs",
        "1 leaked VMs",
    ]


def test_a_vm_is_accounted_for_by_node_name_provider_id_or_instance_record() -> None:
    vms = [
        vm("mem96-a", "i-1"),  # registered as Node mem96-a
        vm("renamed", "i-2"),  # Node's providerID names it
        vm("mem96-c", "i-3"),  # an intent in status.instances, no Node yet
        vm("mem96-d", "i-4"),  # nobody knows it: leaked
    ]
    nodes = [node("mem96-a"), node("other", provider_id="sim:///i-2")]
    pool = {"status": {"instances": [{"name": "mem96-c", "state": "pending"}]}}
    assert [v.id for v in leaked_vms(vms, nodes, pool)] == ["i-4"]


def test_vms_of_other_pools_are_not_leaks_of_this_one() -> None:
    figures = compute_figures(
        Workload(),
        Sample(t=1.0),
        vms=[vm("x-1", "i-9", pool="other")],
        nodes=[],
        pool=None,
        duplicates=0,
        seconds=1.0,
    )
    assert (figures.vms, figures.leaked_vms) == (1, 0)


# -- timeline -----------------------------------------------------------------------------


def test_milestones_tell_the_story_in_order() -> None:
    samples = [
        Sample(t=0.0, fitting=PodCounts(13, 0)),
        Sample(
            t=2.5,
            fitting=PodCounts(13, 0),
            target_nodes=3,
            scale_operation="active",
            last_decision="scale up 0 -> 3",
            not_triggered={"prod/too-big-120gi": "TooBig"},
            scale_events=("NodePool mem96: scale up 0 -> 3",),
        ),
        Sample(
            t=6.0,
            fitting=PodCounts(0, 13),
            target_nodes=3,
            ready_nodes=3,
            vms=3,
            last_decision="scale up 0 -> 3",
            extras_bound=("dev/unwatched-4gi",),
            scale_events=("NodePool mem96: scale up 0 -> 3",),
        ),
    ]
    found = milestones(samples)
    assert [m.text for m in found if m.detail] == [
        "autoscaler decided: scale up 0 -> 3",
        "autoscaler on prod/too-big-120gi: TooBig",
    ]
    texts = [(m.t, m.text) for m in found]
    assert texts == [
        (2.5, "autoscaler scaled: NodePool mem96: scale up 0 -> 3"),
        (2.5, "autoscaler decided: scale up 0 -> 3"),
        (2.5, "targetNodes 0 -> 3"),
        (2.5, "scaleOperation active"),
        (2.5, "autoscaler on prod/too-big-120gi: TooBig"),
        (6.0, "scaleOperation inactive"),
        (6.0, "VMs 0 -> 3"),
        (6.0, "ready nodes 0 -> 3"),
        (6.0, "dev/unwatched-4gi bound into spare room (it did not ask for it)"),
        (6.0, "all 13 fitting pods scheduled"),
    ]


def test_scale_events_are_the_autoscalers_own_copies_by_time() -> None:
    def scaled(kind: str, note: str, when: str) -> dict[str, Any]:
        return {
            "reason": "TriggeredScaleUp",
            "note": note,
            "eventTime": when,
            "regarding": {"kind": kind, "name": POOL_NAME},
        }

    events = [
        scaled("Autoscaler", "scale up 3 -> 4", "2026-01-01T00:00:09.000000Z"),
        scaled("NodePool", "scale up 0 -> 3", "2026-01-01T00:00:02.000000Z"),
        scaled("Autoscaler", "scale up 0 -> 3", "2026-01-01T00:00:02.000000Z"),
    ]
    sample = take_sample(
        1.0, pods=[], nodes=[], pool=None, autoscaler=None, vms=[], api=ApiActivity(), events=events
    )
    assert sample.scale_events == ("scale up 0 -> 3", "scale up 3 -> 4")
