"""Scheduling simulation, part 1: quantities, pod requests, classification and fit checks."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

import nodepool_operator.scheduling as scheduling
from nodepool_operator.scheduling import (
    FitReason,
    NodeTemplate,
    PodReason,
    PodRef,
    Resources,
    Taint,
    classify,
    format_bytes,
    format_cpu,
    parse_bytes,
    parse_cpu,
    parse_quantity,
    pod_fits_node,
    pod_fits_template,
    pod_requests,
    read_pending,
    tolerates,
)
from tests import factories

GI = 2**30
MI = 2**20

UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/3 nodes are available: 3 Insufficient memory.",
}


def make_pod(
    name: str = "p",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    namespace: str = "prod",
    conditions: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "app", "resources": {"requests": requests}}], **spec},
        "status": {
            "phase": "Pending",
            "conditions": [UNSCHEDULABLE] if conditions is None else conditions,
        },
    }


def container(name: str, restart_policy: str | None = None, **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


@pytest.fixture
def mem96() -> NodeTemplate:
    return NodeTemplate.from_pool("mem96.large", cpu=16, memory="96Gi", disk="100Gi")


def test_public_names_are_sorted_and_importable() -> None:
    assert scheduling.__all__ == sorted(scheduling.__all__)
    for name in scheduling.__all__:
        assert hasattr(scheduling, name)


# --- quantities -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("500m", 500),
        ("2", 2000),
        ("0.5", 500),
        ("1.5", 1500),
        (".5", 500),
        ("5.", 5000),
        ("+1", 1000),
        ("100u", 1),  # rounds up, like Quantity.MilliValue()
        ("250000n", 1),
        ("1e3", 1_000_000),
        ("2k", 2_000_000),
        (3, 3000),
    ],
)
def test_parse_cpu_to_millicores(text: str | int, millicores: int) -> None:
    assert parse_cpu(text) == millicores


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("1Ki", 2**10),
        ("1Mi", 2**20),
        ("28Gi", 28 * GI),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1k", 10**3),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1e3", 1000),
        ("1E3", 1000),  # E followed by digits is an exponent, not exa
        ("1.5e3", 1500),
        ("12345", 12345),
        ("1.5Gi", 3 * GI // 2),
        ("500m", 1),  # half a byte rounds up to one
        (0, 0),
    ],
)
def test_parse_bytes(text: str | int, amount: int) -> None:
    assert parse_bytes(text) == amount


def test_parse_quantity_is_exact() -> None:
    assert parse_quantity("0.1") == Fraction(1, 10)
    assert parse_quantity("-1.5Ki") == -1536
    assert parse_quantity("1e-3") == Fraction(1, 1000)


@pytest.mark.parametrize(
    "text", ["28Gb", "", "Gi", "1.2.3", " 1", "1 Gi", "1e", "abc", "--1", "1gi", "1e1000", "0x10"]
)
def test_invalid_quantities_name_the_string(text: str) -> None:
    with pytest.raises(ValueError, match=f"invalid quantity {text!r}"):
        parse_bytes(text)


def test_negative_and_boolean_quantities_are_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_cpu("-1")
    with pytest.raises(ValueError, match="not a number"):
        parse_quantity(True)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (96 * GI, "96Gi"),
        (120 * GI, "120Gi"),
        (3100 * MI, "3100Mi"),
        (1234567890, "1.1Gi"),
        (512, "512"),
        (0, "0"),
        (2**60, "1Ei"),
        (-2 * GI, "-2Gi"),
    ],
)
def test_format_bytes(amount: int, text: str) -> None:
    assert format_bytes(amount) == text


def test_format_cpu() -> None:
    assert format_cpu(2000) == "2"
    assert format_cpu(1500) == "1500m"
    assert format_cpu(0) == "0"


def test_resources_arithmetic_and_fit() -> None:
    a = Resources(cpu=1000, memory=GI, pods=1, extended=(("nvidia.com/gpu", 1),))
    b = Resources(cpu=500, memory=2 * GI, pods=1)
    assert a + b == Resources(cpu=1500, memory=3 * GI, pods=2, extended=(("nvidia.com/gpu", 1),))
    assert (a - b).cpu == 500
    assert a.max(b) == Resources(cpu=1000, memory=2 * GI, pods=1, extended=(("nvidia.com/gpu", 1),))
    assert b.fits_in(a + b)
    assert not a.fits_in(Resources(cpu=4000, memory=4 * GI, pods=10))
    assert a.exceeding(Resources(cpu=4000, memory=4 * GI, pods=10)) == ["nvidia.com/gpu"]
    assert a.get("nvidia.com/gpu") == 1
    assert a.get("example.com/foo") == 0


def test_resources_from_resource_list() -> None:
    allocatable = {
        "cpu": "15890m",
        "memory": "93Gi",
        "pods": "110",
        "ephemeral-storage": "95Gi",
        "hugepages-2Mi": "0",
    }
    parsed = Resources.from_resource_list(allocatable)
    assert parsed == Resources(
        cpu=15890,
        memory=93 * GI,
        ephemeral_storage=95 * GI,
        pods=110,
        extended=(("hugepages-2Mi", 0),),
    )
    with pytest.raises(ValueError, match="'4 cores'"):
        Resources.from_resource_list({"cpu": "4 cores"})


# --- effective requests ---------------------------------------------------------------------


def test_requests_sum_containers_and_count_one_pod() -> None:
    pod = make_pod(cpu="500m", memory="1Gi")
    pod["spec"]["containers"].append(container("log", cpu="250m", memory="256Mi"))
    assert pod_requests(pod) == Resources(cpu=750, memory=GI + 256 * MI, pods=1)


def test_init_container_larger_than_sum_wins_per_resource() -> None:
    pod = make_pod(cpu="1", memory="1Gi")
    pod["spec"]["initContainers"] = [container("migrate", cpu="2", memory="512Mi")]
    assert pod_requests(pod) == Resources(cpu=2000, memory=GI, pods=1)


def test_overhead_is_added_after_the_max() -> None:
    pod = make_pod(cpu="1", memory="1Gi")
    pod["spec"]["initContainers"] = [container("init", cpu="3")]
    pod["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    assert pod_requests(pod) == Resources(cpu=3250, memory=GI + 120 * MI, pods=1)


def test_sidecars_add_to_the_sum_and_to_later_init_containers() -> None:
    pod = make_pod(cpu="1", memory="1Gi")
    pod["spec"]["initContainers"] = [
        container("before", cpu="1500m"),  # runs before the sidecar: alone
        container("proxy", "Always", cpu="500m", memory="128Mi"),
        container("after", cpu="2"),  # runs next to the proxy: 2 + 0.5
    ]
    # running = 1 + 0.5 = 1.5 cpu; init peak = max(1.5, 0.5, 2.5) = 2.5 cpu
    assert pod_requests(pod) == Resources(cpu=2500, memory=GI + 128 * MI, pods=1)


def test_sidecar_only_pod_sums_with_containers() -> None:
    pod = make_pod(cpu="1", memory="1Gi")
    pod["spec"]["initContainers"] = [container("proxy", "Always", cpu="1", memory="1Gi")]
    assert pod_requests(pod) == Resources(cpu=2000, memory=2 * GI, pods=1)


def test_limits_without_requests_count_as_requests() -> None:
    pod = make_pod()
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "1"},
    }
    assert pod_requests(pod) == Resources(
        cpu=1000, memory=4 * GI, pods=1, extended=(("nvidia.com/gpu", 1),)
    )


def test_pod_level_requests_replace_the_container_sum() -> None:
    pod = make_pod(cpu="1", memory="1Gi", resources={"requests": {"memory": "8Gi"}})
    assert pod_requests(pod) == Resources(cpu=1000, memory=8 * GI, pods=1)


def test_ephemeral_storage_is_requested() -> None:
    pod = make_pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "10Gi"
    assert pod_requests(pod).ephemeral_storage == 10 * GI


def test_a_malformed_request_names_the_pod() -> None:
    with pytest.raises(ValueError, match=r"pod prod/bad: invalid quantity '28Gb'"):
        pod_requests(make_pod("bad", memory="28Gb"))


# --- classification -------------------------------------------------------------------------


def test_unschedulable_pod_is_a_candidate_and_keeps_the_message() -> None:
    verdict = classify(make_pod(memory="28Gi"))
    assert verdict.candidate
    assert verdict.reason is PodReason.UNSCHEDULABLE
    assert verdict.message == UNSCHEDULABLE["message"]


def test_message_text_is_never_parsed() -> None:
    # Only the structured condition decides; a message naming a PVC does not veto the pod,
    # and a message saying "Insufficient memory" does not make a gated pod a candidate.
    pvc = dict(UNSCHEDULABLE, message="0/3 nodes are available: pod has unbound PVCs.")
    assert classify(make_pod(conditions=[pvc])).candidate
    gated = dict(UNSCHEDULABLE, reason="SchedulingGated")
    assert classify(make_pod(conditions=[gated])).reason is PodReason.NOT_UNSCHEDULABLE


@pytest.mark.parametrize(
    "conditions",
    [
        [],  # not looked at by the scheduler yet
        [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}],
        [{"type": "PodScheduled", "status": "True"}],  # binding in progress
        [{"type": "Ready", "status": "False", "reason": "Unschedulable"}],
    ],
)
def test_not_unschedulable(conditions: list[dict[str, Any]]) -> None:
    assert classify(make_pod(conditions=conditions)).reason is PodReason.NOT_UNSCHEDULABLE


def test_bound_pod_with_missing_secret_is_not_a_candidate() -> None:
    pod = make_pod(nodeName="node-1", conditions=[{"type": "PodScheduled", "status": "True"}])
    pod["status"]["containerStatuses"] = [
        {"name": "app", "state": {"waiting": {"reason": "CreateContainerConfigError"}}}
    ]
    assert classify(pod).reason is PodReason.BOUND
    # Even with a stale Unschedulable condition, a node name wins.
    assert classify(make_pod(nodeName="node-1")).reason is PodReason.BOUND


def test_nominated_pod_waits_for_preemption() -> None:
    pod = make_pod()
    pod["status"]["nominatedNodeName"] = "node-2"
    assert classify(pod).reason is PodReason.NOMINATED


def test_gated_pod() -> None:
    pod = make_pod(schedulingGates=[{"name": "example.com/quota"}])
    assert classify(pod).reason is PodReason.GATED


def test_terminating_pod_wins_over_everything() -> None:
    pod = make_pod(nodeName="node-1")
    pod["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert classify(pod).reason is PodReason.TERMINATING


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pod(phase: str) -> None:
    pod = make_pod()
    pod["status"]["phase"] = phase
    assert classify(pod).reason is PodReason.FINISHED


def test_empty_pod_does_not_crash() -> None:
    assert classify({}).reason is PodReason.NOT_UNSCHEDULABLE
    assert pod_requests({}) == Resources(pods=1)


# --- fit: resources -------------------------------------------------------------------------


def test_seed_28gi_pod_fits_a_96gi_node(mem96: NodeTemplate) -> None:
    assert pod_fits_template(make_pod(memory="28Gi"), mem96)


def test_120gi_pod_is_too_big_and_names_memory(mem96: NodeTemplate) -> None:
    result = pod_fits_template(make_pod(memory="120Gi"), mem96)
    assert not result
    assert result.reason is FitReason.TOO_BIG
    assert result.detail == "memory 120Gi > 96Gi"


def test_too_big_names_every_short_resource(mem96: NodeTemplate) -> None:
    result = pod_fits_template(make_pod(cpu="17", memory="100Gi"), mem96)
    assert result.detail == "cpu 17 > 16, memory 100Gi > 96Gi"


def test_extended_resource_missing_from_the_template_is_too_big(mem96: NodeTemplate) -> None:
    pod = make_pod()
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    assert pod_fits_template(pod, mem96).detail == "nvidia.com/gpu 1 > 0"
    gpu = NodeTemplate.from_pool("g", cpu=8, memory="64Gi", extended={"nvidia.com/gpu": 4})
    assert pod_fits_template(pod, gpu)


def test_reserved_fraction_is_off_by_default_and_shrinks_allocatable() -> None:
    # S15: a 95Gi pod fits the VM's size but not a node that keeps 7 % back.
    pod = make_pod(memory="95Gi")
    plain = NodeTemplate.from_pool("m", cpu=16, memory="96Gi")
    assert plain.allocatable.memory == 96 * GI
    assert pod_fits_template(pod, plain)
    reserved = NodeTemplate.from_pool("m", cpu=16, memory="96Gi", reserved_fraction=0.07)
    assert reserved.allocatable.cpu == 14880
    result = pod_fits_template(pod, reserved)
    assert result.reason is FitReason.TOO_BIG
    assert result.detail == "memory 95Gi > 89.3Gi"
    assert pod_fits_template(make_pod(memory="28Gi"), reserved)


def test_daemonset_overhead_and_max_pods() -> None:
    template = NodeTemplate.from_pool(
        "m",
        cpu=4,
        memory="16Gi",
        max_pods=3,
        daemonset_overhead=Resources(cpu=500, memory=GI, pods=2),
    )
    assert template.allocatable == Resources(cpu=3500, memory=15 * GI, pods=1)
    with pytest.raises(ValueError, match="reserved_fraction"):
        NodeTemplate.from_pool("m", cpu=4, memory="16Gi", reserved_fraction=1.0)


def test_pod_fits_node_checks_free_room() -> None:
    free = Resources(cpu=2000, memory=20 * GI, pods=5)
    assert pod_fits_node(make_pod(memory="20Gi"), free, {}, [])
    result = pod_fits_node(make_pod(memory="28Gi"), free, {}, [])
    assert result.reason is FitReason.INSUFFICIENT_RESOURCES
    assert result.detail == "memory 28Gi > 20Gi"
    no_slots = Resources(cpu=2000, memory=20 * GI, pods=0)
    assert pod_fits_node(make_pod(), no_slots, {}, []).detail == "pods 1 > 0"


# --- fit: labels ----------------------------------------------------------------------------


def test_node_selector(mem96: NodeTemplate) -> None:
    ssd = NodeTemplate.from_pool("m", cpu=16, memory="96Gi", labels={"disktype": "ssd"})
    assert pod_fits_template(make_pod(nodeSelector={"disktype": "ssd"}), ssd)
    # kubelet's own labels are on the template, so the common os selector matches.
    assert pod_fits_template(make_pod(nodeSelector={"kubernetes.io/os": "linux"}), ssd)
    result = pod_fits_template(make_pod(nodeSelector={"disktype": "hdd"}), ssd)
    assert result.reason is FitReason.NODE_SELECTOR_MISMATCH
    assert result.detail == "disktype=hdd (node has disktype=ssd)"
    missing = pod_fits_template(make_pod(nodeSelector={"gpu": "true"}), mem96)
    assert missing.detail == "gpu=true (node has no gpu)"


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


LABELS = {"zone": "a", "generation": "5", "tier": "mem"}


@pytest.mark.parametrize(
    ("expression", "fits"),
    [
        (expr("zone", "In", "a", "b"), True),
        (expr("zone", "In", "b"), False),
        (expr("zone", "NotIn", "b"), True),
        (expr("zone", "NotIn", "a"), False),
        (expr("missing", "NotIn", "x"), True),  # absent label satisfies NotIn
        (expr("missing", "In", "x"), False),
        (expr("tier", "Exists"), True),
        (expr("missing", "Exists"), False),
        (expr("missing", "DoesNotExist"), True),
        (expr("tier", "DoesNotExist"), False),
        (expr("generation", "Gt", "4"), True),
        (expr("generation", "Gt", "5"), False),
        (expr("generation", "Lt", "6"), True),
        (expr("generation", "Lt", "5"), False),
        (expr("zone", "Gt", "1"), False),  # not an integer
        (expr("missing", "Lt", "9"), False),
        (expr("zone", "Like", "a"), False),  # unknown operator
    ],
)
def test_affinity_operators(expression: dict[str, Any], fits: bool) -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="96Gi", labels=LABELS)
    pod = make_pod(affinity=required({"matchExpressions": [expression]}))
    result = pod_fits_template(pod, template)
    assert bool(result) is fits
    if not fits:
        assert result.reason is FitReason.AFFINITY_MISMATCH


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="96Gi", labels=LABELS)
    both = {"matchExpressions": [expr("zone", "In", "a"), expr("tier", "In", "cpu")]}
    pod = make_pod(affinity=required(both))
    result = pod_fits_template(pod, template)
    assert result.reason is FitReason.AFFINITY_MISMATCH
    assert result.detail == "tier In [cpu]"
    either = make_pod(affinity=required(both, {"matchExpressions": [expr("zone", "In", "a")]}))
    assert pod_fits_template(either, template)
    neither = make_pod(affinity=required(both, {"matchExpressions": [expr("zone", "In", "z")]}))
    assert pod_fits_template(neither, template).detail == "none of 2 nodeSelectorTerms match"


def test_empty_term_matches_nothing() -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="96Gi")
    assert not pod_fits_template(make_pod(affinity=required({})), template)


def test_match_fields_never_match_a_new_node_but_can_match_an_existing_one() -> None:
    # DaemonSet pods pin themselves with matchFields on metadata.name.
    term = {"matchFields": [expr("metadata.name", "In", "node-1")]}
    pod = make_pod(affinity=required(term))
    template = NodeTemplate.from_pool("m", cpu=16, memory="96Gi")
    assert pod_fits_template(pod, template).reason is FitReason.AFFINITY_MISMATCH
    free = Resources(cpu=1000, memory=GI, pods=1)
    assert pod_fits_node(pod, free, {}, [], node_name="node-1")
    assert not pod_fits_node(pod, free, {}, [], node_name="node-2")
    not_in = make_pod(affinity=required({"matchFields": [expr("metadata.name", "NotIn", "x")]}))
    assert pod_fits_node(not_in, free, {}, [], node_name="node-2")


# --- fit: taints ----------------------------------------------------------------------------

GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "true")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, True),
        ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, True),  # Equal default
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoExecute"}, False),  # ...but only its effect
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Gt", "value": "1"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, Any], tolerated: bool) -> None:
    assert tolerates([toleration], GPU_TAINT) is tolerated


def test_untolerated_taint_blocks_and_prefer_no_schedule_does_not() -> None:
    template = NodeTemplate.from_pool(
        "gpu",
        cpu=16,
        memory="96Gi",
        taints=[
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
            Taint("spot", "PreferNoSchedule"),
        ],
    )
    result = pod_fits_template(make_pod(), template)
    assert result.reason is FitReason.UNTOLERATED_TAINT
    assert result.detail == "nvidia.com/gpu=true:NoSchedule"
    tolerant = make_pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert pod_fits_template(tolerant, template)


def test_no_execute_taint_must_be_tolerated() -> None:
    taints = [Taint("dedicated", "NoExecute", "batch")]
    free = Resources(cpu=1000, memory=GI, pods=1)
    assert not pod_fits_node(make_pod(), free, {}, taints)
    toleration = {"key": "dedicated", "value": "batch", "effect": "NoExecute"}
    assert pod_fits_node(make_pod(tolerations=[toleration]), free, {}, taints)


def test_scheduler_order_reports_taint_before_size() -> None:
    template = NodeTemplate.from_pool("m", cpu=16, memory="96Gi", taints=[GPU_TAINT])
    assert pod_fits_template(make_pod(memory="500Gi"), template).reason is (
        FitReason.UNTOLERATED_TAINT
    )


def test_taint_validation_and_rendering() -> None:
    with pytest.raises(ValueError, match="effect"):
        Taint("k", "NoScheduleX")
    assert str(Taint("k", "NoSchedule")) == "k:NoSchedule"
    assert str(PodRef("prod", "web-0")) == "prod/web-0"


def test_a_nomination_and_the_verdict_under_it_are_read_once_at_the_boundary() -> None:
    """``status.nominatedNodeName`` becomes the view's ``nominated``, the resourceVersion its
    ``version`` (a write's precondition), and a nominated pod's verdict says what it would be
    with no nomination: what ``_nominations`` and the candidates need, without reading the
    pod again."""
    pod = factories.pod("p", namespace="prod", memory="1Gi", unschedulable=True)
    pod["metadata"]["resourceVersion"] = "9"
    pod["status"]["nominatedNodeName"] = "vm-a"
    read = read_pending(pod)
    assert (read.reason, read.unnominated) == (PodReason.NOMINATED, PodReason.UNSCHEDULABLE)
    assert read.view is not None
    assert (read.view.nominated, read.view.version) == ("vm-a", "9")
    del pod["status"]["nominatedNodeName"]
    pod["metadata"]["resourceVersion"] = "10"
    read = read_pending(pod)
    assert (read.reason, read.unnominated) == (PodReason.UNSCHEDULABLE, None)
    assert read.view is not None
    assert read.view.nominated is None
    pod["spec"]["schedulingGates"] = [{"name": "wait"}]
    pod["status"]["nominatedNodeName"] = "vm-a"
    assert classify(pod).unnominated is PodReason.GATED
